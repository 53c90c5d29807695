"""JSON Schema → Iceberg types (Estuary's mapping, PRODUCT.md), through decode."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

from kafka_iceberg.spec.types import columns_from_json_schema
from tests.decode.conftest import DATA, table

SCHEMA_FILE = DATA / "all_types.schema.json"
EXPECTED_TYPES = {
    "tags": "string",  # array -> string (JSON)
    "attrs": "string",  # object -> string (JSON)
    "active": "boolean",
    "id": "long",  # integer
    "score": "double",  # number
    "blob": "binary",  # contentEncoding base64
    "created": "timestamp",  # format date-time -> timestamptz
    "birthday": "date",
    "count_text": "long",  # format integer
    "ratio_text": "double",  # format number
    "name": "string",
    "at": "string",  # format time stays a string
    "uid": "string",  # format uuid stays a string
    "maybe": "long",  # ["integer", "null"]
}
SPARK_TYPES = {"string": "string", "long": "bigint", "boolean": "boolean", "double": "double"}
SPARK_TYPES |= {"binary": "binary", "timestamp": "timestamp", "date": "date"}


def test_every_row_of_the_type_table() -> None:
    mapped = columns_from_json_schema(json.loads(SCHEMA_FILE.read_text()))
    assert {name: col_type for name, (col_type, _) in mapped.items()} == EXPECTED_TYPES
    assert [name for name, (_, required) in mapped.items() if required] == ["id"]


def test_flatten_with_a_json_schema_decodes_each_type(run: Any) -> None:
    spec = table("flatten", schema={"json_schema": SCHEMA_FILE.name}, schema_evolution="strict")
    document = {
        "tags": ["a", "b"],
        "attrs": {"k": 1},
        "active": True,
        "id": 1,
        "score": 2.5,
        "blob": "aGk=",
        "created": "2024-05-06T07:08:09Z",
        "birthday": "1990-12-31",
        "count_text": "42",
        "ratio_text": "0.5",
        "name": "n",
        "at": "10:00:00",
        "uid": "7c9e6679-7425-40de-944b-e07fc1f90ae7",
        "maybe": None,
    }
    messages = [
        ("k", json.dumps(document)),
        ("k", '{"name":"no id"}'),
        ("k", '{"id":2,"created":"yesterday","blob":"%%%"}'),
    ]
    result = run(spec, messages, base_dir=DATA)
    dtypes = dict(result.decoded.rows.dtypes)
    assert {name: dtypes[name] for name in EXPECTED_TYPES} == {n: SPARK_TYPES[t] for n, t in EXPECTED_TYPES.items()}
    [row] = result.rows
    assert row.asDict() | {"blob": bytes(row["blob"])} == {
        "topic": "t",
        "partition": 0,
        "offset": 0,
        "timestamp": row["timestamp"],
        "tags": '["a","b"]',
        "attrs": '{"k":1}',
        "active": True,
        "id": 1,
        "score": 2.5,
        "blob": b"hi",
        "created": dt.datetime(2024, 5, 6, 7, 8, 9),
        "birthday": dt.date(1990, 12, 31),
        "count_text": 42,
        "ratio_text": 0.5,
        "name": "n",
        "at": "10:00:00",
        "uid": "7c9e6679-7425-40de-944b-e07fc1f90ae7",
        "maybe": None,
        "pt": "07-13-2023 21",
        "_ki_tombstone": False,
    }
    assert result.reasons() == {
        1: "field id: required but missing or null",
        2: 'field blob: expected binary, got "%%%"; field created: expected timestamp, got "yesterday"',
    }


def test_csv_with_a_json_schema_maps_fields_in_property_order(run: Any) -> None:
    spec = table("csv", schema={"json_schema": str(SCHEMA_FILE)})
    fields = '"[""a""]",{},true,1,2.5,aGk=,2024-05-06T07:08:09Z,1990-12-31,42,0.5,n,10:00:00,u,'
    result = run(spec, [("k", fields)])
    [row] = result.rows
    assert (row["tags"], row["id"], row["blob"], row["maybe"]) == ('["a"]', 1, bytearray(b"hi"), None)
