"""Metrics per table, cumulative, in Prometheus form; per batch as JSON lines.

``kafka-iceberg metrics`` rebuilds the cumulative view from the JSON-lines files a run left
behind, so counters survive the process that produced them.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kafka_iceberg.observe.report import BatchReport

PREFIX = "kafka_iceberg"
LABELS = ("pipeline", "table")
LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)


@dataclass
class _BatchSizes:
    count: int = 0
    total: int = 0
    low: int | None = None
    high: int = 0


@dataclass
class Metrics:
    """Cumulative metrics of every table a process writes, in a private Prometheus registry."""

    registry: Any = field(default=None)
    _sizes: dict[tuple[str, str], _BatchSizes] = field(default_factory=dict)
    _progress_batch: dict[tuple[str, str], int] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, disable_created_metrics

        disable_created_metrics()  # type: ignore[no-untyped-call]  # *_created series only add noise
        self.registry = self.registry or CollectorRegistry()
        reg = self.registry

        def counter(name: str, doc: str, extra: tuple[str, ...] = ()) -> Any:
            return Counter(f"{PREFIX}_{name}", doc, (*LABELS, *extra), registry=reg)

        def gauge(name: str, doc: str) -> Any:
            return Gauge(f"{PREFIX}_{name}", doc, LABELS, registry=reg)

        self.records_in = counter("records_in", "Records read from Kafka")
        self.records_written = counter("records_written", "Records committed to the table")
        self.records_failed = counter("records_failed", "Bad records (decode, schema, write, quarantine rules)")
        self.records_quarantined = counter("records_quarantined", "Records appended to the quarantine table")
        self.records_published = counter("records_error_topic", "Records sent to the error topic")
        self.records_skipped = counter("records_skipped", "Bad records dropped under skip_error")
        self.records_dropped = counter("records_dropped", "Records dropped by expectations")
        self.records_lost = counter(
            "records_lost", "Records gone from Kafka before they were read, skipped (kafka.fail_on_data_loss: false)"
        )
        self.bytes_written = counter("bytes_written", "Bytes of data files added")
        self.files_created = counter("files_created", "Data files added")
        self.commits_success = counter("commits_success", "Successful table commits")
        self.commits_failed = counter("commits_failed", "Batches that failed before or during their commit")
        self.commit_retries = counter("commit_retries", "Commit attempts retried after a conflict")
        self.batches_flushed = counter("batches_flushed", "Micro-batches processed")
        self.expectation_passed = counter("expectation_passed", "Records passing a rule", ("expectation",))
        self.expectation_failed = counter("expectation_failed", "Records violating a rule", ("expectation",))
        self.commit_latency = Histogram(
            f"{PREFIX}_commit_latency_seconds", "Iceberg commit time", LABELS, buckets=LATENCY_BUCKETS, registry=reg
        )
        self.write_latency = Histogram(
            f"{PREFIX}_write_latency_seconds",
            "Batch time from read to commit",
            LABELS,
            buckets=LATENCY_BUCKETS,
            registry=reg,
        )
        self.batch_min = gauge("batch_size_min", "Smallest batch (records)")
        self.batch_max = gauge("batch_size_max", "Largest batch (records)")
        self.batch_avg = gauge("batch_size_avg", "Average batch (records)")
        self.lag = gauge("consumer_lag", "Records between the last position and the end of the topics")
        self.last_commit = gauge("last_commit_timestamp_seconds", "Time of the last successful commit")
        self.input_rate = gauge("input_rows_per_second", "Spark streaming input rate (StreamingQueryListener)")

    def record(self, report: BatchReport) -> None:
        """Add one batch's facts to the cumulative counters."""
        labels = (report.pipeline, report.table)
        with self._lock:
            self.records_in.labels(*labels).inc(report.records_in)
            self.records_written.labels(*labels).inc(report.records_written)
            self.records_failed.labels(*labels).inc(report.records_failed)
            self.records_quarantined.labels(*labels).inc(report.records_quarantined)
            self.records_published.labels(*labels).inc(report.records_published)
            self.records_skipped.labels(*labels).inc(report.records_skipped)
            self.records_dropped.labels(*labels).inc(report.records_dropped)
            self.records_lost.labels(*labels).inc(report.records_lost_total)
            self.bytes_written.labels(*labels).inc(report.bytes_written)
            self.files_created.labels(*labels).inc(report.files_created)
            self.commit_retries.labels(*labels).inc(report.commit_retries)
            self.batches_flushed.labels(*labels).inc()
            if report.error:
                self.commits_failed.labels(*labels).inc()
            elif report.committed:
                self.commits_success.labels(*labels).inc()
                self.commit_latency.labels(*labels).observe(report.commit_latency_s)
                self.last_commit.labels(*labels).set(report.event_time.timestamp())
            self.write_latency.labels(*labels).observe(report.write_latency_s)
            for rule, passed in report.expectations_passed.items():
                self.expectation_passed.labels(*labels, rule).inc(passed)
            for rule, failed in report.expectations_failed.items():
                self.expectation_failed.labels(*labels, rule).inc(failed)
            if report.lag is not None:
                self.lag.labels(*labels).set(report.lag)
            sizes = self._sizes.setdefault(labels, _BatchSizes())
            sizes.count += 1
            sizes.total += report.records_in
            sizes.low = report.records_in if sizes.low is None else min(sizes.low, report.records_in)
            sizes.high = max(sizes.high, report.records_in)
            self.batch_min.labels(*labels).set(sizes.low)
            self.batch_max.labels(*labels).set(sizes.high)
            self.batch_avg.labels(*labels).set(sizes.total / sizes.count)

    def record_progress(
        self, pipeline: str, table: str, *, batch_id: int, rows_per_second: float, lag: int | None
    ) -> None:
        """Facts from Spark's streaming progress (Spark sources only).

        Spark delivers progress events asynchronously, so an older batch's event can arrive after a
        newer one (or after the run read the last progress itself): only the newest batch counts.
        """
        with self._lock:
            if batch_id < self._progress_batch.get((pipeline, table), -1):
                return
            self._progress_batch[(pipeline, table)] = batch_id
            self.input_rate.labels(pipeline, table).set(rows_per_second)
            if lag is not None:
                self.lag.labels(pipeline, table).set(lag)

    def prometheus_text(self) -> str:
        """The Prometheus text exposition of every metric."""
        from prometheus_client import generate_latest

        return str(generate_latest(self.registry).decode())

    def serve(self, port: int, host: str = "127.0.0.1") -> Any:
        """Serve ``/metrics`` over HTTP (loopback unless told otherwise); returns the server."""
        from prometheus_client import start_http_server

        server, _thread = start_http_server(port, addr=host, registry=self.registry)
        return server


class JsonLines:
    """Appends one JSON object per batch or maintenance action to ``<dir>/<pipeline>.jsonl``."""

    def __init__(self, directory: Path, pipeline: str):
        directory.mkdir(parents=True, exist_ok=True)
        self.path = directory / f"{pipeline}.jsonl"
        self._lock = threading.Lock()

    def write(self, event: dict[str, Any]) -> None:
        """Append one event."""
        line = json.dumps(event, default=str, sort_keys=True)
        with self._lock, self.path.open("a") as fh:
            fh.write(line + "\n")


def metrics_from_jsonl(files: Iterable[Path]) -> Metrics:
    """Rebuild cumulative metrics from JSON-lines files."""
    metrics = Metrics()
    for path in files:
        for line in path.read_text().splitlines():
            event = json.loads(line)
            if event.get("kind") == "batch":
                metrics.record(BatchReport.from_json(event))
    return metrics
