"""Column types of table specs, their Spark SQL spelling, and the JSON Schema → Iceberg mapping.

The JSON Schema mapping is Estuary's (``../shared/seeds``): arrays and objects become JSON
strings, ``integer`` → long, ``number`` → double, ``date-time`` → timestamptz, ``date`` → date,
``contentEncoding: base64`` → binary, and ``time``/``uuid`` formats stay strings.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

PRIMITIVES = ("string", "long", "int", "double", "float", "boolean", "date", "timestamp", "timestamp_ntz", "binary")
ALIASES = {"bigint": "long", "integer": "int", "bool": "boolean", "str": "string", "timestamptz": "timestamp"}
ALLOWED_TYPES = ", ".join([*PRIMITIVES, "decimal(p,s)"])
_DECIMAL = re.compile(r"^decimal\(\s*(\d+)\s*,\s*(\d+)\s*\)$")

SPARK_SQL = {
    "string": "STRING",
    "long": "BIGINT",
    "int": "INT",
    "double": "DOUBLE",
    "float": "FLOAT",
    "boolean": "BOOLEAN",
    "date": "DATE",
    "timestamp": "TIMESTAMP",
    "timestamp_ntz": "TIMESTAMP_NTZ",
    "binary": "BINARY",
}
# Spark's simpleString names back to ours (table schemas read from Spark).
FROM_SPARK = {
    "string": "string",
    "bigint": "long",
    "int": "int",
    "double": "double",
    "float": "float",
    "boolean": "boolean",
    "date": "date",
    "timestamp": "timestamp",
    "timestamp_ntz": "timestamp_ntz",
    "binary": "binary",
}


def normalize_type(text: str) -> str:
    """Canonical spelling of a column type (``BIGINT`` → ``long``).

    Raises:
        ValueError: not a supported type; the message lists the supported ones.
    """
    value = re.sub(r"\s+", "", str(text).strip().lower())
    value = ALIASES.get(value, value)
    if value in PRIMITIVES:
        return value
    match = _DECIMAL.match(value)
    if match:
        precision, scale = int(match[1]), int(match[2])
        if not 1 <= precision <= 38 or scale > precision:
            raise ValueError(f"decimal(p,s) with 1 <= p <= 38 and s <= p, not {text!r}")
        return f"decimal({precision},{scale})"
    raise ValueError(f"one of {ALLOWED_TYPES} (not {text!r})")


def spark_sql_type(column_type: str) -> str:
    """The Spark SQL DDL spelling of a canonical column type."""
    if column_type.startswith("decimal("):
        return column_type.upper()
    return SPARK_SQL[column_type]


def from_spark_type(simple_string: str) -> str:
    """Our canonical name for a Spark ``simpleString`` (``bigint`` → ``long``)."""
    if simple_string.startswith("decimal("):
        return simple_string
    return FROM_SPARK.get(simple_string, simple_string)


def json_schema_type(prop: Mapping[str, Any]) -> str:
    """Map one JSON Schema property to a column type (Estuary's table)."""
    types = prop.get("type", "string")
    if isinstance(types, list):
        non_null = [t for t in types if t != "null"]
        types = non_null[0] if len(non_null) == 1 else "string"  # a union of types: keep the JSON text
    if types in ("array", "object"):
        return "string"
    if types == "boolean":
        return "boolean"
    if types == "integer":
        return "long"
    if types == "number":
        return "double"
    if types == "string":
        if prop.get("contentEncoding") == "base64":
            return "binary"
        fmt = str(prop.get("format", ""))
        return {"date-time": "timestamp", "date": "date", "integer": "long", "number": "double"}.get(fmt, "string")
    return "string"


def columns_from_json_schema(schema: Mapping[str, Any]) -> dict[str, tuple[str, bool]]:
    """Top-level properties of an object JSON Schema → ``{name: (type, required)}`` in file order.

    Raises:
        ValueError: the schema does not describe an object with properties.
    """
    if (
        not isinstance(schema, Mapping)
        or schema.get("type", "object") != "object"
        or not isinstance(schema.get("properties"), Mapping)
    ):
        raise ValueError("a JSON Schema of type object with properties")
    required = schema.get("required", [])
    if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
        raise ValueError("required: a list of property names")
    bad = [name for name, prop in schema["properties"].items() if not isinstance(prop, Mapping)]
    if bad:
        raise ValueError(f"properties.{bad[0]}: a JSON Schema object, not {schema['properties'][bad[0]]!r}")
    return {name: (json_schema_type(prop), name in required) for name, prop in schema["properties"].items()}
