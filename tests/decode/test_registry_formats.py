"""Avro, Protobuf and JSON Schema in the Confluent wire format, decoded against a registry.

The producer side is confluent-kafka's own serializers; the registry is the local stack's
Apicurio Registry (its Confluent-compatible API), as real as the one a cluster points at.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from tests.decode.conftest import table

V1 = {
    "type": "record",
    "name": "Order",
    "namespace": "shop",
    "fields": [{"name": "id", "type": "long"}, {"name": "name", "type": "string"}],
}
V2 = {**V1, "fields": [*V1["fields"], {"name": "size", "type": ["null", "string"], "default": None}]}


@pytest.fixture(scope="module")
def registry(stack: Any) -> Iterator[str]:
    yield stack.registry_url


def avro_bytes(url: str, topic: str, schema: dict[str, Any], record: dict[str, Any]) -> bytes:
    serializer = AvroSerializer(SchemaRegistryClient({"url": url}), json.dumps(schema))
    data = serializer(record, SerializationContext(topic, MessageField.VALUE))
    assert data is not None
    return data


def avro_table(url: str, topic: str, **keys: Any) -> Any:
    spec = table("avro", source_schema_registry={"url": url}, **keys)
    return spec.model_copy(update={"source": spec.source.model_copy(update={"topics": [topic]})})


@pytest.mark.integration  # the stack's registry
def test_two_schema_versions_decode_into_the_latest_columns(registry: str, run: Any) -> None:
    from tests.decode.conftest import Msg

    topic = f"orders_{uuid.uuid4().hex[:6]}"
    one = avro_bytes(registry, topic, V1, {"id": 1, "name": "espresso"})
    two = avro_bytes(registry, topic, V2, {"id": 2, "name": "latte", "size": "L"})
    result = run(avro_table(registry, topic), [Msg(None, one, topic=topic), Msg(None, two, topic=topic)])
    assert result.errors == []
    assert [(r["id"], r["name"], r["size"]) for r in result.rows] == [(1, "espresso", None), (2, "latte", "L")]
    assert list(result.decoded.new_columns) == ["id", "name", "size"]


@pytest.mark.integration  # the stack's registry
def test_wire_format_errors_are_per_record_with_reasons(registry: str, run: Any) -> None:
    from tests.decode.conftest import Msg

    topic = f"orders_{uuid.uuid4().hex[:6]}"
    good = avro_bytes(registry, topic, V1, {"id": 1, "name": "espresso"})
    unknown_id = b"\x00\x00\x00\x03\xe7" + good[5:]
    wrong_magic = b'{"id": 3}'
    truncated = good[:6]
    short = b"\x00\x00\x01"
    messages = [Msg(None, m, topic=topic) for m in (good, unknown_id, wrong_magic, truncated, short)]
    result = run(avro_table(registry, topic), messages)
    assert [r["id"] for r in result.rows] == [1]
    reasons = result.reasons()
    assert reasons[1] == "unknown schema id 999 in value (the schema registry has no such avro schema)"
    assert reasons[2] == "wrong magic byte 0x7b in value (the Confluent wire format starts with 0x00)"
    assert reasons[3].startswith(f"value does not match writer schema {int.from_bytes(good[1:5], 'big')}: ")
    assert reasons[4] == "value of 3 bytes is shorter than the 5-byte Confluent header"
    by_offset = {r["offset"]: r for r in result.errors}
    assert by_offset[1]["value"] == unknown_id  # byte for byte
    assert by_offset[2]["value"] == wrong_magic


def test_registry_outage_fails_the_batch(run: Any) -> None:
    from kafka_iceberg.errors import RegistryUnavailableError
    from tests.decode.conftest import Msg

    spec = table("avro", source_schema_registry={"url": "http://127.0.0.1:9", "retries": 1})
    with pytest.raises(RegistryUnavailableError, match="after 2 attempts"):
        run(spec, [Msg(None, b"\x00\x00\x00\x00\x01\x02")])


LOGICAL = {
    "type": "record",
    "name": "Logical",
    "fields": [
        {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "at_ms", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "at_us", "type": {"type": "long", "logicalType": "timestamp-micros"}},
        {"name": "uid", "type": {"type": "string", "logicalType": "uuid"}},
        {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["A", "B"]}},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "attrs", "type": {"type": "map", "values": "long"}},
        {"name": "addr", "type": {"type": "record", "name": "Addr", "fields": [{"name": "city", "type": "string"}]}},
        {"name": "note", "type": ["null", "string"], "default": None},
    ],
}


@pytest.mark.integration  # the stack's registry
def test_avro_logical_and_nested_types_land_typed(registry: str, run: Any) -> None:
    from tests.decode.conftest import Msg

    topic = f"logical_{uuid.uuid4().hex[:6]}"
    at = dt.datetime(2024, 1, 2, 3, 4, 5, 678000, tzinfo=dt.timezone.utc)
    uid = uuid.UUID("12345678-1234-5678-1234-567812345678")
    record = {
        "amount": decimal.Decimal("12.34"),
        "day": dt.date(2024, 2, 29),
        "at_ms": at,
        "at_us": at,
        "uid": uid,
        "kind": "B",
        "tags": ["a", "b"],
        "attrs": {"x": 1},
        "addr": {"city": "Oslo"},
        "note": None,
    }
    data = avro_bytes(registry, topic, LOGICAL, record)
    result = run(avro_table(registry, topic), [Msg(None, data, topic=topic)])
    assert result.errors == []
    row = result.rows[0]
    assert row["amount"] == decimal.Decimal("12.34")
    assert row["day"] == dt.date(2024, 2, 29)
    assert row["at_ms"] == at.replace(tzinfo=None)  # the session time zone is UTC
    assert row["uid"] == str(uid)
    assert row["kind"] == "B"
    assert row["tags"] == ["a", "b"]
    assert row["attrs"] == {"x": 1}
    assert row["addr"]["city"] == "Oslo"
    assert row["note"] is None


ORDER_PROTO = """
syntax = "proto3";
package shop;
import "google/protobuf/timestamp.proto";
import "google/protobuf/wrappers.proto";
message Order {
  int64 id = 1;
  string name = 2;
  message Line { string sku = 1; int32 qty = 2; }
  repeated Line lines = 3;
  google.protobuf.Timestamp at = 4;
  google.protobuf.StringValue note = 5;
  map<string, int64> attrs = 6;
  enum Kind { A = 0; B = 1; }
  Kind kind = 7;
}
"""


def order_class() -> Any:
    from google.protobuf import message_factory

    from kafka_iceberg.decode.protobuf import _pool, compile_proto

    _, file_desc = _pool((compile_proto(ORDER_PROTO, "shop/order.proto", []),))
    return message_factory.GetMessageClass(file_desc.message_types_by_name["Order"])


@pytest.mark.integration  # the stack's registry
def test_protobuf_nested_messages_repeated_fields_and_well_known_types(registry: str, run: Any) -> None:
    from confluent_kafka.schema_registry.protobuf import ProtobufSerializer

    from tests.decode.conftest import Msg

    topic = f"proto_{uuid.uuid4().hex[:6]}"
    order = order_class()
    serializer = ProtobufSerializer(order, SchemaRegistryClient({"url": registry}), {"use.deprecated.format": False})
    message = order(id=7, name="box", kind=1)
    line = message.lines.add()
    line.sku, line.qty = "a", 2
    message.at.FromDatetime(dt.datetime(2024, 1, 2, 3, 4, 5))
    message.note.value = "fragile"
    message.attrs["w"] = 3
    data = serializer(message, SerializationContext(topic, MessageField.VALUE))
    spec = table("protobuf", source_schema_registry={"url": registry})
    spec = spec.model_copy(update={"source": spec.source.model_copy(update={"topics": [topic]})})
    result = run(spec, [Msg(None, data, topic=topic), Msg(None, data[:7] + b"\xff\xff", topic=topic)])
    row = result.rows[0]
    assert (row["id"], row["name"], row["kind"], row["note"]) == (7, "box", "B", "fragile")
    assert [(x["sku"], x["qty"]) for x in row["lines"]] == [("a", 2)]
    assert row["at"] == dt.datetime(2024, 1, 2, 3, 4, 5)
    assert row["attrs"] == {"w": 3}
    assert list(result.reasons()) == [1]


@pytest.mark.integration  # the stack's registry
def test_json_schema_documents_are_validated_against_the_writer_schema(registry: str, run: Any) -> None:
    from confluent_kafka.schema_registry.json_schema import JSONSerializer

    from tests.decode.conftest import Msg

    topic = f"js_{uuid.uuid4().hex[:6]}"
    schema = {
        "title": "Click",
        "type": "object",
        "properties": {"id": {"type": "integer"}, "page": {"type": "string"}, "ctx": {"type": "object"}},
        "required": ["id"],
    }
    serializer = JSONSerializer(json.dumps(schema), SchemaRegistryClient({"url": registry}))
    good = serializer({"id": 1, "page": "/", "ctx": {"a": 1}}, SerializationContext(topic, MessageField.VALUE))
    assert good is not None
    bad = good[:5] + b'{"page": 3}'
    spec = table("json_schema", source_schema_registry={"url": registry})
    spec = spec.model_copy(update={"source": spec.source.model_copy(update={"topics": [topic]})})
    result = run(spec, [Msg(None, good, topic=topic), Msg(None, bad, topic=topic)])
    assert [(r["id"], r["page"], r["ctx"]) for r in result.rows] == [(1, "/", '{"a":1}')]
    assert "does not match writer schema" in result.reasons()[1]
