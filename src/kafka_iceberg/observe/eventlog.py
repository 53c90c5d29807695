"""The event log: an Iceberg table with one row per batch and per maintenance action.

Rows are buffered and appended in one commit per flush (at most every ``flush_seconds`` and at
close), so the event log does not double the number of commits a pipeline makes. A flush writes its
few rows from the driver (pyarrow, the table's FileIO) and commits them through Iceberg's Java API,
as the Arrow writer's driver does: no Spark job, so a flush neither starts Python workers nor takes
the cores from the batches (through Spark's writer it cost a 2-record job 3.7 of its 26 seconds).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kafka_iceberg.errors import summary
from kafka_iceberg.observe.report import BatchReport, MaintenanceReport

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

EVENT_LOG_DDL = (
    "pipeline STRING, table_name STRING, kind STRING, event_time TIMESTAMP, batch_id BIGINT, stream STRING, "
    "records_in BIGINT, records_written BIGINT, records_failed BIGINT, records_quarantined BIGINT, "
    "records_error_topic BIGINT, records_skipped BIGINT, records_dropped BIGINT, bytes_written BIGINT, "
    "files_created BIGINT, commit_retries BIGINT, commit_latency_ms DOUBLE, write_latency_ms DOUBLE, "
    "batch_latency_ms DOUBLE, snapshot_id BIGINT, lag BIGINT, expectations STRING, action STRING, "
    "details STRING, error STRING"
)
EVENT_LOG_COLUMNS = tuple(column.split(" ", 1)[0] for column in EVENT_LOG_DDL.split(", "))  # the rows' order
FLUSH_SECONDS_DEFAULT = 30.0


def _batch_row(r: BatchReport) -> tuple[Any, ...]:
    expectations = {
        k: {"passed": r.expectations_passed.get(k, 0), "failed": v} for k, v in r.expectations_failed.items()
    }
    return (
        r.pipeline, r.table, "batch", r.event_time.replace(tzinfo=None), r.batch_id, r.stream,
        r.records_in, r.records_written, r.records_failed, r.records_quarantined, r.records_published,
        r.records_skipped, r.records_dropped, r.bytes_written, r.files_created, r.commit_retries,
        r.commit_latency_s * 1000, r.write_latency_s * 1000, r.batch_latency_s * 1000, r.snapshot_id, r.lag,
        json.dumps(expectations) if expectations else None, None,
        json.dumps({"records_lost": r.records_lost}) if r.records_lost else None, r.error,
    )  # fmt: skip


def _maintenance_row(r: MaintenanceReport) -> tuple[Any, ...]:
    return (
        r.pipeline, r.table, "maintenance", r.event_time.replace(tzinfo=None), None, None,
        None, None, None, None, None, None, None, None, None, None,
        None, None, r.duration_s * 1000, r.snapshot_id, None,
        None, r.action, json.dumps(r.details, default=str), r.error,
    )  # fmt: skip


@dataclass
class EventLog:
    """Appends reports to ``<catalog>.<identifier>`` (created on first use, partitioned by day)."""

    spark: SparkSession
    catalog: str
    identifier: str
    flush_seconds: float = FLUSH_SECONDS_DEFAULT
    _rows: list[tuple[Any, ...]] = field(default_factory=list)
    _last_flush: float = field(default_factory=time.monotonic)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _ready: bool = False

    @property
    def table(self) -> str:
        """Fully qualified table name."""
        return f"{self.catalog}.{self.identifier}"

    def on_batch(self, report: BatchReport) -> None:
        """Observer for batch reports; failures flush at once."""
        self._add(_batch_row(report), urgent=report.error is not None)

    def on_maintenance(self, report: MaintenanceReport) -> None:
        """Observer for maintenance reports."""
        self._add(_maintenance_row(report), urgent=False)

    def _add(self, row: tuple[Any, ...], urgent: bool) -> None:
        with self._lock:
            self._rows.append(row)
        if urgent or time.monotonic() - self._last_flush >= self.flush_seconds:
            self.flush()

    def _ensure(self) -> None:
        if self._ready:
            return
        namespace = self.identifier.rsplit(".", 1)[0]
        self.spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {self.catalog}.{namespace}")
        self.spark.sql(
            f"CREATE TABLE IF NOT EXISTS {self.table} ({EVENT_LOG_DDL}) USING iceberg "
            "PARTITIONED BY (days(event_time)) TBLPROPERTIES ('format-version'='2')"
        )
        self._ready = True

    def flush(self) -> int:
        """Append buffered rows in one commit; returns how many were written."""
        with self._lock:
            rows, self._rows = self._rows, []
            self._last_flush = time.monotonic()
        if not rows:
            return 0
        try:
            self._ensure()
            self._append(rows)
        except Exception as exc:
            # One line: during an outage every flush fails the same way (-v shows the trace).
            log.warning("could not append %d event(s) to %s, kept for the next flush: %s",
                        len(rows), self.table, summary(exc))  # fmt: skip
            log.debug("event log flush failed", exc_info=True)
            with self._lock:
                self._rows[:0] = rows  # keep them for the next flush
            raise
        return len(rows)

    def _append(self, rows: list[tuple[Any, ...]]) -> None:
        """``rows`` as data files of the table, appended in one commit."""
        import pyarrow as pa

        from kafka_iceberg.write.arrow_files import WrittenFile, append_files, data_files, file_target
        from kafka_iceberg.write.jvm import IcebergTable

        table = IcebergTable(self.spark, self.table).refresh().java
        data = pa.Table.from_pylist([dict(zip(EVENT_LOG_COLUMNS, row, strict=True)) for row in rows])
        written = data_files(data, file_target(self.spark, table))  # cast to the table's schema there
        append_files(self.spark, table, [WrittenFile(**f) for f in written], {})
