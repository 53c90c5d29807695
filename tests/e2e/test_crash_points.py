"""A crash at each named point of a batch's life (``KAFKA_ICEBERG_FAULT``), then a restart: every
good record is in the table once, every bad one in the error topic and the quarantine table once.

``committed`` under Spark's Kafka source reproduces the error-topic duplicate of issue 21: the
restarted query runs the batch whose table commit landed again, and it used to publish that
batch's bad records a second time.
"""

from __future__ import annotations

import json

import pytest

from tests.support.jobs import coordinates
from tests.support.kafka import consume_all, create_topic, produce
from tests.support.project import entry_point, project
from tests.support.readers import READERS, reader_env
from tests.support.run import unique
from tests.support.verify import assert_verified

pytestmark = [pytest.mark.integration, pytest.mark.slow]

RECORDS = 300


def _pipeline(ns: str, topic: str, errors_topic: str, engine: str = "auto", decoder: str = "auto") -> str:
    return f"""
pipeline: crash
catalog: lake
tables:
  - name: events
    namespace: {ns}
    source: {{topics: [{topic}], format: flatten, max_records_per_batch: 100, decoder: {decoder}}}
    schema: {{columns: {{id: long}}}}
    schema_evolution: strict
    partition_window: none
    errors: {{error_topic: {errors_topic}, quarantine_table: {ns}.events_quarantine}}
    write: {{engine: {engine}}}
"""


# Each case is about 3 minutes on a busy 2-core machine. The chaos test crashes at every point for
# both readers (with the Arrow writer's single pass, so at ``written`` too: test_exactly_once.py);
# these pin the cause of issue 21 and the window of the Arrow decoder writing where it parses
# (write/certified.py): the files of both of the batch's jobs written, the commit not made.
@pytest.mark.parametrize(
    ("reader", "point", "engine", "decoder"),
    [
        ("spark", "committed", "auto", "auto"),
        ("spark", "written", "arrow", "arrow"),
    ],
)
def test_a_crash_at_a_point_of_the_batch_then_a_restart_is_exactly_once(
    stack, lake, tmp_path, reader, point, engine, decoder
):
    ns, topic, errors_topic = unique("crash"), unique("crash_in"), unique("crash_errors")
    create_topic(stack.kafka_bootstrap, topic, partitions=2)
    values = [json.dumps({"id": i}) if i % 10 else f"bad {i}" for i in range(RECORDS)]
    for p in (0, 1):
        produce(stack.kafka_bootstrap, topic, [(None, v) for v in values[p::2]], partition=p)
    path = project(tmp_path, _pipeline(ns, topic, errors_topic, engine, decoder), extra_env=reader_env(reader))
    args = ("--pipeline", str(path), "--env", READERS[reader])
    crashed = entry_point("ingest-flatten", *args, stack_dir=stack.run_dir, extra_env={"KAFKA_ICEBERG_FAULT": point})
    assert crashed.returncode == -9, f"no crash at {point}: {crashed.returncode}\n{crashed.stderr[-3000:]}"
    assert "written where parsed" in crashed.stderr  # auto takes the Arrow decoder for flatten too (stop 35)
    final = entry_point("ingest-flatten", *args, stack_dir=stack.run_dir)
    assert final.returncode == 0, final.stderr[-3000:]

    catalog = lake.pyiceberg()
    rows = coordinates(catalog, f"{ns}.events")
    assert len(rows) == len(set(rows)) == RECORDS - RECORDS // 10
    bad = {(topic, i % 2, i // 2) for i in range(0, RECORDS, 10)}
    published = [
        (h["kafka_iceberg.errors.topic"].decode(), int(h["kafka_iceberg.errors.partition"]),
         int(h["kafka_iceberg.errors.offset"]))
        for h in (dict(m.headers) for m in consume_all(stack.kafka_bootstrap, errors_topic))
    ]  # fmt: skip
    assert sorted(published) == sorted(bad), f"error topic after a crash at {point}"
    quarantined = coordinates(catalog, f"{ns}.events_quarantine")
    assert sorted(quarantined) == sorted(bad), f"quarantine table after a crash at {point}"
    assert_verified(path, READERS[reader])
