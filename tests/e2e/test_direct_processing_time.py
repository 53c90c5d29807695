"""``processing_time`` jobs on the direct reader, run as users run them (``ingest-flatten`` in its
own process): records are committed while the job runs, a topic created mid-run that matches the
pattern is picked up, tables take turns one batch per interval however busy a topic is, and
SIGTERM ends the job after its batch with nothing lost or repeated."""

from __future__ import annotations

import itertools
import json
import threading
import time

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from kafka_iceberg.local.readback import pyiceberg_catalog
from tests.support.jobs import OFFSETS_KEY, Job, committed, coordinates, props, snapshots
from tests.support.kafka import create_topic, produce
from tests.support.project import project
from tests.support.readers import reader_env
from tests.support.run import unique

pytestmark = pytest.mark.integration


def pattern_pipeline(ns: str, pattern: str) -> str:
    return f"""
pipeline: pattern
catalog: lake
tables:
  - name: events
    namespace: {ns}
    source: {{topic_pattern: "{pattern}", format: flatten, max_records_per_batch: 40}}
    schema: {{columns: {{id: long}}}}
    schema_evolution: strict
    partition_window: none
    trigger: {{processing_time: PT1S}}
"""


def send(bootstrap: str, topic: str, partition: int, ids: range) -> set[tuple[str, int, int]]:
    """Records ``{"id": i}`` into one partition; their coordinates (offsets follow ``ids`` from 0)."""
    produce(bootstrap, topic, [(None, json.dumps({"id": i})) for i in ids], partition=partition)
    return {(topic, partition, i) for i in ids}


def test_a_processing_time_job_on_the_direct_reader_takes_a_topic_created_while_it_runs(stack, tmp_path):
    bootstrap, catalog = stack.kafka_bootstrap, pyiceberg_catalog(stack.describe())
    prefix, ns = unique("ptdirect"), unique("ptdirect")
    first, second, table = f"{prefix}_a", f"{prefix}_b", f"{ns}.events"
    create_topic(bootstrap, first, partitions=2)
    sent = send(bootstrap, first, 0, range(60)) | send(bootstrap, first, 1, range(40))
    path = project(tmp_path, pattern_pipeline(ns, f"{prefix}_.*"), extra_env=reader_env("direct"))
    job = Job(path, stack.run_dir, "direct", env_name="direct")
    try:
        job.wait_for(lambda: committed(catalog, table) == 100, "the first topic's records")
        create_topic(bootstrap, second, partitions=2)
        sent |= send(bootstrap, second, 1, range(30))
        job.wait_for(lambda: committed(catalog, table) == 130, "the records of a topic created while it runs")
        sent |= send(bootstrap, first, 0, range(60, 70))
        job.wait_for(lambda: committed(catalog, table) == 140, "records produced after it went idle")
        assert job.stop() == 0, job.stderr()[-3000:]
    finally:
        job.kill()
    rows = coordinates(catalog, table)
    assert sorted(rows) == sorted(sent)
    ends = {(first, 0): 70, (first, 1): 40, (second, 0): 0, (second, 1): 30}
    group = f"kafka-iceberg.pattern.{table}"
    request = ConsumerGroupTopicPartitions(group, [TopicPartition(t, p) for t, p in ends])
    admin = AdminClient({"bootstrap.servers": bootstrap})
    offsets = admin.list_consumer_group_offsets([request])[group].result(timeout=10).topic_partitions
    assert {(tp.topic, tp.partition): tp.offset for tp in offsets} == ends  # what lag tools read


def two_tables(ns: str, busy: str, quiet: str, interval: int) -> str:
    table = """
  - name: {name}
    namespace: {ns}
    source: {{topics: [{topic}], format: flatten}}
    schema: {{columns: {{id: long}}}}
    schema_evolution: strict
    partition_window: none
    trigger: {{processing_time: PT{interval}S}}
"""
    return "pipeline: turns\ncatalog: lake\ntables:" + "".join(
        table.format(name=name, ns=ns, topic=topic, interval=interval)
        for name, topic in (("busy", busy), ("quiet", quiet))
    )


def test_tables_take_turns_one_batch_per_interval_however_busy_a_topic_is(stack, tmp_path):
    # Until stop 67 a table took batch after batch while its topic had records: a topic that never fell
    # quiet starved the job's other tables, and committed every second or so whatever the trigger said.
    bootstrap, catalog = stack.kafka_bootstrap, pyiceberg_catalog(stack.describe())
    ns, busy, quiet, interval = unique("turns"), unique("turns_busy"), unique("turns_quiet"), 5
    for topic in (busy, quiet):
        create_topic(bootstrap, topic, partitions=1)
    send(bootstrap, quiet, 0, range(10))
    stop = threading.Event()

    def stream() -> None:  # one record every 20 ms into the busy topic, until the test ends
        producer, i = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0}), 0
        while not stop.is_set():
            producer.produce(busy, value=json.dumps({"id": i}).encode(), partition=0)
            producer.poll(0)
            i += 1
            time.sleep(0.02)
        producer.flush(10)

    streaming = threading.Thread(target=stream, daemon=True)
    streaming.start()
    job = Job(project(tmp_path, two_tables(ns, busy, quiet, interval), extra_env=reader_env("direct")),
              stack.run_dir, "turns", env_name="direct")  # fmt: skip
    busy_commits = lambda: [s for s in snapshots(catalog, f"{ns}.busy") if OFFSETS_KEY in props(s)]  # noqa: E731
    try:
        job.wait_for(lambda: committed(catalog, f"{ns}.quiet") == 10, "the quiet table's records", timeout=180)
        job.wait_for(lambda: len(busy_commits()) >= 4, "four commits of the busy table", timeout=180)
        assert job.stop() == 0, job.stderr()[-3000:]
    finally:
        stop.set()
        streaming.join(30)
        job.kill()
    times = [s.timestamp_ms / 1000 for s in busy_commits()]
    gaps = [round(b - a, 2) for a, b in itertools.pairwise(times)]
    # One batch a round, a round every 5 s: gaps vary by how long each round's batches took. The
    # first round, whose batches warm the JVM up, may take longer than the interval: the second
    # then starts at once, as Spark's trigger does.
    assert all(gap >= interval / 2 for gap in gaps[1:]), gaps
    rows = coordinates(catalog, f"{ns}.busy")
    assert sorted(rows) == [(busy, 0, i) for i in range(committed(catalog, f"{ns}.busy"))]
