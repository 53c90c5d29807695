"""Avro schemas → Spark/Iceberg column types, and Avro payloads → Python values (fastavro).

Mapping (docs/decode.md, "Schema registry formats"): record → struct, array → array, map →
map<string, ...>, enum → string, fixed and bytes → binary, a union of null and one type → that type
(optional), a union of several types → string (JSON), logical types decimal → decimal(p,s), date →
date, timestamp-millis / timestamp-micros → timestamp, local-timestamp-* → timestamp_ntz, uuid →
string; int → int, long → long, float → float, double → double, boolean → boolean.
"""

from __future__ import annotations

import io
import json
import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql.types import DataType, StructType

_READER = re.compile(r" from <[^>]*>")
_MAX_DEPTH = 32  # recursive records are cut here (their deeper levels become JSON strings)


def parse(schema_text: str) -> Any:
    """A fastavro parsed schema from its JSON text (named types resolved)."""
    import fastavro

    return fastavro.parse_schema(json.loads(schema_text))


def spark_type(schema: Any, depth: int = 0) -> DataType:
    """The Spark type of an Avro schema (JSON form: a type name, a list (union) or a dict)."""
    from pyspark.sql import types as T

    if depth > _MAX_DEPTH:
        return T.StringType()
    if isinstance(schema, list):
        branches = [b for b in schema if b != "null"]
        return spark_type(branches[0], depth) if len(branches) == 1 else T.StringType()
    if isinstance(schema, str):
        return _primitive(schema)
    logical = schema.get("logicalType")
    kind = schema.get("type")
    if logical == "decimal" and kind in ("bytes", "fixed"):
        return T.DecimalType(int(schema["precision"]), int(schema.get("scale", 0)))
    if logical == "date" and kind == "int":
        return T.DateType()
    if logical in ("timestamp-millis", "timestamp-micros") and kind == "long":
        return T.TimestampType()
    if logical in ("local-timestamp-millis", "local-timestamp-micros") and kind == "long":
        return T.TimestampNTZType()
    if logical == "uuid":
        return T.StringType()
    if kind in {"record", "error"}:
        return T.StructType(
            [T.StructField(f["name"], spark_type(f["type"], depth + 1), True) for f in schema.get("fields", [])]
        )
    if kind == "array":
        return T.ArrayType(spark_type(schema["items"], depth + 1), True)
    if kind == "map":
        return T.MapType(T.StringType(), spark_type(schema["values"], depth + 1), True)
    if kind == "enum":
        return T.StringType()
    if kind == "fixed":
        return T.BinaryType()
    if isinstance(kind, (dict, list)):
        return spark_type(kind, depth)
    return _primitive(str(kind))


def _primitive(name: str) -> DataType:
    from pyspark.sql import types as T

    mapping = {
        "string": T.StringType(),
        "int": T.IntegerType(),
        "long": T.LongType(),
        "float": T.FloatType(),
        "double": T.DoubleType(),
        "boolean": T.BooleanType(),
        "bytes": T.BinaryType(),
        "null": T.StringType(),
    }
    return mapping.get(name.rsplit(".", maxsplit=1)[-1] if name not in mapping else name, T.StringType())


# Logical types whose fastavro values are what their columns hold (decimal only up to the digits
# Python's decimal context keeps exact: values.conform's limit).
_PLAIN_LOGICAL = frozenset({"date", "timestamp-millis", "timestamp-micros", "local-timestamp-millis"})
_PLAIN_LOGICAL |= {"local-timestamp-micros"}
_PRIMITIVES = frozenset({"string", "int", "long", "float", "double", "boolean", "bytes"})
_EXACT_DIGITS = 28


def plain_values(schema: Any, depth: int = 0) -> bool:
    """Whether fastavro's values of ``schema`` are, as they come, what :func:`spark_type`'s column holds.

    True for records of primitives, enums, fixed, records, arrays, maps, ``[null, T]`` unions and
    the date, timestamp and decimal logical types; False where the column needs a conversion
    (``uuid``, a union of several types: JSON text) or another logical type.
    """
    if depth > _MAX_DEPTH:
        return False
    if isinstance(schema, list):
        branches = [b for b in schema if b != "null"]
        return len(branches) == 1 and plain_values(branches[0], depth)
    if isinstance(schema, str):
        return schema in _PRIMITIVES
    logical, kind = schema.get("logicalType"), schema.get("type")
    if logical == "decimal":
        return kind in ("bytes", "fixed") and int(schema["precision"]) <= _EXACT_DIGITS
    if logical is not None:
        return logical in _PLAIN_LOGICAL
    if kind in {"record", "error"}:
        return all(plain_values(f["type"], depth + 1) for f in schema.get("fields", []))
    if kind == "array":
        return plain_values(schema["items"], depth + 1)
    if kind == "map":
        return plain_values(schema["values"], depth + 1)
    if kind in ("enum", "fixed"):
        return True
    return isinstance(kind, str) and kind in _PRIMITIVES


def plain_record(schema_text: str, columns: StructType) -> bool:
    """Whether a writer's values are, as fastavro reads them, the rows of ``columns``.

    A record schema of :func:`plain_values` whose columns are ``columns``, type for type.
    """
    schema = parse(schema_text)
    plain = isinstance(schema, dict) and schema.get("type") == "record" and plain_values(schema)
    return plain and record_columns(schema_text) == columns


def record_columns(schema_text: str) -> StructType:
    """The top-level fields of a record schema as columns (a non-record schema is one ``value`` column)."""
    from pyspark.sql import types as T

    schema = parse(schema_text)
    result = spark_type(schema)
    if isinstance(result, T.StructType):
        return result
    return T.StructType([T.StructField("value", result, True)])


def record_name(schema_text: str) -> str | None:
    """The full name of a record schema (for the record subject strategies)."""
    schema = json.loads(schema_text)
    if isinstance(schema, dict) and schema.get("type") == "record":
        name = str(schema["name"])
        namespace = schema.get("namespace")
        return f"{namespace}.{name}" if namespace and "." not in name else name
    return None


def read(payload: bytes, parsed: Any) -> Any:
    """Decode one Avro binary payload with its writer schema.

    Raises:
        ValueError: the bytes do not match the schema (truncated, trailing bytes, bad union index...).
    """
    import fastavro

    buffer = io.BytesIO(payload)
    try:
        value = fastavro.schemaless_reader(buffer, parsed, None)
    except Exception as exc:  # fastavro raises EOFError, IndexError, UnicodeDecodeError, ...
        # without the reader's repr (" from <_io.BytesIO object at 0x...>"): one reason per error
        raise ValueError(f"{type(exc).__name__}: {_READER.sub('', str(exc))}") from None
    if buffer.tell() != len(payload):
        raise ValueError(f"{len(payload) - buffer.tell()} bytes left after the record")
    return value
