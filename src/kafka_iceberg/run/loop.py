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
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kafka_iceberg.checks.error_topic import ErrorTopicPublisher
from kafka_iceberg.observe.metrics import Metrics
from kafka_iceberg.observe.report import BatchReport
from kafka_iceberg.run.batch import BatchProcessor
from kafka_iceberg.run.jobs import TableJob
from kafka_iceberg.run.observers import Observers
from kafka_iceberg.run.outages import OutagePolicy, classify, unavailable
from kafka_iceberg.run.planning import TableRun, ensure_tables, plan_tables
from kafka_iceberg.run.prepared import Prepared
from kafka_iceberg.session import attach_resolved

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)


def _publisher(prepared: Prepared, job: TableJob) -> ErrorTopicPublisher | None:
    topic = job.spec.errors.error_topic
    if not topic:
        return None
    kafka = prepared.settings.kafka
    return ErrorTopicPublisher(
        topic=topic,
        producer_config=dict(kafka["producer"]),
        consumer_config=dict(kafka["admin"]),
        pipeline=job.pipeline.pipeline,
        table=job.spec.identifier,
    )


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
    listener = None
    if prepared.env.kafka.reader != "direct":
        from kafka_iceberg.observe.listener import progress_listener

        names = {f"{j.pipeline.pipeline}.{j.spec.identifier}": (j.pipeline.pipeline, j.spec.identifier)
                 for j in prepared.jobs}  # fmt: skip
        listener = progress_listener(observers.metrics, names)
        spark.streams.addListener(listener)
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
    finally:
        if listener is not None:
            spark.streams.removeListener(listener)
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
            publisher=_publisher(prepared, job),
            base_dir=job.base_dir,
            observers=[observers, reports.append],
        )
        for job in prepared.jobs
    ]
    try:
        if prepared.env.kafka.reader == "direct":
            _run_direct(prepared, spark, processors, stop)
        else:
            _run_streaming(prepared, spark, list(zip(tables, processors, strict=True)), stop, observers.metrics)
    finally:
        for processor in processors:
            if processor.publisher is not None:
                processor.publisher.close()


def _run_direct(
    prepared: Prepared, spark: SparkSession, processors: list[BatchProcessor], stop: threading.Event
) -> None:
    from kafka_iceberg.run.direct_loop import DirectTable, run_available_now, run_processing_time
    from kafka_iceberg.source.direct import DirectReader

    consumer = dict(prepared.settings.kafka["consumer"])
    staging = Path(prepared.settings.checkpoint_root) / "staging"
    tables = [
        DirectTable(
            p,
            DirectReader(spark, p.spec.source, consumer, f"kafka-iceberg.{p.pipeline}.{p.spec.identifier}", staging),
        )
        for p in processors
    ]
    continuous = [t for t in tables if t.processor.spec.trigger.processing_time]
    for table in tables:
        if table not in continuous and not stop.is_set():
            run_available_now(table, stop)
    if continuous:
        interval = min(t.processor.spec.trigger.interval_seconds or 60.0 for t in continuous)
        run_processing_time(continuous, interval, stop)


def _run_streaming(
    prepared: Prepared,
    spark: SparkSession,
    tables: list[tuple[TableRun, BatchProcessor]],
    stop: threading.Event,
    metrics: Metrics,
) -> None:
    from kafka_iceberg.observe.listener import record_progress
    from kafka_iceberg.run.streaming import start_query
    from kafka_iceberg.source.replay import replay_stream
    from kafka_iceberg.source.spark_kafka import kafka_stream

    settings = prepared.settings
    queries = []
    for table, p in tables:
        if prepared.env.kafka.reader == "replay":
            assert settings.replay_path is not None
            frame = replay_stream(spark, settings.replay_path, p.spec.source, prepared.env.kafka.replay_format)
        else:
            frame = kafka_stream(spark, settings.spark_sources[table.job.key])
        assert table.checkpoint is not None
        queries.append(
            start_query(
                frame,
                p,
                checkpoint=table.checkpoint,
                trigger=p.spec.trigger,
                name=f"{p.pipeline}.{p.spec.identifier}",
                attach=lambda session: attach_resolved(session, prepared.rendered.values(), settings.catalogs),
            )
        )
    try:
        for (_table, p), running in zip(tables, queries, strict=True):
            while running.query.isActive and not stop.is_set():
                try:
                    running.query.awaitTermination(1)
                except Exception:  # ended by an error: raised below as the batch raised it
                    break
            error = running.error()
            if error is not None:
                raise error
            if running.query.lastProgress:  # the listener's copy of it may still be on its way
                record_progress(metrics, (p.pipeline, p.spec.identifier), running.query.lastProgress)
    finally:
        for running in queries:
            if running.query.isActive:
                running.query.stop()
