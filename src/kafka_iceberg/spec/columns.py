"""The columns a table spec produces, in table order: Kafka coordinates, the payload, ``pt``.

One function answers this for validation (do ``key_fields`` and ``partitioning`` name real
columns?), for decoding (what to produce) and for writing (what to create).
"""

from __future__ import annotations

import json
from pathlib import Path

from kafka_iceberg.spec.model import SCHEMA_FORMATS, TableSpec
from kafka_iceberg.spec.types import columns_from_json_schema

KAFKA_COLUMNS: dict[str, str] = {"topic": "string", "partition": "int", "offset": "long", "timestamp": "timestamp"}
PT_COLUMN = "pt"
HEADERS_COLUMN = "headers"
HEADERS_MAP_TYPE = "map<string,binary>"  # the table's headers column (records.HEADERS_TYPE: Kafka's array)
FIXED_COLUMNS = (*KAFKA_COLUMNS, PT_COLUMN, HEADERS_COLUMN)


def payload_columns(spec: TableSpec, base_dir: Path | None = None) -> dict[str, str] | None:
    """The message-derived columns, or None when they are inferred from data (flatten, no schema).

    Raises:
        OSError: the JSON Schema file cannot be read.
        ValueError: the JSON Schema file is not an object schema.
    """
    fmt = spec.source.format
    if fmt in SCHEMA_FORMATS or spec.source.envelope == "debezium":
        return None  # from the message schema (registry, Avro file or Debezium envelope), per batch
    if fmt in ("text", "json"):
        return {"key": "string", "value": "string"}
    if fmt == "binary":
        return {"key": "binary", "value": "binary"}
    if spec.schema_ is None:
        return None
    if spec.schema_.columns is not None:
        return dict(spec.schema_.columns)
    assert spec.schema_.json_schema is not None
    path = Path(spec.schema_.json_schema)
    if not path.is_absolute() and base_dir is not None:
        path = base_dir / path
    mapped = columns_from_json_schema(json.loads(path.read_text()))
    return {name: col_type for name, (col_type, _required) in mapped.items()}


def table_columns(spec: TableSpec, payload: dict[str, str] | None) -> dict[str, str]:
    """Full column list of the target table for the given payload columns."""
    out = dict(KAFKA_COLUMNS)
    out.update(payload or {})
    if spec.partition_window != "none":
        out[PT_COLUMN] = "string"
    if spec.source.include_headers:
        out[HEADERS_COLUMN] = HEADERS_MAP_TYPE
    return out


def table_ddl(columns: dict[str, str]) -> str:
    """Spark DDL (``a BIGINT, b STRING``) for canonical column types."""
    from kafka_iceberg.spec.types import spark_sql_type

    def spark_type(col_type: str) -> str:
        return "MAP<STRING, BINARY>" if col_type == HEADERS_MAP_TYPE else spark_sql_type(col_type)

    return ", ".join(f"`{name}` {spark_type(col_type)}" for name, col_type in columns.items())
