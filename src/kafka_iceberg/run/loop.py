"""The run: create the tables, then read each table's topics from its last commit until drained or stopped.

Each table's batches go through :class:`~kafka_iceberg.run.batch.BatchProcessor`; the reader
(Spark's Kafka source, replay files or the direct reader) only decides how batches are cut.
An outage of a service is retried from the last commit (:mod:`kafka_iceberg.run.outages`).
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from kafka_iceberg.observe.report import BatchReport
from kafka_iceberg.run.batch import BatchProcessor
from kafka_iceberg.run.direct_loop import run_direct
from kafka_iceberg.run.observers import Observers
from kafka_iceberg.run.outages import OutagePolicy, classify, unavailable
from kafka_iceberg.run.planning import ensure_tables, plan_tables
from kafka_iceberg.run.prepared import Prepared
from kafka_iceberg.run.streaming import run_streaming

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)


@contextmanager
def stop_on_signals() -> Iterator[threading.Event]:
    """Stop cleanly on SIGTERM/SIGINT.

    The first signal sets the returned event: the current batch finishes, then the run stops. A
    second one interrupts at once; the batch is abandoned (Iceberg commits are atomic).
    """
    stop = threading.Event()
    previous: dict[signal.Signals, Any] = {}

    def handler(signum: int, _frame: Any) -> None:
        if stop.is_set():
            raise KeyboardInterrupt
        log.warning("signal %d: stopping after the current batch", signum)
        stop.set()

    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGINT):
            previous[sig] = signal.signal(sig, handler)
    try:
        yield stop
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def outage_policy(prepared: Prepared) -> OutagePolicy:
    """The environment's ``outage_retry`` settings."""
    settings = prepared.env.outage_retry
    return OutagePolicy(
        settings.num_retries, settings.min_wait_ms, settings.max_wait_ms, source=prepared.env.source_file
    )


def run(
    prepared: Prepared,
    spark: SparkSession,
    *,
    stop: threading.Event,
    observers: Observers,
) -> list[BatchReport]:
    """Create the declared tables, then run them with the environment's reader until drained or stopped.

    An outage of the catalog, the object store or the broker is retried from the last commit with
    backoff (:mod:`kafka_iceberg.run.outages`).

    Raises:
        ServiceUnavailableError: a service stayed unreachable through every retry.
    """
    reports: list[BatchReport] = []
    policy = outage_policy(prepared)
    endpoints = prepared.settings.endpoints
    failures = 0
    try:
        while True:
            committed = sum(1 for r in reports if r.committed)
            try:
                _run_once(prepared, spark, stop, observers, reports)
                break
            except Exception as exc:
                outage = classify(exc, endpoints)
                if outage is None:
                    raise
                if sum(1 for r in reports if r.committed) > committed:
                    failures = 0  # the service answered for a while: a new outage, a fresh budget
                if failures >= policy.num_retries or stop.is_set():
                    raise unavailable(outage, policy, failures) from exc
                wait = policy.wait_seconds(failures)
                failures += 1
                log.warning(
                    "%s unreachable: %s; outage retry %d/%d in %.1fs, from the last commit",
                    outage.describe(), outage.reason, failures, policy.num_retries, wait,
                )  # fmt: skip
                if stop.wait(wait):
                    raise unavailable(outage, policy, failures - 1) from exc
    except BaseException:
        _close_quietly(observers)
        raise
    observers.close()
    return reports


def _close_quietly(observers: Observers) -> None:
    # The run already failed (often because a service is down): flushing the event log must not
    # replace that error with its own.
    try:
        observers.close()
    except Exception as exc:
        log.warning("event log not flushed: %s", exc.__class__.__name__)


def _run_once(
    prepared: Prepared,
    spark: SparkSession,
    stop: threading.Event,
    observers: Observers,
    reports: list[BatchReport],
) -> None:
    """One attempt: plan and create or evolve the tables, then read from each table's last commit."""
    tables = plan_tables(prepared, spark)
    ensure_tables(tables)
    processors = [
        BatchProcessor(
            spark,
            job.pipeline.pipeline,
            job.spec,
            job.catalog,
            publisher=job.error_topic_publisher(prepared.settings.kafka),
            base_dir=job.base_dir,
            observers=[observers, reports.append],
        )
        for job in prepared.jobs
    ]
    try:
        if prepared.env.kafka.reader == "direct":
            run_direct(prepared, spark, processors, stop)
        else:
            run_streaming(prepared, spark, list(zip(tables, processors, strict=True)), stop, observers.metrics)
    finally:
        for processor in processors:
            if processor.publisher is not None:
                processor.publisher.close()
