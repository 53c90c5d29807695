"""Schema-registry formats and Debezium change streams end to end on the local stack.

Producers use confluent-kafka's own serializers against the stack's registry; tables are read
back through pyiceberg (and, for Debezium, compared with chispa against the expected final state).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.serialization import MessageField, SerializationContext

from kafka_iceberg.cli.demo import avro_value
from tests.support.kafka import consume_all, produce
from tests.support.project import entry_point, project
from tests.support.run import run_pipeline, unique
from tests.support.verify import assert_verified

pytestmark = pytest.mark.integration

V1 = {
    "type": "record",
    "name": "Order",
    "namespace": "shop",
    "fields": [{"name": "id", "type": "long"}, {"name": "name", "type": "string"}],
}
V2 = {**V1, "fields": [*V1["fields"], {"name": "size", "type": ["null", "string"], "default": None}]}


def rows(lake: Any, identifier: str) -> list[dict[str, Any]]:
    return sorted(lake.pyiceberg().load_table(identifier).scan().to_arrow().to_pylist(), key=lambda r: r["id"])


def test_avro_two_versions_evolve_one_table_and_bad_records_reach_the_error_topic(tmp_path, lake, stack):
    ns, topic, errors = unique("avro"), unique("orders"), unique("orders_errors")
    url = stack.registry_url
    first = avro_value(url, topic, V1, {"id": 1, "name": "espresso"})
    produce(stack.kafka_bootstrap, topic, [(None, first)], partition=0)
    yaml = f"""
pipeline: avro_orders
catalog: lake
tables:
  - name: orders
    namespace: {ns}
    source: {{topics: [{topic}], format: avro, schema_registry: {{url: "${{local:schema_registry.url}}"}}}}
    partition_window: none
    errors: {{error_topic: {errors}}}
"""
    run_pipeline(tmp_path / "one", yaml)
    assert [(r["id"], r["name"]) for r in rows(lake, f"{ns}.orders")] == [(1, "espresso")]

    second = avro_value(url, topic, V2, {"id": 2, "name": "latte", "size": "L"})
    unknown_id = b"\x00\x00\x00\x7f\xff" + second[5:]
    wrong_magic = b'{"id": 3, "name": "mocha"}'
    produce(stack.kafka_bootstrap, topic, [(None, second), (b"k", unknown_id), (None, wrong_magic)], partition=0)
    # The second run as a bundle job runs it: the format's console entry point, in a process of its own.
    path = project(tmp_path / "two", yaml)
    result = entry_point("ingest-avro", "--pipeline", str(path), "--env", "local", stack_dir=stack.run_dir)
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    table = lake.pyiceberg().load_table(f"{ns}.orders")
    assert "size" in [f.name for f in table.schema().fields]  # evolved by the second schema version
    assert [(r["id"], r["name"], r["size"]) for r in rows(lake, f"{ns}.orders")] == [
        (1, "espresso", None),
        (2, "latte", "L"),
    ]
    bad = consume_all(stack.kafka_bootstrap, errors)
    assert sorted(m.value for m in bad) == sorted([unknown_id, wrong_magic])  # byte for byte
    reasons = sorted(dict(m.headers)["kafka_iceberg.errors.reason"].decode() for m in bad)
    assert reasons == [
        "unknown schema id 32767 in value (the schema registry has no such avro schema)",
        "wrong magic byte 0x7b in value (the Confluent wire format starts with 0x00)",
    ]
    assert_verified(path)


def test_protobuf_and_json_schema_land_nested_and_typed(tmp_path, lake, stack):
    import datetime as dt

    from confluent_kafka.schema_registry.json_schema import JSONSerializer
    from confluent_kafka.schema_registry.protobuf import ProtobufSerializer

    from tests.decode.test_registry_formats import order_class

    ns, orders, clicks = unique("registry"), unique("proto_orders"), unique("js_clicks")
    client = SchemaRegistryClient({"url": stack.registry_url})
    order = order_class()
    message = order(id=7, name="box", kind=1)
    for sku, qty in (("a", 2), ("b", 1)):
        line = message.lines.add()
        line.sku, line.qty = sku, qty
    message.at.FromDatetime(dt.datetime(2024, 1, 2, 3, 4, 5))
    message.note.value = "fragile"
    serialize = ProtobufSerializer(order, client, {"use.deprecated.format": False})
    produce(
        stack.kafka_bootstrap, orders, [(None, serialize(message, SerializationContext(orders, MessageField.VALUE)))]
    )
    schema = {
        "title": "Click",
        "type": "object",
        "properties": {"id": {"type": "integer"}, "page": {"type": "string"}},
        "required": ["id"],
    }
    click = JSONSerializer(json.dumps(schema), client)(
        {"id": 1, "page": "/"}, SerializationContext(clicks, MessageField.VALUE)
    )
    produce(stack.kafka_bootstrap, clicks, [(None, click)])
    registry = '{url: "${local:schema_registry.url}"}'
    run_pipeline(
        tmp_path,
        f"""
pipeline: registry_formats
catalog: lake
tables:
  - name: orders
    namespace: {ns}
    source: {{topics: [{orders}], format: protobuf, schema_registry: {registry}}}
    partition_window: none
  - name: clicks                      # no registry of its own: the environment's (local.yml)
    namespace: {ns}
    source: {{topics: [{clicks}], format: json_schema}}
    partition_window: none
""",
    )
    (landed,) = rows(lake, f"{ns}.orders")
    assert (landed["id"], landed["name"], landed["kind"], landed["note"]) == (7, "box", "B", "fragile")
    assert [(x["sku"], x["qty"]) for x in landed["lines"]] == [("a", 2), ("b", 1)]  # repeated nested message
    assert landed["at"] == dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=dt.timezone.utc)  # an instant: timestamptz
    assert [(r["id"], r["page"]) for r in rows(lake, f"{ns}.clicks")] == [(1, "/")]
    assert_verified(tmp_path / "pipelines" / "p.yml")


CONNECT_SCHEMA = {
    "type": "struct",
    "fields": [
        {
            "field": "before",
            "type": "struct",
            "optional": True,
            "fields": [
                {"field": "id", "type": "int64"},
                {"field": "name", "type": "string"},
                {"field": "qty", "type": "int32"},
            ],
        },
        {
            "field": "after",
            "type": "struct",
            "optional": True,
            "fields": [
                {"field": "id", "type": "int64"},
                {"field": "name", "type": "string"},
                {"field": "qty", "type": "int32"},
            ],
        },
        {"field": "source", "type": "struct", "fields": [{"field": "lsn", "type": "int64", "optional": True}]},
        {"field": "op", "type": "string"},
        {"field": "ts_ms", "type": "int64"},
    ],
}


def event(op: str, lsn: int, before: dict[str, Any] | None, after: dict[str, Any] | None) -> str:
    payload = {"before": before, "after": after, "source": {"lsn": lsn}, "op": op, "ts_ms": 1_700_000_000_000 + lsn}
    return json.dumps({"schema": CONNECT_SCHEMA, "payload": payload})


def test_debezium_stream_leaves_the_source_final_state(tmp_path, spark, lake, stack):
    from chispa import assert_df_equality

    ns, topic = unique("cdc"), unique("inventory")
    a1, a2, a3 = ({"id": 1, "name": "apple", "qty": q} for q in (5, 4, 3))
    b1 = {"id": 2, "name": "pear", "qty": 9}
    c1 = {"id": 3, "name": "plum", "qty": 1}
    changes = [
        ("1", event("r", 10, None, a1)),  # snapshot read
        ("2", event("c", 11, None, b1)),
        ("3", event("c", 12, None, c1)),
        ("1", event("u", 14, a1, a3)),  # the newest update of key 1 ...
        ("1", event("u", 13, a1, a2)),  # ... and an older one arriving after it (out of order)
        ("3", event("d", 15, c1, None)),
        ("3", None),  # Debezium's tombstone after a delete: ignored
        ("2", event("u", 16, b1, {**b1, "qty": 8})),
        ("2", event("u", 16, b1, {**b1, "qty": 8})),  # re-delivered
    ]
    produce(stack.kafka_bootstrap, topic, changes, partition=0)
    yaml = f"""
pipeline: cdc
catalog: lake
tables:
  - name: inventory
    namespace: {ns}
    source: {{topics: [{topic}], format: json, envelope: debezium}}
    commit_mode: upsert
    key_fields: [id]
    partition_window: none
"""
    run_pipeline(tmp_path, yaml)
    actual = spark.table(f"lake.{ns}.inventory").select("id", "name", "qty", "_op", "_source_position")
    expected = spark.createDataFrame(
        [(1, "apple", 3, "u", 14), (2, "pear", 8, "u", 16)],
        "id BIGINT, name STRING, qty INT, _op STRING, _source_position BIGINT",
    )
    assert_df_equality(actual, expected, ignore_row_order=True, ignore_nullable=True)
    assert_verified(tmp_path / "pipelines" / "p.yml")  # an upsert table: reconciled per batch
