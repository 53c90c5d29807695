"""Spark's Kafka source (Databricks and any cluster with ``spark-sql-kafka-0-10``)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING

from kafka_iceberg.errors import DataLossError, messages, short_message
from kafka_iceberg.tasks import cores

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def kafka_stream(spark: SparkSession, options: Mapping[str, str]) -> DataFrame:
    """``spark.readStream.format("kafka")`` with a table's resolved source options.

    The options (subscription, offsets, the environment's security) are
    :func:`kafka_iceberg.source.kafka.spark_source_options`, resolved once by ``prepare``.

    The source reads each topic partition in one task: a topic of fewer partitions than the
    session's cores would leave cores out of every batch. ``minPartitions`` (unless the
    environment's ``spark_options`` set it) makes Spark split the batch's offset ranges into a task
    per core at least; a batch whose records sit in as many partitions as cores or more is read as before.
    """
    n = cores(spark)
    if n is not None and "minPartitions" not in options:
        options = {**options, "minPartitions": str(n)}
    return spark.readStream.format("kafka").options(**options).load()


# Every data-loss failure of Spark's Kafka source ends with advice naming its option; the sentence
# that says what is lost is one of these (KafkaDataConsumer, KafkaMicroBatchStream in Spark 3.5).
_SPARK_DATA_LOSS_ADVICE = "failOnDataLoss"
_SPARK_DATA_LOSS = re.compile(
    r"(Cannot fetch (?:offset \d+|records in \[\d+, \d+\)) \([^)]*\)"
    r"|Partition \S+ offset was changed from \d+ to \d+"
    r"|Added partition \S+ starts from \d+ instead of 0"
    r"|Cannot find earliest offsets of Set\([^)]*\)"
    r"|Set\([^)]*\) are gone)"
)


def spark_data_loss(exc: BaseException, settings_file: str) -> DataLossError | None:
    """Spark's Kafka source's data-loss failure behind ``exc`` (``failOnDataLoss``), said plainly; else None."""
    lines = messages(exc)
    if not any(_SPARK_DATA_LOSS_ADVICE in line for line in lines):
        return None
    found = (m.group(1) for line in reversed(lines) if (m := _SPARK_DATA_LOSS.search(line)))
    what = re.sub(r"GroupId: [^,]*, ", "", next(found, "Spark's Kafka source found records missing"))
    return DataLossError.of(short_message(what), settings_file)
