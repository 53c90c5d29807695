"""Small Kafka-shaped and decoded DataFrames for stage tests."""

from __future__ import annotations

import datetime as dt
from typing import Any

from kafka_iceberg.records import ERROR_SCHEMA_DDL, KAFKA_SCHEMA_DDL

T0 = dt.datetime(2026, 11, 21, 12, 0, 0)


def kafka_frame(spark: Any, records: list[tuple[Any, ...]], topic: str = "t") -> Any:
    """records: (partition, offset, key, value[, headers]) with str or bytes payloads."""
    rows = []
    for rec in records:
        partition, offset, key, value = rec[:4]
        headers = rec[4] if len(rec) > 4 else None
        enc = lambda v: v.encode() if isinstance(v, str) else v  # noqa: E731
        rows.append((enc(key), enc(value), topic, partition, offset, T0, headers))
    return spark.createDataFrame(rows, KAFKA_SCHEMA_DDL)


def error_frame(spark: Any, rows: list[tuple[Any, ...]]) -> Any:
    """rows: (topic, partition, offset, key, value, headers, error, stage)."""
    full = [(t, p, o, T0, k, v, h, e, s, None) for (t, p, o, k, v, h, e, s) in rows]
    return spark.createDataFrame(full, ERROR_SCHEMA_DDL)
