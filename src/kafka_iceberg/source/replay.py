"""Replay: Kafka-shaped record files read as a stream.

Files are Parquet (the Kafka shape, binary kept as binary) or JSON lines (``key``, ``value`` and
header values base64-encoded, ``timestamp`` ISO-8601). ``kafka-iceberg capture`` writes both from
a live topic, so production samples become regression fixtures.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Literal

from kafka_iceberg.records import HEADERS_DDL, KAFKA_SCHEMA_DDL
from kafka_iceberg.spec.model import SourceSpec

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

ReplayFormat = Literal["parquet", "jsonl"]
JSONL_SCHEMA_DDL = (
    "key STRING, value STRING, topic STRING, partition INT, offset BIGINT, timestamp STRING, "
    "headers ARRAY<STRUCT<key: STRING, value: STRING>>"
)
MAX_FILES_PER_TRIGGER = 1


def replay_stream(spark: SparkSession, path: str, source: SourceSpec, fmt: ReplayFormat = "parquet") -> DataFrame:
    """A streaming Kafka-shaped DataFrame over the record files under ``path``.

    One file per micro-batch keeps batches as bounded as the files ``capture`` wrote.
    """
    from pyspark.sql import functions as F

    reader = spark.readStream.option("maxFilesPerTrigger", MAX_FILES_PER_TRIGGER)
    if fmt == "parquet":
        frame = reader.schema(KAFKA_SCHEMA_DDL).parquet(path)
    else:
        raw = reader.schema(JSONL_SCHEMA_DDL).json(path)
        frame = raw.select(
            F.unbase64("key").alias("key"),
            F.unbase64("value").alias("value"),
            "topic",
            "partition",
            "offset",
            F.to_timestamp("timestamp").alias("timestamp"),
            F.transform("headers", lambda h: F.struct(h["key"].alias("key"), F.unbase64(h["value"]).alias("value")))
            .cast(HEADERS_DDL)
            .alias("headers"),
        )
    if source.topics:
        return frame.where(F.col("topic").isin(source.topics))
    assert source.topic_pattern is not None
    return frame.where(F.col("topic").rlike(f"^(?:{source.topic_pattern})$"))


def matches(source: SourceSpec, topic: str) -> bool:
    """Whether ``topic`` belongs to the subscription."""
    if source.topics:
        return topic in source.topics
    return bool(source.topic_pattern and re.fullmatch(source.topic_pattern, topic))
