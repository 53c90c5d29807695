"""Spark's Kafka source (Databricks and any cluster with ``spark-sql-kafka-0-10``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def kafka_stream(spark: SparkSession, options: Mapping[str, str]) -> DataFrame:
    """``spark.readStream.format("kafka")`` with a table's resolved source options.

    The options (subscription, offsets, the environment's security) are
    :func:`kafka_iceberg.source.kafka.spark_source_options`, resolved once by ``prepare``.
    """
    return spark.readStream.format("kafka").options(**options).load()
