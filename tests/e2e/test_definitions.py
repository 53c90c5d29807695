"""Tables declared with decorators and a YAML table naming a Python transform, run end to end."""

from __future__ import annotations

import threading

import pytest

from kafka_iceberg.observe.metrics import Metrics
from kafka_iceberg.observe.progress import Progress
from kafka_iceberg.run import Observers, open_session, prepare, run
from tests.support.kafka import produce
from tests.support.project import REPO
from tests.support.verify import assert_verified

pytestmark = pytest.mark.integration


def test_decorated_table_and_yaml_transform(stack, lake):
    produce(
        stack.kafka_bootstrap,
        "orders_py",
        [
            ("1", '{"id": 1, "name": "tea", "amount": 2.5}'),
            ("2", '{"id": 2, "name": "refund", "amount": -2.5}'),  # expect_or_drop: positive_amount
            ("1", '{"id": 1, "name": "green tea", "amount": 3.0}'),  # upsert of id 1
        ],
        partition=0,
    )
    produce(
        stack.kafka_bootstrap,
        "events_py",
        [
            ("a", '{"type": "checkout", "n": 1}'),
            ("b", '{"type": "view", "n": 2}'),
            ("c", '{"type": "checkout", "n": 3}'),
        ],
        partition=0,
    )
    prepared = prepare(REPO / "fixtures" / "pipelines" / "decorated.yml", env_name="local")
    spark = open_session(prepared)
    run(prepared, spark, stop=threading.Event(), observers=Observers(Metrics(), Progress(enabled=False)))

    orders = lake.pyiceberg().load_table("sales.orders_py").scan().to_arrow().to_pylist()
    assert [(r["id"], r["name"], r["amount"]) for r in orders] == [(1, "GREEN TEA", 3.0)]  # transform upper-cased
    events = lake.pyiceberg().load_table("web.events").scan().to_arrow().to_pylist()
    assert sorted(r["offset"] for r in events) == [0, 2]  # the YAML transform kept checkout events only
    assert_verified(REPO / "fixtures" / "pipelines" / "decorated.yml")  # what the filter left out: dropped
