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


def with_original_bytes(failures: Any, raw: Any) -> Any:
    """Error rows for ``failures``, with their original bytes taken from the batch.

    Args:
        failures: coordinates plus ``_error``, ``_error_stage`` and ``_decoded``.
        raw: the Kafka-shaped batch (timestamp, key, value and headers come from here).
    """
    originals = raw.select(*COORDINATES, "timestamp", "key", "value", "headers")
    return failures.join(originals, list(COORDINATES)).select(*ERROR_COLUMNS)
