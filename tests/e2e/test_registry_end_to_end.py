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

from kafka_iceberg.checks.error_topic import H_OFFSET, H_REASON
from kafka_iceberg.cli.demo import avro_value
from tests.support.kafka import consume_all, produce
from tests.support.project import entry_point, project
from tests.support.run import run_pipeline, unique
from tests.support.spy import returns
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


# Every Avro type the table maps (docs/decode.md, "Type mapping"); the second version adds a column.
TYPED_V1 = {
    "type": "record",
    "name": "Payment",
    "namespace": "shop",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["CARD", "CASH"]}},
        {
            "name": "store",
            "type": {
                "type": "record",
                "name": "Store",
                "fields": [{"name": "city", "type": "string"}, {"name": "open", "type": "boolean"}],
            },
        },
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "attrs", "type": {"type": "map", "values": "int"}},
        {"name": "note", "type": ["null", "string"], "default": None},
        {"name": "score", "type": "float"},
    ],
}
TYPED_V2 = {
    **TYPED_V1,
    "fields": [*TYPED_V1["fields"], {"name": "channel", "type": ["null", "string"], "default": None}],
}
TYPED_RULES = {
    "small": ("id < 1000000", "quarantine"),
    "not_thirteen": ("id <> 13", "drop"),
    "cash_noted": ("kind <> 'CASH' OR note IS NOT NULL", "warn"),
}


def payments(url: str, topic: str) -> list[tuple[bytes | None, bytes | None]]:
    """Two schema versions' records, the rules' cases among them, and records that do not decode."""
    import datetime as dt
    import decimal

    from confluent_kafka.schema_registry.avro import AvroSerializer

    client = SchemaRegistryClient({"url": url})
    context = SerializationContext(topic, MessageField.VALUE)
    versions = [AvroSerializer(client, json.dumps(schema)) for schema in (TYPED_V1, TYPED_V2)]

    def record(i: int, **over: Any) -> dict[str, Any]:
        doc = {
            "id": i,
            "amount": decimal.Decimal(i) + decimal.Decimal("0.25"),
            "at": dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(minutes=i),
            "kind": "CASH" if i % 4 == 0 else "CARD",
            "store": {"city": f"c{i % 5}", "open": i % 2 == 0},
            "tags": [f"t{j}" for j in range(i % 3)],
            "attrs": {f"a{j}": j * i for j in range(i % 2 + 1)},
            "note": None if i % 3 == 0 else f"n{i}",
            "score": i / 4,
        }
        return doc | over

    good = [versions[0](record(i), context) for i in range(120)]
    good += [versions[1](record(i, channel=f"ch{i % 2}" if i % 5 else None), context) for i in range(120, 240)]
    valid = good[7]
    assert valid is not None
    bad = [
        b'{"id": 1}',  # not the wire format
        b"\x00\x00\x00\x7f\xff" + valid[5:],  # a schema id the registry does not have
        valid[:9],  # cut short
        valid + b"\x00",  # a byte left after the record
        None,  # a tombstone: no deletes without Debezium
        versions[0](record(300, at=10**15), context),  # year 33658: past what the column holds
    ]
    cases = [versions[1](record(i, **over), context) for i, over in ((2_000_000, {}), (13, {}), (404, {"note": None}))]
    messages: list[tuple[bytes | None, bytes | None]] = [(None, v) for v in good[:100] + bad + cases + good[100:]]
    return messages + [(b"k", v) for v in bad[:2]]


def test_avro_decoded_where_written_matches_sparks_writer(tmp_path, lake, stack, monkeypatch):
    """Issue 20: with the Arrow writer, the tasks that decode an Avro batch write its records too
    (write/certified.py, ``_decoded``), and only the records they cannot keep go back to Spark;
    value for value the same table, error rows, quarantine rows and counts as Spark's writer, over
    two schema versions, every mapped type, the rules' cases and records that do not decode."""
    from kafka_iceberg.write import certified, writer

    written: list[certified.ParsedBatch] = returns(
        monkeypatch, writer, "write_where_parsed", certified.write_where_parsed
    )
    expectations = {name: {"expr": sql, "on_violation": action} for name, (sql, action) in TYPED_RULES.items()}
    outs = {}
    for engine in ("spark", "arrow"):
        ns, topic, errors = unique("avro_where"), unique("payments"), unique("payments_errors")
        messages = payments(stack.registry_url, topic)
        produce(stack.kafka_bootstrap, topic, messages, partition=0)
        yaml_text = f"""
pipeline: avro_where_written
catalog: lake
tables:
  - name: payments
    namespace: {ns}
    source: {{topics: [{topic}], format: avro, max_records_per_batch: 50, schema_registry: {{url: "${{local:schema_registry.url}}"}}}}
    write: {{engine: {engine}}}
    errors: {{error_topic: {errors}, quarantine_table: {ns}.payments_quarantine}}
    expectations: {json.dumps(expectations)}
"""
        ran = run_pipeline(tmp_path / engine, yaml_text)
        assert_verified(tmp_path / engine / "pipelines" / "p.yml")
        table = lake.pyiceberg().load_table(f"{ns}.payments")
        scanned = table.scan().to_arrow().to_pylist()
        published = {
            int(dict(m.headers)[H_OFFSET]): (dict(m.headers)[H_REASON].decode(), m.key, m.value)
            for m in consume_all(stack.kafka_bootstrap, errors)
        }
        quarantined = {
            r["offset"]: (r["_error"], r["_error_stage"], r["key"], r["value"])
            for r in lake.pyiceberg().load_table(f"{ns}.payments_quarantine").scan().to_arrow().to_pylist()
        }
        reports = [
            (r.records_in, r.records_written, r.records_failed, r.records_dropped, r.records_quarantined,
             r.expectations_passed, r.expectations_failed)
            for r in ran.reports
        ]  # fmt: skip
        outs[engine] = {
            "schema": [(f.name, str(f.field_type)) for f in table.schema().fields],
            "rows": {
                r["offset"]: {k: v for k, v in r.items() if k not in ("topic", "timestamp", "pt")} for r in scanned
            },
            "published": published,
            "quarantined": quarantined,
            "reports": reports,
            "sent": messages,
        }
    batches = -(-len(outs["arrow"]["sent"]) // 50)
    assert len(written) == batches  # every batch of the Arrow writer's run, none of Spark's
    # Taken by the tasks per batch of 50, written or settled as errors: the first batch's codec starts
    # from the subject's latest version, the second (no job reads the batch's ids), so the first
    # batch's records, all of the first version, are left to Spark, which decodes them with it; its
    # id is known from the second batch on. In the third, both versions are known: the records that
    # do not decode are settled there (not Avro, cut short, a byte left over, a tombstone, a
    # timestamp past Python's years), but the unknown schema id's, which the driver looks up; the
    # drop rule's 13 and the quarantine rule's 2,000,000 are left to Spark. In the sixth batch the
    # registry is known not to have that id.
    assert [w.stats["in"] for w in written] == [0, 50, 47, 50, 50, 1]
    assert [w.left_count for w in written] == [50, 0, 3, 0, 0, 0]
    assert [len(w.errors) for w in written] == [0, 0, 5, 0, 1, 1]
    assert [sorted(w.unseen) for w in written][1:] == [[], [32767], [], [], []]
    assert len(written[0].unseen) == 1  # the first version's id
    assert outs["arrow"]["schema"] == outs["spark"]["schema"]
    assert ("channel", "string") in outs["spark"]["schema"]  # evolved by the second version
    assert outs["arrow"]["rows"] == outs["spark"]["rows"]
    assert outs["arrow"]["published"] == outs["spark"]["published"]
    assert outs["arrow"]["quarantined"] == outs["spark"]["quarantined"]
    assert outs["arrow"]["reports"] == outs["spark"]["reports"]
    rows = outs["spark"]["rows"]
    assert len(rows) == 240  # not 13 (dropped, twice), not 2,000,000 (quarantined); 404 warned and kept
    assert {r["id"] for r in rows.values()} == set(range(240)) - {13} | {404}


def test_avro_with_a_rule_pyarrow_cannot_evaluate_keeps_sparks_side_and_its_new_versions(
    tmp_path, lake, stack, monkeypatch
):
    """The Arrow writer's Avro pass does not apply (``length`` is not translated): Spark's side decodes
    every batch, with the schema ids of the batch itself, so a version first seen in a later batch
    lands instead of being an unknown schema id (the ids the processor learned are not enough)."""
    from kafka_iceberg.write import certified, writer

    written = returns(monkeypatch, writer, "write_where_parsed", certified.write_where_parsed)
    ns, topic, errors = unique("avro_rule"), unique("orders"), unique("orders_errors")
    first = [avro_value(stack.registry_url, topic, V1, {"id": i, "name": f"n{i}"}) for i in range(3)]
    second = [avro_value(stack.registry_url, topic, V2, {"id": i, "name": f"n{i}", "size": "L"}) for i in range(3, 6)]
    produce(stack.kafka_bootstrap, topic, [(None, v) for v in first + second], partition=0)
    run_pipeline(
        tmp_path,
        f"""
pipeline: avro_rule
catalog: lake
tables:
  - name: orders
    namespace: {ns}
    source: {{topics: [{topic}], format: avro, max_records_per_batch: 3, schema_registry: {{url: "${{local:schema_registry.url}}"}}}}
    write: {{engine: arrow}}
    partition_window: none
    errors: {{error_topic: {errors}}}
    expectations: {{named: {{expr: "length(name) > 0", on_violation: warn}}}}
""",
    )
    assert written == []  # the rule keeps every batch on Spark's side
    assert [(r["id"], r["size"]) for r in rows(lake, f"{ns}.orders")] == [(i, None if i < 3 else "L") for i in range(6)]
    assert consume_all(stack.kafka_bootstrap, errors) == []


def test_avro_with_headers_on_the_arrow_writer_is_decoded_by_sparks_side_and_written_by_the_single_pass(
    tmp_path, lake, stack, monkeypatch
):
    """``include_headers``: the tasks do not decode (the headers map is Spark SQL's), so Spark's side
    decodes the batch (the JVM's pass, then fastavro for the rest) and the single pass writes it
    (``run/batch.py``, ``_write_decoded``): the same table and error records as Spark's writer."""
    from kafka_iceberg.write import certified, writer

    written = returns(monkeypatch, writer, "write_where_parsed", certified.write_where_parsed)
    topic = unique("tagged")
    good = [avro_value(stack.registry_url, topic, V1, {"id": i, "name": f"n{i}"}) for i in range(4)]
    cut = good[0][:-2]  # cut short: does not decode
    messages = [(None, good[0]), (None, good[1]), (b"k", cut), (None, good[2]), (None, b"\x00\x00"), (None, good[3])]
    produce(stack.kafka_bootstrap, topic, messages, partition=0, headers=[("trace", b"t-1"), ("team", b"data")])
    outs = {}
    for engine in ("spark", "arrow"):
        ns, errors = unique("avro_headers"), unique("tagged_errors")
        ran = run_pipeline(
            tmp_path / engine,
            f"""
pipeline: avro_headers
catalog: lake
tables:
  - name: tagged
    namespace: {ns}
    source: {{topics: [{topic}], format: avro, include_headers: true, schema_registry: {{url: "${{local:schema_registry.url}}"}}}}
    write: {{engine: {engine}}}
    partition_window: none
    errors: {{error_topic: {errors}}}
""",
        )
        assert_verified(tmp_path / engine / "pipelines" / "p.yml")
        scanned = lake.pyiceberg().load_table(f"{ns}.tagged").scan().to_arrow().to_pylist()
        outs[engine] = {
            "rows": sorted(
                ({k: v for k, v in r.items() if k != "timestamp"} for r in scanned), key=lambda r: r["offset"]
            ),
            "published": sorted(
                (int(dict(m.headers)[H_OFFSET]), dict(m.headers)[H_REASON].decode(), m.key, m.value)
                for m in consume_all(stack.kafka_bootstrap, errors)
            ),
            "reports": [(r.records_in, r.records_written, r.records_failed) for r in ran.reports],
        }
    assert written == []  # neither run's tasks decoded: include_headers keeps Spark's side
    assert outs["arrow"] == outs["spark"]
    rows = outs["arrow"]["rows"]
    assert [(r["offset"], r["id"], r["name"]) for r in rows] == [(0, 0, "n0"), (1, 1, "n1"), (3, 2, "n2"), (5, 3, "n3")]
    assert all(dict(r["headers"]) == {"trace": b"t-1", "team": b"data"} for r in rows)
    assert [(offset, key, value) for offset, _, key, value in outs["arrow"]["published"]] == [
        (2, b"k", cut),
        (4, None, b"\x00\x00"),
    ]


def test_an_older_version_first_seen_after_the_first_batch_adds_its_columns_on_either_writer(
    tmp_path, lake, stack, monkeypatch
):
    """The subject's latest version dropped a field an older one has; records of the older version
    arrive from the second batch on. Spark's side takes the table's columns from the latest version
    and the writers of the batch, so the field becomes a column when they arrive: the Arrow writer's
    tasks do not know that version's id, leave its records to Spark's side, and the table must be
    evolved for them before they are written (no value of theirs is lost)."""
    from kafka_iceberg.decode import schemaful
    from kafka_iceberg.decode.codec import Codec
    from kafka_iceberg.run import batch
    from kafka_iceberg.write import certified, writer

    written = returns(monkeypatch, writer, "write_where_parsed", certified.write_where_parsed)
    asked: list[Any] = []  # the schema ids each codec of the Arrow writer's run was built with

    def build_codec(*args: Any, **kwargs: Any) -> Codec:
        asked.append(kwargs.get("ids"))
        return schemaful.build_codec(*args, **kwargs)

    monkeypatch.setattr(batch, "build_codec", build_codec)
    old = {**V1, "fields": [*V1["fields"], {"name": "legacy", "type": ["null", "string"], "default": None}]}
    tables = {}
    for engine in ("spark", "arrow"):
        ns, topic = unique("avro_old"), unique("orders")
        older = [
            avro_value(stack.registry_url, topic, old, {"id": i, "name": f"n{i}", "legacy": f"l{i}"}) for i in (3, 4)
        ]
        latest = [avro_value(stack.registry_url, topic, V1, {"id": i, "name": f"n{i}"}) for i in range(3)]
        produce(stack.kafka_bootstrap, topic, [(None, v) for v in latest + older], partition=0)
        run_pipeline(
            tmp_path / engine,
            f"""
pipeline: avro_old
catalog: lake
tables:
  - name: orders
    namespace: {ns}
    source: {{topics: [{topic}], format: avro, max_records_per_batch: 3, schema_registry: {{url: "${{local:schema_registry.url}}"}}}}
    write: {{engine: {engine}}}
    partition_window: none
""",
        )
        table = lake.pyiceberg().load_table(f"{ns}.orders")
        tables[engine] = (
            [f.name for f in table.schema().fields],
            [(r["id"], r["name"], r["legacy"]) for r in rows(lake, f"{ns}.orders")],
        )
    assert tables["spark"][1] == [(0, "n0", None), (1, "n1", None), (2, "n2", None), (3, "n3", "l3"), (4, "n4", "l4")]
    assert tables["arrow"] == tables["spark"]
    assert [bool(w.unseen) for w in written] == [False, True]  # the Arrow run: the older id, in its 2nd batch
    # No Spark job read a batch's schema ids: the first codec started from the latest version's id
    assert len(asked) == 3 and None not in asked
