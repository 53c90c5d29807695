"""Spark's Kafka source (Databricks and any cluster with ``spark-sql-kafka-0-10``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafka_iceberg.environment import KafkaSettings
from kafka_iceberg.kafka import spark_source_options
from kafka_iceberg.refs import Resolver
from kafka_iceberg.session import on_databricks
from kafka_iceberg.spec.model import SourceSpec

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def kafka_stream(spark: SparkSession, source: SourceSpec, settings: KafkaSettings, resolver: Resolver) -> DataFrame:
    """``spark.readStream.format("kafka")`` with the table's subscription and the environment's security."""
    options = spark_source_options(source, settings, shaded=on_databricks())
    if settings.sasl_password:  # inside the JAAS line: registered by itself too, for redaction
        resolver.setting("sasl_password", settings.sasl_password)
    return spark.readStream.format("kafka").options(**resolver.settings(options)).load()
