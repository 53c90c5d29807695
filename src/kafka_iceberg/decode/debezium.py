"""Debezium change events: ``op`` c / r / u / d into upserts and deletes of the row's image.

``c`` (create), ``r`` (snapshot read) and ``u`` (update) upsert the ``after`` image; ``d``
deletes the key read from the ``before`` image. Each row also carries ``_op`` and
``_source_position`` (``source.lsn`` when the connector reports one, else the event's ``ts_ms``),
the table's default ``sequence_field``: the upsert keeps, per key, the change with the highest
position, then the highest Kafka offset, so re-delivered and out-of-order changes do not win over
newer ones. Kafka tombstones (null values, which Debezium sends after a delete for log
compaction) are ignored. JSON events may carry the Kafka Connect schema
(``{"schema": ..., "payload": ...}``, the JsonConverter with ``schemas.enable``), which then gives
the columns; Avro events get theirs from the registry's envelope schema (its ``after`` field).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from kafka_iceberg.decode.values import from_epoch
from kafka_iceberg.spec.model import DEBEZIUM_OP, DEBEZIUM_POSITION

if TYPE_CHECKING:
    from pyspark.sql.types import DataType, StructType

UPSERT_OPS = ("c", "r", "u")


def change(event: Any) -> tuple[dict[str, Any], bool]:
    """``(row, is_delete)`` of one decoded change event.

    Raises:
        ValueError: not a Debezium envelope, an unknown ``op``, or a missing image.
    """
    if isinstance(event, Mapping) and "payload" in event and "op" not in event:
        event = event["payload"]  # JsonConverter with schemas.enable
    if not isinstance(event, Mapping) or "op" not in event:
        raise ValueError("not a Debezium change event (no op field)")
    op = event["op"]
    if op in UPSERT_OPS:
        image, delete = event.get("after"), False
    elif op == "d":
        image, delete = event.get("before"), True
    else:
        raise ValueError(f"unsupported Debezium op {op!r} (expected c, r, u or d)")
    if not isinstance(image, Mapping):
        raise ValueError(f"Debezium op {op!r} without a {'before' if delete else 'after'} image")
    source: Mapping[str, Any] = event["source"] if isinstance(event.get("source"), Mapping) else {}
    position = source.get("lsn") if source.get("lsn") is not None else event.get("ts_ms", source.get("ts_ms"))
    row = dict(image)
    row[DEBEZIUM_OP] = op
    row[DEBEZIUM_POSITION] = None if position is None else int(position)
    return row, delete


def with_change_columns(image: StructType) -> StructType:
    """The columns of a Debezium table: the row image's, then ``_op`` and ``_source_position``."""
    from pyspark.sql import types as T

    fields = [f for f in image.fields if f.name not in (DEBEZIUM_OP, DEBEZIUM_POSITION)]
    return T.StructType(
        [
            *fields,
            T.StructField(DEBEZIUM_OP, T.StringType(), True),
            T.StructField(DEBEZIUM_POSITION, T.LongType(), True),
        ]
    )


def avro_image(envelope: StructType) -> StructType:
    """The row image of an Avro Debezium envelope (its ``after`` field's record).

    Raises:
        ValueError: the schema is not a Debezium envelope.
    """
    from pyspark.sql import types as T

    for f in envelope.fields:
        if f.name == "after" and isinstance(f.dataType, T.StructType):
            return f.dataType
    raise ValueError("the value schema is not a Debezium envelope (no record field 'after')")


# Kafka Connect schema types (JsonConverter) → Spark types; logical names win over the base type.
_CONNECT = {
    "int8": "int",
    "int16": "int",
    "int32": "int",
    "int64": "bigint",
    "float32": "float",
    "float64": "double",
    "boolean": "boolean",
    "string": "string",
    "bytes": "binary",
}


def connect_type(schema: Mapping[str, Any]) -> DataType:
    """A Kafka Connect schema (JSON form) as a Spark type."""
    from pyspark.sql import types as T

    name, kind = schema.get("name"), schema.get("type")
    if name in ("io.debezium.time.Date", "org.apache.kafka.connect.data.Date"):
        return T.DateType()
    if name in (
        "io.debezium.time.Timestamp",
        "io.debezium.time.MicroTimestamp",
        "io.debezium.time.ZonedTimestamp",
        "org.apache.kafka.connect.data.Timestamp",
    ):
        return T.TimestampType()
    if name == "org.apache.kafka.connect.data.Decimal":
        params = schema.get("parameters") or {}
        return T.DecimalType(int(params.get("connect.decimal.precision", 38)), int(params.get("scale", 0)))
    if kind == "struct":
        return T.StructType([T.StructField(f["field"], connect_type(f), True) for f in schema.get("fields", [])])
    if kind == "array":
        return T.ArrayType(connect_type(schema["items"]), True)
    if kind == "map":
        return T.MapType(connect_type(schema["keys"]), connect_type(schema["values"]), True)
    simple = {
        "int": T.IntegerType(),
        "bigint": T.LongType(),
        "float": T.FloatType(),
        "double": T.DoubleType(),
        "boolean": T.BooleanType(),
        "binary": T.BinaryType(),
    }
    return simple.get(_CONNECT.get(str(kind), "string"), T.StringType())


def connect_values(value: Any, schema: Mapping[str, Any]) -> Any:
    """A JSON value under a Kafka Connect schema, with logical types turned into Python values."""
    import base64
    import decimal

    if value is None:
        return None
    name, kind = schema.get("name"), schema.get("type")
    if name in ("io.debezium.time.Timestamp", "org.apache.kafka.connect.data.Timestamp"):
        return from_epoch(int(value), "ms")
    if name == "io.debezium.time.MicroTimestamp":
        return from_epoch(int(value), "us")
    if name == "org.apache.kafka.connect.data.Decimal" and isinstance(value, str):
        scale = int((schema.get("parameters") or {}).get("scale", 0))
        unscaled = int.from_bytes(base64.b64decode(value), "big", signed=True)
        return decimal.Decimal(unscaled).scaleb(-scale)
    if kind == "struct" and isinstance(value, Mapping):
        fields = {f["field"]: f for f in schema.get("fields", [])}
        return {k: connect_values(v, fields[k]) if k in fields else v for k, v in value.items()}
    if kind == "array" and isinstance(value, list):
        return [connect_values(v, schema["items"]) for v in value]
    return value


def json_image(schemas: list[str]) -> StructType:
    """The row image given by the ``schema`` parts of JSON change events (``after``'s struct).

    Several distinct schemas (the source table changed) are merged: columns in first-seen order,
    the later schema's type winning.

    Raises:
        ValueError: no event carries a Kafka Connect schema with an ``after`` struct.
    """
    from pyspark.sql import types as T

    merged: dict[str, T.StructField] = {}
    for text in schemas:
        schema = json.loads(text)
        after = next((f for f in schema.get("fields", []) if f.get("field") == "after"), None)
        if after is None:
            continue
        image = connect_type(after)
        assert isinstance(image, T.StructType)
        for f in image.fields:
            merged[f.name] = f
    if not merged:
        raise ValueError(
            "Debezium JSON events without a Kafka Connect schema: enable value.converter.schemas.enable "
            "so that each event carries its schema"
        )
    return T.StructType(list(merged.values()))


def after_schema(event_schema: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The Kafka Connect schema of the ``after`` field of an envelope schema."""
    return next((f for f in event_schema.get("fields", []) if f.get("field") == "after"), None)
