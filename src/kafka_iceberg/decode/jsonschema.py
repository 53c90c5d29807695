"""JSON Schema in the Confluent wire format: documents validated against their writer schema.

Columns follow the project's JSON Schema table (Estuary's mapping, docs/decode.md "JSON Schema"):
top-level properties become columns; nested objects and arrays are JSON strings.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from kafka_iceberg.spec.types import columns_from_json_schema, spark_sql_type

if TYPE_CHECKING:
    from pyspark.sql.types import StructType


def columns(schema_text: str) -> StructType:
    """The columns of a registered JSON Schema (an object schema with properties)."""
    from pyspark.sql import types as T

    mapped = columns_from_json_schema(json.loads(schema_text))
    return T.StructType(
        [T.StructField(name, T._parse_datatype_string(spark_sql_type(t)), True) for name, (t, _req) in mapped.items()]
    )


def validator(schema_text: str) -> Any:
    """A validator of documents against the writer schema."""
    import jsonschema

    schema = json.loads(schema_text)
    cls = jsonschema.validators.validator_for(schema)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def read(payload: bytes, check: Any) -> Any:
    """Parse and validate one document.

    Raises:
        ValueError: not UTF-8 JSON, or not valid under the writer schema.
    """
    try:
        document = json.loads(payload.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise ValueError(f"invalid JSON ({type(exc).__name__})") from None
    error = next(iter(check.iter_errors(document)), None)
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path) or "(root)"
        raise ValueError(f"{where}: {error.message}")
    return document
