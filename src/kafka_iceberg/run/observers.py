"""Where batch and maintenance reports go: metrics, JSON lines, the event log, the progress line."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from kafka_iceberg.observe.eventlog import EventLog
from kafka_iceberg.observe.metrics import JsonLines, Metrics
from kafka_iceberg.observe.progress import Progress
from kafka_iceberg.observe.report import BatchReport, MaintenanceReport
from kafka_iceberg.run.prepared import Prepared

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@dataclass
class Observers:
    """Where batch reports go: metrics, JSON lines, the event log, the progress line."""

    metrics: Metrics
    progress: Progress
    jsonl: JsonLines | None = None
    event_log: EventLog | None = None

    def __call__(self, report: BatchReport) -> None:
        """Hand one batch report to every observer."""
        self.metrics.record(report)
        if self.jsonl is not None:
            self.jsonl.write(report.to_json())
        if self.event_log is not None:
            self.event_log.on_batch(report)
        self.progress.update(report)

    def on_maintenance(self, report: MaintenanceReport) -> None:
        """Record one maintenance action (JSON lines and the event log)."""
        if self.jsonl is not None:
            self.jsonl.write(report.to_json())
        if self.event_log is not None:
            self.event_log.on_maintenance(report)

    def close(self) -> None:
        """Flush what is buffered."""
        if self.event_log is not None:
            self.event_log.flush()


def observers_for(prepared: Prepared, spark: SparkSession, pipeline: str, progress: Progress) -> Observers:
    """Observers configured by the environment."""
    env = prepared.env
    metrics_dir = prepared.settings.metrics_dir
    jsonl = JsonLines(Path(metrics_dir), pipeline) if metrics_dir else None
    event_log = None
    if env.event_log.enabled:
        catalog = env.event_log.catalog or next(iter(prepared.rendered))
        event_log = EventLog(spark, catalog, env.event_log.table)
    return Observers(Metrics(), progress, jsonl, event_log)
