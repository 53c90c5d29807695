"""Records that go from Kafka before the job reads them: a clear stop, or a logged skip when allowed.

Retention (or ``delete_records``, or a topic deleted and created again) can remove records a stopped
or lagging job has not read. With ``kafka.fail_on_data_loss: true`` (the default) the run stops
naming the partition, the lost offsets and the setting to change; nothing after the last commit is
written. With ``false`` it reads on from what Kafka still holds. Both readers, as users run them.
"""

from __future__ import annotations

import json
import re

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient

from kafka_iceberg.errors import DataLossError
from tests.support.kafka import produce
from tests.support.readers import reader_env
from tests.support.run import run_pipeline, unique

pytestmark = pytest.mark.integration


def environment(reader: str, fail_on_data_loss: bool) -> dict[str, str]:
    """The local environment with ``reader``, under its own name (``loss``), fail_on_data_loss as given."""
    text = reader_env("direct")["direct"] if reader == "direct" else reader_env("spark").get("local", "")
    if not text:
        from tests.support.project import REPO

        text = (REPO / "environments" / "local.yml").read_text()
    text = re.sub(r"(?m)^(  reader: .*)$", rf"\1\n  fail_on_data_loss: {str(fail_on_data_loss).lower()}", text)
    return {"loss": text}


@pytest.mark.parametrize("reader", ["spark", "direct"])
def test_records_gone_before_they_are_read_stop_the_run_or_are_skipped_when_allowed(tmp_path, lake, stack, reader):
    ns, topic = unique("loss"), unique("items")
    pipeline = f"""
pipeline: loss
catalog: lake
tables:
  - name: items
    namespace: {ns}
    source: {{topics: [{topic}], format: flatten}}
    partition_window: none
"""

    def ids():
        return sorted(r["id"] for r in lake.pyiceberg().load_table(f"{ns}.items").scan().to_arrow().to_pylist())

    produce(stack.kafka_bootstrap, topic, [(None, json.dumps({"id": i})) for i in range(4)], partition=0)
    run_pipeline(tmp_path / "first", pipeline, env_name="loss", extra_env=environment(reader, True))
    assert ids() == [0, 1, 2, 3]

    # While the job is stopped, 4-11 arrive and retention takes 4-7 before it reads them.
    produce(stack.kafka_bootstrap, topic, [(None, json.dumps({"id": i})) for i in range(4, 12)], partition=0)
    admin = AdminClient({"bootstrap.servers": stack.kafka_bootstrap})
    for future in admin.delete_records([TopicPartition(topic, 0, 8)]).values():
        future.result(timeout=30)

    stopped = run_pipeline(
        tmp_path / "second", pipeline, env_name="loss", extra_env=environment(reader, True), expect_error=True
    )
    assert isinstance(stopped.error, DataLossError), stopped.error
    message = str(stopped.error)
    lost = (
        f"{topic}[0] offsets 4-7 are gone"
        if reader == "direct"
        else f"Cannot fetch offset 4 (TopicPartition: {topic}-0)"
    )
    assert message.startswith("DATA LOSS: ") and lost in message, message
    assert "kafka.fail_on_data_loss: false in " in message and "environments/loss.yml" in message, message
    assert ids() == [0, 1, 2, 3]  # nothing after the last commit

    run_pipeline(tmp_path / "third", pipeline, env_name="loss", extra_env=environment(reader, False))
    assert ids() == [0, 1, 2, 3, 8, 9, 10, 11]
