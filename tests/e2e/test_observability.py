"""After a run: the Prometheus counters and the event-log table agree with what actually landed."""

from __future__ import annotations

import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from kafka_iceberg.observe.eventlog import EventLog
from tests.support.kafka import consume_all, produce
from tests.support.run import run_pipeline, unique
from tests.support.verify import assert_verified

pytestmark = pytest.mark.integration


def scrape(metrics):
    server = metrics.serve(0)
    try:
        port = server.server_address[1]
        text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    finally:
        server.shutdown()
    return {
        (s.name, s.labels.get("expectation")): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.labels.get("table", "").endswith(".events")
    }


def test_counters_and_event_log_match_the_table_and_the_error_topic(tmp_path, lake, stack, spark):
    ns, topic, errors_topic = unique("obs"), unique("events"), unique("events_errors")
    records = [(str(i), f'{{"id": {i}, "kind": "{"click" if i % 3 else "view"}"}}') for i in range(40)]
    records += [(f"bad{i}", "{broken") for i in range(7)]
    produce(stack.kafka_bootstrap, topic, records, partition=0)
    yaml_text = f"""
pipeline: obs
catalog: lake
tables:
  - name: events
    namespace: {ns}
    source: {{topics: [{topic}], format: flatten, max_records_per_batch: 15}}
    schema: {{columns: {{id: long, kind: string}}}}
    expectations:
      clicks_only: {{expr: "kind = 'click'", on_violation: drop}}
    errors: {{error_topic: {errors_topic}}}
"""
    event_log = EventLog(spark, "lake", f"{ns}.event_log")
    ran = run_pipeline(tmp_path, yaml_text, event_log=event_log)
    assert len(ran.reports) == 4  # 47 records in batches of at most 15

    landed = lake.pyiceberg().load_table(f"{ns}.events").scan().to_arrow().num_rows
    published = len(consume_all(stack.kafka_bootstrap, errors_topic))
    views = sum(1 for i in range(40) if i % 3 == 0)
    assert landed == 40 - views and published == 7

    got = scrape(ran.metrics)
    assert got[("kafka_iceberg_records_in_total", None)] == 47
    assert got[("kafka_iceberg_records_written_total", None)] == landed
    assert got[("kafka_iceberg_records_failed_total", None)] == 7
    assert got[("kafka_iceberg_records_error_topic_total", None)] == published
    assert got[("kafka_iceberg_records_dropped_total", None)] == views
    assert got[("kafka_iceberg_expectation_failed_total", "clicks_only")] == views
    assert got[("kafka_iceberg_batches_flushed_total", None)] == 4
    assert got[("kafka_iceberg_commits_success_total", None)] == 4
    assert got[("kafka_iceberg_batch_size_max", None)] == 15
    assert got[("kafka_iceberg_consumer_lag", None)] == 0

    events = lake.pyiceberg().load_table(f"{ns}.event_log").scan().to_arrow().to_pylist()
    batches = [e for e in events if e["kind"] == "batch"]
    assert len(batches) == 4
    assert sum(e["records_written"] for e in batches) == landed
    assert sum(e["records_failed"] for e in batches) == 7
    assert sum(e["records_error_topic"] for e in batches) == published
    assert {e["table_name"] for e in batches} == {f"{ns}.events"}
    assert all(e["snapshot_id"] is not None and e["commit_latency_ms"] > 0 for e in batches)
    assert_verified(tmp_path / "pipelines" / "p.yml")  # the drops, the error topic and the rows: every offset once
