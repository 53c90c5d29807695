"""``converter(t)`` (the per-record path of every schema-driven decoder) returns what ``conform``
returns and raises what it raises, for values of every shape a decoder hands it (no JVM)."""

from __future__ import annotations

import datetime as dt
import decimal
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.sql import types as T

from kafka_iceberg.decode.values import conform, converter

COLUMNS = T.StructType(
    [
        T.StructField("id", T.LongType()),
        T.StructField("qty", T.IntegerType()),
        T.StructField("amount", T.DecimalType(10, 2)),
        T.StructField("big", T.DecimalType(38, 0)),
        T.StructField("score", T.DoubleType()),
        T.StructField("ok", T.BooleanType()),
        T.StructField("name", T.StringType()),
        T.StructField("day", T.DateType()),
        T.StructField("at", T.TimestampType()),
        T.StructField("local", T.TimestampNTZType()),
        T.StructField("raw", T.BinaryType()),
        T.StructField("tags", T.ArrayType(T.StringType())),
        T.StructField("attrs", T.MapType(T.StringType(), T.LongType())),
        T.StructField("ctx", T.StructType([T.StructField("ab", T.StringType()), T.StructField("n", T.IntegerType())])),
    ]
)

# Values of every kind decoders produce, right and wrong for each column.
ANY = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False),
    *[st.decimals(allow_nan=False, allow_infinity=False, places=places) for places in (0, 2, 3)],
    st.decimals(max_value=10**40, min_value=-(10**40), places=0),
    st.text(max_size=8),
    st.binary(max_size=8),
    st.dates(),
    st.datetimes(timezones=st.sampled_from([None, dt.timezone.utc, dt.timezone(dt.timedelta(hours=5))])),
    st.uuids(),
    st.lists(st.text(max_size=3), max_size=3),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)
RECORDS = st.fixed_dictionaries({}, optional={f.name: ANY for f in COLUMNS.fields} | {"extra": ANY})


def outcome(fn, value):
    try:
        return "ok", fn(value)
    except (ValueError, TypeError, ArithmeticError) as exc:
        return "error", f"{type(exc).__name__}: {exc}"


@settings(max_examples=400, deadline=None)
@given(RECORDS)
def test_the_converter_agrees_with_conform_on_any_record(record):
    assert outcome(converter(COLUMNS), record) == outcome(lambda v: conform(v, COLUMNS, ""), record)


@pytest.mark.parametrize(
    "record",
    [
        {"id": 2**63 - 1, "qty": -(2**31), "amount": decimal.Decimal("12.30"), "big": decimal.Decimal(10) ** 30},
        {"id": True},  # a boolean is not an integer
        {"qty": 2**31},  # out of range for int
        {"big": decimal.Decimal("9" * 30)},  # 30 digits: more than Python's decimal context quantizes
        {"amount": decimal.Decimal("1.234")},  # would round
        {"amount": decimal.Decimal("12.3")},  # fits once quantized: conform's value, not the input's
        {"at": dt.datetime(2026, 1, 5, 8, 0)},  # naive: UTC
        {"day": dt.datetime(2026, 1, 5, 8, 0, tzinfo=dt.timezone.utc)},  # a timestamp's date
        {"name": uuid.UUID(int=7), "tags": ("a", "b"), "ctx": {"ab": "x", "n": 3, "more": 1}},
        {"ctx": "not a record"},
        {"tags": "not a list"},
        {"raw": 25_279_687_470},  # hypothesis' find: bytes(n) allocated n zero bytes (25 GB)
    ],
)
def test_the_converter_agrees_with_conform_on_the_edges(record):
    got, expected = outcome(converter(COLUMNS), record), outcome(lambda v: conform(v, COLUMNS, ""), record)
    assert got == expected
    if got[0] == "ok":  # equal and of the same type, field by field
        assert {k: type(v) for k, v in got[1].items()} == {k: type(v) for k, v in expected[1].items()}
        assert {k: str(v) for k, v in got[1].items()} == {k: str(v) for k, v in expected[1].items()}


def test_a_binary_column_takes_bytes_or_base64_and_refuses_anything_else():
    assert conform(bytearray(b"ab"), T.BinaryType(), "raw") == b"ab"
    assert conform("YWI=", T.BinaryType(), "raw") == b"ab"
    with pytest.raises(ValueError, match="field raw: expected bytes, got int"):
        conform(25_279_687_470, T.BinaryType(), "raw")
