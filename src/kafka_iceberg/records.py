"""The two record shapes every stage agrees on: Kafka-shaped input and error rows."""

from __future__ import annotations

from typing import Any

HEADERS_DDL = "ARRAY<STRUCT<key: STRING, value: BINARY>>"
HEADERS_TYPE = "array<struct<key:string,value:binary>>"  # the same type, as Spark's simpleString spells it
KAFKA_SCHEMA_DDL = (
    f"key BINARY, value BINARY, topic STRING, partition INT, offset BIGINT, timestamp TIMESTAMP, headers {HEADERS_DDL}"
)
"""What Spark's Kafka source produces (with ``includeHeaders``), and what every source here produces."""

COORDINATES = ("topic", "partition", "offset")
ERROR_COLUMN_TYPES: dict[str, str] = {
    "topic": "string",
    "partition": "int",
    "offset": "long",
    "timestamp": "timestamp",
    "key": "binary",
    "value": "binary",
    "headers": HEADERS_TYPE,
    "_error": "string",
    "_error_stage": "string",
    "_decoded": "string",
}
"""A record that failed a stage: its original coordinates and bytes, the reason, the stage, and a
JSON of the fields that could be read (or NULL)."""
ERROR_COLUMNS = tuple(ERROR_COLUMN_TYPES)
ERROR_SCHEMA_DDL = ", ".join(f"{name} {col_type}" for name, col_type in ERROR_COLUMN_TYPES.items())
TOMBSTONE_COLUMN = "_ki_tombstone"
INTERNAL_PREFIX = "_ki_"


# Up to this many failures (counted beforehand) are sent to every task of the join with their
# batch instead of both being shuffled: a quarantined row is its coordinates, reason and row as
# JSON, so 10,000 of them stay near Spark's own broadcast threshold (10 MB) with 1 KB rows.
FEW_FAILURES = 10_000
# ... and up to this many bytes of their keys, values, reasons and decoded JSON are brought to the
# driver to be routed there (``checks/routing.py``): far below Spark's ``spark.driver.maxResultSize``.
FEW_FAILURE_BYTES = 64 * 1024 * 1024


def with_original_bytes(failures: Any, raw: Any, *, count: int | None = None) -> Any:
    """Error rows for ``failures``, with their original bytes taken from the batch.

    Args:
        failures: coordinates plus ``_error``, ``_error_stage`` and ``_decoded``.
        raw: the Kafka-shaped batch (timestamp, key, value and headers come from here).
        count: how many ``failures`` there are, when known. Up to :data:`FEW_FAILURES` they are
            broadcast to the join, so the batch is not shuffled to find their bytes (the step-by-step
            path's quarantine took about 1 s per 100,000-record flatten batch less, benchmarks/fixes.md).
    """
    originals = raw.select(*COORDINATES, "timestamp", "key", "value", "headers")
    if count is not None and count <= FEW_FAILURES:
        from pyspark.sql import functions as F

        failures = F.broadcast(failures)
    return failures.join(originals, list(COORDINATES)).select(*ERROR_COLUMNS)
