"""Each row of docs/decode.md's registry type table, and the wire format, without Spark or services."""

from __future__ import annotations

import json

import pytest

from kafka_iceberg.decode import avro, debezium
from kafka_iceberg.decode.wire import WireError, encode_indexes, message_indexes, split_header

AVRO_ROWS = [
    ("string", "string"),
    ("int", "int"),
    ("long", "bigint"),
    ("float", "float"),
    ("double", "double"),
    ("boolean", "boolean"),
    ("bytes", "binary"),
    ({"type": "fixed", "name": "F", "size": 4}, "binary"),
    ({"type": "enum", "name": "E", "symbols": ["A"]}, "string"),
    (["null", "long"], "bigint"),
    (["null", "long", "string"], "string"),
    ({"type": "array", "items": "long"}, "array<bigint>"),
    ({"type": "map", "values": "int"}, "map<string,int>"),
    ({"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]}, "struct<a:int>"),
    ({"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}, "decimal(9,2)"),
    ({"type": "int", "logicalType": "date"}, "date"),
    ({"type": "long", "logicalType": "timestamp-millis"}, "timestamp"),
    ({"type": "long", "logicalType": "timestamp-micros"}, "timestamp"),
    ({"type": "long", "logicalType": "local-timestamp-micros"}, "timestamp_ntz"),
    ({"type": "string", "logicalType": "uuid"}, "string"),
]


@pytest.mark.parametrize(("schema", "expected"), AVRO_ROWS, ids=[json.dumps(s) for s, _ in AVRO_ROWS])
def test_avro_type_mapping(schema, expected):
    record = {"type": "record", "name": "T", "fields": [{"name": "c", "type": schema}]}
    assert avro.record_columns(json.dumps(record))["c"].dataType.simpleString() == expected


CONNECT_ROWS = [
    ({"type": "int32"}, "int"),
    ({"type": "int64"}, "bigint"),
    ({"type": "float64"}, "double"),
    ({"type": "boolean"}, "boolean"),
    ({"type": "string"}, "string"),
    ({"type": "bytes"}, "binary"),
    ({"type": "int32", "name": "io.debezium.time.Date"}, "date"),
    ({"type": "int64", "name": "io.debezium.time.Timestamp"}, "timestamp"),
    ({"type": "int64", "name": "io.debezium.time.MicroTimestamp"}, "timestamp"),
    ({"type": "string", "name": "io.debezium.time.ZonedTimestamp"}, "timestamp"),
    (
        {
            "type": "bytes",
            "name": "org.apache.kafka.connect.data.Decimal",
            "parameters": {"scale": "2", "connect.decimal.precision": "10"},
        },
        "decimal(10,2)",
    ),
]


@pytest.mark.parametrize(("schema", "expected"), CONNECT_ROWS, ids=[json.dumps(s) for s, _ in CONNECT_ROWS])
def test_debezium_json_type_mapping(schema, expected):
    assert debezium.connect_type(schema).simpleString() == expected


def test_wire_header():
    assert split_header(b"\x00\x00\x00\x01\x00abc") == (256, b"abc")
    with pytest.raises(WireError, match="wrong magic byte 0x01"):
        split_header(b"\x01\x00\x00\x00\x01")
    with pytest.raises(WireError, match="shorter than the 5-byte"):
        split_header(b"\x00\x00")


@pytest.mark.parametrize("indexes", [[0], [1], [0, 2], [3, 1, 4]])
def test_protobuf_message_indexes_round_trip(indexes):
    assert message_indexes(encode_indexes(indexes) + b"rest") == (indexes, b"rest")


def test_debezium_ops():
    row, delete = debezium.change({"op": "d", "before": {"id": 1}, "after": None, "source": {"lsn": 7}, "ts_ms": 1})
    assert delete and row == {"id": 1, "_op": "d", "_source_position": 7}
    row, delete = debezium.change({"op": "u", "before": None, "after": {"id": 1}, "source": {}, "ts_ms": 5})
    assert not delete and row["_source_position"] == 5  # no lsn: ts_ms
    with pytest.raises(ValueError, match="unsupported Debezium op 't'"):
        debezium.change({"op": "t", "source": {}})
