"""Metrics: cumulative Prometheus counters, per-batch JSON lines, rebuilt by `kafka-iceberg metrics`."""

from __future__ import annotations

import io
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from kafka_iceberg.observe.metrics import JsonLines, Metrics, metrics_from_jsonl
from kafka_iceberg.observe.progress import Progress
from kafka_iceberg.observe.report import BatchReport


def samples(text):
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def report(batch_id, written, failed=0, **kw):
    return BatchReport(
        pipeline="p",
        table="n.t",
        batch_id=batch_id,
        stream="direct",
        records_in=written + failed,
        records_written=written,
        records_failed=failed,
        committed=True,
        commit_latency_s=0.2,
        **kw,
    )


def test_counters_accumulate_per_table_and_batch_sizes_are_tracked():
    m = Metrics()
    m.record(
        report(0, 10, 2, expectations_passed={"x": 9}, expectations_failed={"x": 1}, files_created=1, bytes_written=500)
    )
    m.record(report(1, 30, 0, lag=5))
    got = samples(m.prometheus_text())
    lab = (("pipeline", "p"), ("table", "n.t"))
    assert got[("kafka_iceberg_records_written_total", lab)] == 40
    assert got[("kafka_iceberg_records_failed_total", lab)] == 2
    assert got[("kafka_iceberg_commits_success_total", lab)] == 2
    assert got[("kafka_iceberg_batches_flushed_total", lab)] == 2
    assert got[("kafka_iceberg_files_created_total", lab)] == 1
    assert got[("kafka_iceberg_bytes_written_total", lab)] == 500
    assert got[("kafka_iceberg_expectation_failed_total", (("expectation", "x"), *lab))] == 1
    assert got[("kafka_iceberg_batch_size_min", lab)] == 12
    assert got[("kafka_iceberg_batch_size_max", lab)] == 30
    assert got[("kafka_iceberg_batch_size_avg", lab)] == 21
    assert got[("kafka_iceberg_consumer_lag", lab)] == 5
    assert got[("kafka_iceberg_commit_latency_seconds_count", lab)] == 2


def test_failed_batch_counts_as_failed_commit():
    m = Metrics()
    m.record(BatchReport(pipeline="p", table="n.t", batch_id=0, stream="s", records_in=3, error="boom"))
    got = samples(m.prometheus_text())
    assert got[("kafka_iceberg_commits_failed_total", (("pipeline", "p"), ("table", "n.t")))] == 1


def test_json_lines_round_trip_into_the_same_counters(tmp_path):
    sink = JsonLines(tmp_path, "p")
    live = Metrics()
    for r in (report(0, 10, 1), report(1, 5, records_lost={"orders[0] 4-7": 4})):
        sink.write(r.to_json())
        live.record(r)
    rebuilt = metrics_from_jsonl([sink.path])
    keys = [k for k in samples(live.prometheus_text()) if "latency" not in k[0] and "last_commit" not in k[0]]
    assert {k: samples(rebuilt.prometheus_text())[k] for k in keys} == {
        k: samples(live.prometheus_text())[k] for k in keys
    }


def test_http_endpoint_binds_loopback():
    m = Metrics()
    m.record(report(0, 7))
    server = m.serve(0)
    try:
        host, port = server.server_address[:2]
        assert host == "127.0.0.1"
        body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
        assert 'kafka_iceberg_records_written_total{pipeline="p",table="n.t"} 7.0' in body
    finally:
        server.shutdown()


def test_progress_is_quiet_off_a_terminal_and_informative_on_one():
    quiet = io.StringIO()
    Progress(stream=quiet).update(report(0, 10))
    assert quiet.getvalue() == ""
    loud = io.StringIO()
    p = Progress(stream=loud, enabled=True)
    p.update(report(3, 1000, 2, lag=42, snapshot_id=99))
    line = loud.getvalue()
    assert "n.t batch 3: +1,000 rows" in line and "2 bad" in line and "lag 42" in line and "snapshot 99" in line
    assert "lost" not in line
    p.update(report(4, 10, records_lost={"orders[0] 4-7": 4, "orders[1] 0-1": 2}))
    assert "n.t batch 4: +10 rows" in loud.getvalue() and "0 bad, 6 lost from Kafka, lag ?" in loud.getvalue()


def test_a_late_progress_event_does_not_overwrite_the_last_batchs_lag():
    """Spark's listener bus is asynchronous: batch 2's event may arrive after the run recorded batch 3."""
    from kafka_iceberg.observe.listener import record_progress

    metrics = Metrics()

    def progress(batch_id, behind):
        return {"batchId": batch_id, "processedRowsPerSecond": 10.0,
                "sources": [{"metrics": {"maxOffsetsBehindLatest": str(behind)}}]}  # fmt: skip

    record_progress(metrics, ("p", "n.t"), progress(3, 0))  # the run's own read of the last progress
    record_progress(metrics, ("p", "n.t"), progress(2, 2))  # the listener's late event
    lag = ("kafka_iceberg_consumer_lag", (("pipeline", "p"), ("table", "n.t")))
    assert samples(metrics.prometheus_text())[lag] == 0
    record_progress(metrics, ("p", "n.t"), progress(4, 5))
    assert samples(metrics.prometheus_text())[lag] == 5
