"""Decoded values (Python objects) into the Spark/Arrow types of the table's columns.

Every schema-driven format (Avro, Protobuf, JSON Schema, Debezium) decodes a message into plain
Python values and then :func:`conform` checks and shapes each against its column type: structs
by field name (a field the column lacks is ignored, one the value lacks is NULL), arrays, maps,
decimals without rounding, dates, timestamps (UTC). A value that does not fit raises
:class:`ValueError`, which the record's error reason names.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import json
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql.types import DataType

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)


def arrow_type(t: DataType) -> pa.DataType:
    """The Arrow type Spark's ``mapInArrow`` expects for Spark type ``t``."""
    import pyarrow as pa
    from pyspark.sql import types as T

    if isinstance(t, T.StructType):
        return pa.struct([pa.field(f.name, arrow_type(f.dataType)) for f in t.fields])
    if isinstance(t, T.ArrayType):
        return pa.list_(arrow_type(t.elementType))
    if isinstance(t, T.MapType):
        return pa.map_(arrow_type(t.keyType), arrow_type(t.valueType))
    if isinstance(t, T.DecimalType):
        return pa.decimal128(t.precision, t.scale)
    if isinstance(t, T.TimestampNTZType):
        return pa.timestamp("us")
    if isinstance(t, T.TimestampType):
        return pa.timestamp("us", tz="UTC")
    simple = {
        T.StringType: pa.string(),
        T.LongType: pa.int64(),
        T.IntegerType: pa.int32(),
        T.DoubleType: pa.float64(),
        T.FloatType: pa.float32(),
        T.BooleanType: pa.bool_(),
        T.DateType: pa.date32(),
        T.BinaryType: pa.binary(),
    }
    for cls, arrow in simple.items():
        if isinstance(t, cls):
            return arrow
    raise TypeError(f"no Arrow type for {t.simpleString()}")


Converter = Callable[[Any], Any]
_MAX_EXACT_DIGITS = decimal.getcontext().prec  # quantize refuses longer coefficients (conform's error)


def converter(t: DataType, path: str = "") -> Converter:
    """A function doing :func:`conform` for column type ``t`` (at ``path``), the type decided once.

    Schema-driven decoders call it for every record, so the per-value work is a type check on the
    common case; anything else takes :func:`conform`'s own path, so both give the same values and
    the same errors (``tests/decode/test_values.py``).
    """
    from pyspark.sql import types as T

    if isinstance(t, T.StructType):
        fields = [(f.name, converter(f.dataType, f"{path}.{f.name}" if path else f.name)) for f in t.fields]

        def struct(value: Any) -> Any:
            if value is None:
                return None
            if not isinstance(value, dict):
                raise ValueError(f"field {path}: expected a record, got {type(value).__name__}")
            get = value.get
            return {name: convert(get(name)) for name, convert in fields}

        return struct
    if isinstance(t, T.ArrayType):
        element = converter(t.elementType, f"{path}[]")

        def array(value: Any) -> Any:
            if value is None:
                return None
            if not isinstance(value, (list, tuple)):
                raise ValueError(f"field {path}: expected an array, got {type(value).__name__}")
            return [element(v) for v in value]

        return array
    if isinstance(t, (T.LongType, T.IntegerType)):
        low, high = (-(2**63), 2**63) if isinstance(t, T.LongType) else (-(2**31), 2**31)

        def integer(value: Any) -> Any:
            if type(value) is int and low <= value < high:
                return value
            return None if value is None else conform(value, t, path)

        return integer
    if isinstance(t, T.DecimalType):
        exponent, digits = -t.scale, min(t.precision, _MAX_EXACT_DIGITS)

        def exact(value: Any) -> Any:
            if type(value) is decimal.Decimal:
                parts = value.as_tuple()
                if parts.exponent == exponent and len(parts.digits) <= digits:
                    return value
            return None if value is None else conform(value, t, path)

        return exact
    if isinstance(t, T.TimestampType):

        def timestamp(value: Any) -> Any:
            if type(value) is dt.datetime and value.tzinfo is not None:
                return value
            return None if value is None else conform(value, t, path)

        return timestamp
    as_is: dict[type, type] = {T.StringType: str, T.DoubleType: float, T.BooleanType: bool, T.DateType: dt.date}
    same = as_is.get(type(t))
    if same is None:  # maps, binary, timestamp_ntz: conform decides every value
        return lambda value: None if value is None else conform(value, t, path)

    def unchanged(value: Any) -> Any:  # values of this Python type come back as they are
        if value is None or type(value) is same:
            return value
        return conform(value, t, path)

    return unchanged


def conform(value: Any, t: DataType, path: str) -> Any:
    """``value`` shaped for column type ``t``; ``path`` names the field in errors.

    Raises:
        ValueError: the value does not fit the type.
    """
    from pyspark.sql import types as T

    if value is None:
        return None
    if isinstance(t, T.StructType):
        if not isinstance(value, dict):
            raise ValueError(f"field {path}: expected a record, got {type(value).__name__}")
        return {
            f.name: conform(value.get(f.name), f.dataType, f"{path}.{f.name}" if path else f.name) for f in t.fields
        }
    if isinstance(t, T.ArrayType):
        if not isinstance(value, (list, tuple)):
            raise ValueError(f"field {path}: expected an array, got {type(value).__name__}")
        return [conform(v, t.elementType, f"{path}[]") for v in value]
    if isinstance(t, T.MapType):
        items = value.items() if isinstance(value, dict) else value
        return [(conform(k, t.keyType, f"{path}.key"), conform(v, t.valueType, f"{path}.value")) for k, v in items]
    if isinstance(t, T.StringType):
        if isinstance(value, str):
            return value
        if isinstance(value, uuid.UUID):
            return str(value)
        if isinstance(value, (dict, list, bool, int, float)):
            return json.dumps(value, separators=(",", ":"), default=str)  # unions of several types, nested JSON
        return str(value)
    if isinstance(t, (T.LongType, T.IntegerType)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"field {path}: expected an integer, got {value!r}")
        bits = 63 if isinstance(t, T.LongType) else 31
        if not -(2**bits) <= value < 2**bits:
            raise ValueError(f"field {path}: {value} out of range for {t.simpleString()}")
        return value
    if isinstance(t, (T.DoubleType, T.FloatType)):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"field {path}: expected a number, got {value!r}")
        return float(value)
    if isinstance(t, T.BooleanType):
        if not isinstance(value, bool):
            raise ValueError(f"field {path}: expected a boolean, got {value!r}")
        return value
    if isinstance(t, T.BinaryType):
        if isinstance(value, str):
            return base64.b64decode(value, validate=True)
        if isinstance(value, (bytes, bytearray, memoryview)):
            return bytes(value)
        # bytes(n) of an integer would allocate n zero bytes: 25 GB for a hypothesis-drawn 25_279_687_470
        raise ValueError(f"field {path}: expected bytes, got {type(value).__name__}")
    if isinstance(t, T.DecimalType):
        if isinstance(value, bool):
            raise ValueError(f"field {path}: expected a decimal, got {value!r}")
        try:
            number = value if isinstance(value, decimal.Decimal) else decimal.Decimal(str(value))
            exact = number.quantize(decimal.Decimal(1).scaleb(-t.scale))
        except decimal.InvalidOperation:
            raise ValueError(f"field {path}: {value!r} does not fit {t.simpleString()}") from None
        if exact != number or len(exact.as_tuple().digits) > t.precision:
            raise ValueError(f"field {path}: {number} does not fit {t.simpleString()} without rounding")
        return exact
    if isinstance(t, T.DateType):
        if isinstance(value, dt.datetime):
            return value.date()
        if isinstance(value, dt.date):
            return value
        if isinstance(value, int):
            return dt.date(1970, 1, 1) + dt.timedelta(days=value)
        return dt.date.fromisoformat(str(value))
    if isinstance(t, T.TimestampNTZType):
        if isinstance(value, dt.datetime):
            return value if value.tzinfo is None else value.astimezone(dt.timezone.utc).replace(tzinfo=None)
        raise ValueError(f"field {path}: expected a timestamp, got {value!r}")
    if isinstance(t, T.TimestampType):
        if isinstance(value, dt.datetime):
            return value if value.tzinfo else value.replace(tzinfo=dt.timezone.utc)
        if isinstance(value, str):
            return dt.datetime.fromisoformat(value.replace("Z", "+00:00")).astimezone(dt.timezone.utc)
        raise ValueError(f"field {path}: expected a timestamp, got {value!r}")
    raise ValueError(f"field {path}: unsupported column type {t.simpleString()}")


def from_epoch(amount: int, unit: str) -> dt.datetime:
    """A UTC datetime ``amount`` milliseconds (``ms``) or microseconds (``us``) after the epoch."""
    return _EPOCH + dt.timedelta(microseconds=amount * (1000 if unit == "ms" else 1))
