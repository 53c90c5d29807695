"""Spark Structured Streaming sources (Kafka, replay files) feeding the batch processor."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kafka_iceberg.observe.listener import progress_listener, record_progress
from kafka_iceberg.observe.metrics import Metrics
from kafka_iceberg.run.batch import BatchProcessor
from kafka_iceberg.run.planning import TableRun
from kafka_iceberg.run.prepared import Prepared
from kafka_iceberg.session import attach_resolved
from kafka_iceberg.source.replay import replay_stream
from kafka_iceberg.source.spark_kafka import kafka_stream, spark_data_loss
from kafka_iceberg.spec.model import Trigger

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def stream_id(checkpoint: str) -> str:
    """Commit-marker stream of a Spark query: batch ids restart with a new checkpoint."""
    return "spark-" + hashlib.sha256(checkpoint.encode()).hexdigest()[:16]


@dataclass
class RunningQuery:
    """A started streaming query and the error its batch function raised, as raised."""

    query: Any
    failures: list[BaseException] = field(default_factory=list)

    def error(self) -> BaseException | None:
        """The batch function's own exception (a ``RecordError``, say), not Spark's wrapper of it.

        Spark ends a query whose ``foreachBatch`` function raised with a ``StreamingQueryException``
        holding only the error's text; the run reports what the batch raised, as the direct reader does.
        """
        if self.failures:
            return self.failures[-1]
        raised: BaseException | None = self.query.exception()
        return raised


def start_query(
    stream: DataFrame,
    processor: BatchProcessor,
    *,
    checkpoint: str,
    trigger: Trigger,
    name: str,
    attach: Callable[[SparkSession], None] | None = None,
) -> Any:
    """Start ``stream.writeStream.foreachBatch(...)`` into the processor.

    Args:
        stream: the source's streaming frame (Kafka-shaped rows).
        processor: the table's batch processor.
        checkpoint: the query's checkpoint location.
        trigger: ``available_now`` or a processing-time interval.
        name: the query's name.
        attach: called once with the query's own session before its first batch. A streaming query
            runs its batches in a clone of the session, whose catalogs load afresh from its settings;
            credentials are not kept in settings (:func:`kafka_iceberg.session.attach_catalogs`), so
            the clone's catalogs must be attached the same way.
    """
    sid = stream_id(checkpoint)
    processor.resume(sid)
    attached = [attach is None]
    failures: list[BaseException] = []

    def each_batch(frame: DataFrame, batch_id: int) -> None:
        try:
            process_batch(frame, batch_id)
        except BaseException as exc:
            failures.append(exc)
            raise

    def process_batch(frame: DataFrame, batch_id: int) -> None:
        if not attached[0]:
            assert attach is not None
            attach(frame.sparkSession)
            attached[0] = True
        # The processor advances the stream's offsets past the batch's records, found in the pass
        # that reads them (the batch is read from the source once).
        processor.process(frame, batch_id=int(batch_id), stream=sid)

    writer = stream.writeStream.queryName(name).foreachBatch(each_batch).option("checkpointLocation", checkpoint)
    if trigger.available_now:
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=f"{trigger.interval_seconds} seconds")
    return RunningQuery(writer.start(), failures)


def run_streaming(
    prepared: Prepared,
    spark: SparkSession,
    tables: list[tuple[TableRun, BatchProcessor]],
    stop: threading.Event,
    metrics: Metrics,
) -> None:
    """Start one streaming query per table (Spark's Kafka source or replay files) and wait for them all."""
    settings = prepared.settings
    names = {f"{p.pipeline}.{p.spec.identifier}": (p.pipeline, p.spec.identifier) for _table, p in tables}
    listener = progress_listener(metrics, names)
    spark.streams.addListener(listener)
    queries = []
    try:
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
        for (_table, p), running in zip(tables, queries, strict=True):
            while running.query.isActive and not stop.is_set():
                try:
                    running.query.awaitTermination(1)
                except Exception:  # ended by an error: raised below as the batch raised it
                    break
            error = running.error()
            if error is not None:
                spark_source = prepared.env.kafka.reader == "spark"
                lost = spark_data_loss(error, prepared.env.source_file) if spark_source else None
                if lost is not None:
                    raise lost from error
                raise error
            if running.query.lastProgress:  # the listener's copy of it may still be on its way
                record_progress(metrics, (p.pipeline, p.spec.identifier), running.query.lastProgress)
    finally:
        for running in queries:
            if running.query.isActive:
                running.query.stop()
        spark.streams.removeListener(listener)
