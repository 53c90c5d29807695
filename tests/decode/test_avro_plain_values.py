"""Avro values handed to Arrow as fastavro reads them (``Readers.plain``) make the same batch as
values conformed first: the same Arrow arrays, the same failed records and the same reasons.

The shortcut skips ``values.conform`` for writers whose columns are the codec's, type for type,
with nothing to convert; Arrow then refuses what conform would have refused, and a batch it
refuses is conformed value by value. No JVM and no registry: the codec is built directly.
"""

from __future__ import annotations

import datetime as dt
import decimal
import io
import json
from typing import Any

import fastavro
import pyarrow as pa
import pytest

from kafka_iceberg.decode import avro
from kafka_iceberg.decode.codec import Codec
from kafka_iceberg.decode.plan import VALUE
from kafka_iceberg.decode.schemaful import Readers, decode_batch

# Every type the shortcut takes.
EVERY = {
    "type": "record",
    "name": "Every",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "qty", "type": "int"},
        {"name": "ratio", "type": "float"},
        {"name": "score", "type": "double"},
        {"name": "ok", "type": "boolean"},
        {"name": "name", "type": "string"},
        {"name": "raw", "type": "bytes"},
        {"name": "code", "type": {"type": "fixed", "name": "Code", "size": 2}},
        {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["A", "B"]}},
        {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 6, "scale": 2}},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "at_us", "type": {"type": "long", "logicalType": "timestamp-micros"}},
        {"name": "local", "type": {"type": "long", "logicalType": "local-timestamp-micros"}},
        {"name": "note", "type": ["null", "string"], "default": None},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "attrs", "type": {"type": "map", "values": "long"}},
        {
            "name": "ctx",
            "type": {"type": "record", "name": "Ctx", "fields": [{"name": "ab", "type": ["null", "int"]}]},
        },
    ],
}


def record(i: int) -> dict[str, Any]:
    return {
        "id": i,
        "qty": -i,
        "ratio": i / 3,
        "score": i * 1.5,
        "ok": i % 2 == 0,
        "name": f"n{i}é",
        "raw": bytes([i % 256]),
        "code": b"ab",
        "kind": "AB"[i % 2],
        "amount": decimal.Decimal(i) / 4,
        "day": dt.date(2024, 1, 1) + dt.timedelta(days=i),
        "at": dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(milliseconds=i),
        "at_us": dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(microseconds=i),
        "local": dt.datetime(2024, 1, 1) + dt.timedelta(seconds=i),
        "note": None if i % 3 else f"note {i}",
        "tags": [f"t{j}" for j in range(i % 3)],
        "attrs": {f"k{j}": j for j in range(i % 2 + 1)},
        "ctx": {"ab": None if i % 2 else i},
    }


def encode(schema: dict[str, Any], doc: dict[str, Any]) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), doc)
    return b"\x00" + (1).to_bytes(4, "big") + out.getvalue()


def codec(schema: dict[str, Any]) -> Codec:
    text = json.dumps(schema)
    return Codec("avro", "value", VALUE, True, avro.record_columns(text), writers={1: text})


def both(values: list[bytes | None], schema: dict[str, Any] = EVERY) -> tuple[pa.RecordBatch, pa.RecordBatch]:
    """``values`` decoded with the shortcut, and with every value conformed."""
    c = codec(schema)
    batch = pa.RecordBatch.from_arrays([pa.array(values, pa.binary())], names=[VALUE])
    readers = Readers(c)
    assert readers.plain(1)  # the shortcut applies to this writer
    conformed = Readers(c)
    conformed._plain[1] = False
    return decode_batch(batch, c, readers), decode_batch(batch, c, conformed)


def test_values_as_read_make_the_batch_conformed_values_make():
    plain, conformed = both([encode(EVERY, record(i)) for i in range(40)] + [None, b"\x01junk"])
    assert plain.equals(conformed)
    assert plain.column("_ki_failed").to_pylist()[-2:] == [True, True]
    assert plain.column("_ki_fields").to_pylist()[5]["amount"] == decimal.Decimal("1.25")


@pytest.mark.parametrize(
    ("field", "value", "reason"),
    [
        ("amount", decimal.Decimal("123456.00"), "does not fit decimal(6,2) without rounding"),  # 8 digits
        ("qty", 2**31, "out of range for int"),  # more than an Avro int holds: only a broken producer
    ],
)
def test_a_value_arrow_refuses_gets_the_reason_conform_gives(field, value, reason):
    loose = json.loads(json.dumps(EVERY))  # written with a wider type than the columns say
    for f in loose["fields"]:
        if f["name"] == field:
            f["type"] = {"type": "bytes", "logicalType": "decimal", "precision": 20, "scale": 2}
            f["type"] = f["type"] if field == "amount" else "long"
    bad = encode(loose, record(1) | {field: value})
    plain, conformed = both([encode(EVERY, record(0)), bad, encode(EVERY, record(2))])
    assert plain.equals(conformed)
    assert plain.column("_ki_failed").to_pylist() == [False, True, False]
    assert reason in plain.column("_ki_reason").to_pylist()[1]


@pytest.mark.parametrize(
    "field_type",
    [
        {"type": "string", "logicalType": "uuid"},  # fastavro gives a UUID, the column a string
        ["null", "string", "long"],  # several types: JSON text
        {"type": "bytes", "logicalType": "decimal", "precision": 30, "scale": 0},  # past exact quantizing
        {"type": "int", "logicalType": "time-millis"},  # fastavro gives a time, the column an int
    ],
)
def test_writers_with_values_to_convert_are_conformed(field_type):
    schema = {"type": "record", "name": "R", "fields": [{"name": "x", "type": field_type}]}
    assert not avro.plain_values(avro.parse(json.dumps(schema)))
    assert not Readers(codec(schema)).plain(1)


def test_a_writer_whose_columns_differ_from_the_tables_is_conformed():
    older = {**EVERY, "fields": EVERY["fields"][:3]}
    c = codec(EVERY)
    c.writers[2] = json.dumps(older)
    readers = Readers(c)
    assert readers.plain(1) and not readers.plain(2)
