"""Drive the direct reader one bounded batch at a time, stopping cleanly between batches.

``available_now`` drains what is there and returns; ``processing_time`` polls on an interval.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from kafka_iceberg.observe.report import BatchReport
from kafka_iceberg.run.batch import BatchProcessor
from kafka_iceberg.run.prepared import Prepared
from kafka_iceberg.source.direct import DirectReader

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

STREAM = "direct"
FIRST_RECORD_WAIT_S = 0.05  # a processing_time table's turn when nothing is waiting for it


@dataclass
class DirectTable:
    """One table read by the direct reader."""

    processor: BatchProcessor
    reader: DirectReader
    next_batch_id: int = 0

    def open(self, *, drain: bool = False) -> None:
        """Resume from the table's last commit (``drain``: and fix the run's end, ``available_now``)."""
        last = self.processor.resume(STREAM)
        self.next_batch_id = (last.batch_id + 1) if last else 0
        self.reader.open(resume=last.offsets if last else None, drain=drain)
        log.info(
            "%s: resuming at batch %d from %s",
            self.processor.spec.identifier,
            self.next_batch_id,
            last.offsets if last else "the start",
        )

    def step(self, timeout: float, first: float | None = None) -> BatchReport | None:
        """Read and process one batch; None when nothing came within ``first`` (default ``timeout``)."""
        before = self.reader.offsets()
        batch = self.reader.next_batch(timeout=timeout, first=first)
        if batch is None:
            return None
        lag = self.reader.lag()  # positions already stand after this batch
        lost = self.reader.take_lost()  # reported once, by the batch read past them
        try:
            report = self.processor.process(
                batch.frame, batch_id=self.next_batch_id, stream=STREAM, offsets=batch.offsets, lag=lag, lost=lost
            )
        except BaseException:
            self.reader.rewind(before)  # the batch is read again by the next run
            raise
        finally:
            Path(batch.staging_file).unlink(missing_ok=True)
        self.reader.commit_group(batch.offsets)
        self.next_batch_id += 1
        return report


def run_available_now(table: DirectTable, stop: threading.Event) -> list[BatchReport]:
    """Process everything present when the run started, then return."""
    reports = []
    table.open(drain=True)
    try:
        while not stop.is_set() and not table.reader.drained():
            report = table.step(timeout=5.0)
            if report is None:
                table.reader.check_broker()  # a broker outage is not the end of the data
                log.warning(
                    "%s: the high watermarks promised records that never came; stopping at %s",
                    table.processor.spec.identifier, table.reader.offsets(),
                )  # fmt: skip
                break
            reports.append(report)
    finally:
        table.reader.close()
    return reports


def run_processing_time(tables: list[DirectTable], interval: float, stop: threading.Event) -> list[BatchReport]:
    """One round per ``interval``, as Spark's ``ProcessingTime`` trigger starts its batches, until ``stop``.

    In a round each table takes one batch of what has arrived (up to ``max_records_per_batch``),
    so a table whose topics never fall quiet neither starves the others nor commits more often than
    the trigger says; a table with nothing waiting costs one poll. A round longer than the
    interval is followed by the next at once.
    """
    reports: list[BatchReport] = []
    for table in tables:
        table.open()
    try:
        while not stop.is_set():
            tick = time.monotonic()
            for table in tables:
                if stop.is_set():
                    break
                table.reader.refresh()
                report = table.step(timeout=min(1.0, interval), first=FIRST_RECORD_WAIT_S)
                if report is not None:
                    reports.append(report)
            stop.wait(max(0.0, interval - (time.monotonic() - tick)))
    finally:
        for table in tables:
            table.reader.close()
    return reports


def run_direct(
    prepared: Prepared, spark: SparkSession, processors: list[BatchProcessor], stop: threading.Event
) -> None:
    """Read each table with the direct reader: drain the available_now tables, then poll the others."""
    kafka = prepared.settings.kafka
    staging = Path(prepared.settings.checkpoint_root) / "staging"

    def reader(p: BatchProcessor) -> DirectReader:
        group = f"kafka-iceberg.{p.pipeline}.{p.spec.identifier}"
        return DirectReader(spark, p.spec.source, dict(kafka["consumer"]), dict(kafka["admin"]), group, staging,
                            fail_on_data_loss=prepared.env.kafka.fail_on_data_loss,
                            settings_file=prepared.env.source_file)  # fmt: skip

    tables = [DirectTable(p, reader(p)) for p in processors]
    continuous = [t for t in tables if t.processor.spec.trigger.processing_time]
    for table in tables:
        if table not in continuous and not stop.is_set():
            run_available_now(table, stop)
    if continuous:
        interval = min(t.processor.spec.trigger.interval_seconds or 60.0 for t in continuous)
        run_processing_time(continuous, interval, stop)
