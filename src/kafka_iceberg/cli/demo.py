"""``kafka-iceberg demo`` (``make demo``): the shop pipeline on the embedded local stack.

Starts a fresh stack owned by this process, sends sample messages of every format to Kafka (with a
few bad ones, a Debezium change stream, and Avro of two schema versions through the registry),
runs ``pipelines/shop.yml`` exactly as ``kafka-iceberg run`` does, then reads the results back
through paths independent of Spark — pyiceberg for the tables, a Kafka consumer for the error
topics — prints them, runs ``verify`` on
the pipeline, and stops the stack.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
import logging
import os
import shutil
import threading
import time
from collections.abc import Callable, Iterable
from decimal import Decimal
from pathlib import Path
from typing import Any

from kafka_iceberg.checks.error_topic import read_records
from kafka_iceberg.local.readback import pyiceberg_catalog
from kafka_iceberg.local.stack import LocalStack
from kafka_iceberg.observe.verify import render_text, verify_pipeline
from kafka_iceberg.paths import RUN_DIR_ENV, run_dir

Say = Callable[[str], None]
READERS = {"spark": "Spark's Kafka source", "direct": "the direct Kafka reader", "replay": "replay files"}

ORDERS = [
    ("1", {"id": 1, "name": "espresso", "extendinfo": {"size": "S", "milk": None}}),
    ("2", {"id": 2, "name": "latte", "extendinfo": {"size": "L", "milk": "oat"}}),
    ("3", {"id": 3, "name": "mocha", "extendinfo": {"size": "M"}}),
    ("1", {"id": 1, "name": "double espresso", "extendinfo": {"size": "M", "milk": None}}),  # upsert: id 1 again
    ("4", {"id": 4, "name": "cortado", "extendinfos": "typo"}),  # unknown key under strict → error topic
    ("0", {"id": 0, "name": "test order", "extendinfo": {}}),  # fails `id > 0` → quarantine table
]
CLICKS = [
    ("u1", {"page": "/menu", "ms": 120}),
    ("u2", {"page": "/checkout", "ms": 340}),
    ("u3", "{not json"),  # skip_error: dropped and counted
]
INVENTORY = [("s1", "SKU-1,berlin,12,3.50"), ("s2", "SKU-2,berlin,3,4.20"), ("s3", "SKU-1,paris,7,3.60")]
AUDIT = [("alice", "login ok"), ("bob", "password changed")]
BLOBS = [(None, bytes([0, 1, 2, 253, 254, 255]))]

# Payments in Avro through the schema registry: two versions of the producer's schema, the second
# adding an optional field (the table gains a column), and one message that is not Avro at all.
_MONEY = {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}
PAYMENT_V1 = {
    "type": "record",
    "name": "Payment",
    "namespace": "shop",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "order_id", "type": "long"},
        {"name": "amount", "type": _MONEY},
        {"name": "method", "type": {"type": "enum", "name": "Method", "symbols": ["CARD", "CASH"]}},
        {"name": "paid_at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    ],
}
PAYMENT_V2 = {
    **PAYMENT_V1,
    "fields": [*PAYMENT_V1["fields"], {"name": "coupon", "type": ["null", "string"], "default": None}],
}
_PAID = dt.datetime(2024, 5, 1, 9, 30, tzinfo=dt.timezone.utc)
PAYMENTS: list[tuple[dict[str, Any], dict[str, Any] | bytes]] = [
    (PAYMENT_V1, {"id": 1, "order_id": 1, "amount": Decimal("3.20"), "method": "CARD", "paid_at": _PAID}),
    (PAYMENT_V1, {"id": 2, "order_id": 2, "amount": Decimal("4.10"), "method": "CASH", "paid_at": _PAID}),
    (
        PAYMENT_V2,
        {"id": 3, "order_id": 3, "amount": Decimal("3.90"), "method": "CARD", "paid_at": _PAID, "coupon": "SPRING"},
    ),
    (PAYMENT_V2, b'{"id": 4}'),  # not the Confluent wire format: to payments_errors with its reason
]


def avro_value(registry_url: str, topic: str, schema: dict[str, Any], record: dict[str, Any]) -> bytes:
    """``record`` as Avro producers send it: confluent-kafka's AvroSerializer, registering ``schema``."""
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    serializer = AvroSerializer(SchemaRegistryClient({"url": registry_url}), json.dumps(schema))
    value = serializer(record, SerializationContext(topic, MessageField.VALUE))
    assert value is not None
    return bytes(value)


def avro_payments(registry_url: str, topic: str = "payments") -> list[tuple[str, bytes]]:
    """``PAYMENTS`` serialized as producers do, each version registered by its first record."""
    return [
        (str(record["id"]), avro_value(registry_url, topic, schema, record))
        if isinstance(record, dict)
        else ("4", record)
        for schema, record in PAYMENTS
    ]


# A products table's change stream, as Debezium's JsonConverter (schemas.enable) writes it.
_PRODUCT = {
    "type": "struct",
    "optional": True,
    "fields": [
        {"field": "id", "type": "int64"},
        {"field": "name", "type": "string"},
        {"field": "price", "type": "double", "optional": True},
    ],
}
_ENVELOPE = {
    "type": "struct",
    "fields": [
        {**_PRODUCT, "field": "before"},
        {**_PRODUCT, "field": "after"},
        {"field": "source", "type": "struct", "fields": [{"field": "lsn", "type": "int64", "optional": True}]},
        {"field": "op", "type": "string"},
        {"field": "ts_ms", "type": "int64"},
    ],
}


def debezium_event(op: str, lsn: int, before: dict[str, Any] | None, after: dict[str, Any] | None) -> str:
    """One Debezium change event of the products table (``op`` c, r, u or d at position ``lsn``)."""
    payload = {"before": before, "after": after, "source": {"lsn": lsn}, "op": op, "ts_ms": 1_700_000_000_000 + lsn}
    return json.dumps({"schema": _ENVELOPE, "payload": payload})


_MUG, _CUP = {"id": 1, "name": "mug", "price": 9.5}, {"id": 2, "name": "cup", "price": 4.0}
PRODUCTS_CDC = [
    ("1", debezium_event("r", 100, None, _MUG)),  # snapshot read
    ("2", debezium_event("c", 101, None, _CUP)),
    ("1", debezium_event("u", 103, _MUG, {**_MUG, "price": 8.5})),  # the newest change of product 1 ...
    ("1", debezium_event("u", 102, _MUG, {**_MUG, "price": 12.0})),  # ... and an older one arriving late
    ("2", debezium_event("d", 104, _CUP, None)),  # deleted at the source
    ("2", None),  # Debezium's tombstone after a delete: ignored
]


def _produce(bootstrap: str, topic: str, records: Iterable[tuple[Any, Any]]) -> int:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]  # re-exported

    # Three partitions, so the output shows keys spread over partitions (and upserts across them).
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=1)]).values():
        future.result(timeout=30)
    producer = Producer({"bootstrap.servers": bootstrap})
    count = 0
    for key, value in records:
        payload = value if value is None or isinstance(value, bytes | str) else json.dumps(value)
        producer.produce(topic, key=key, value=payload)
        count += 1
    producer.flush(30)
    return count


def _show(say: Say, title: str, rows: list[dict[str, Any]], columns: list[str]) -> None:
    from kafka_iceberg.observe.text import table

    say(f"\n{title} ({len(rows)} rows)")
    say(table([[_cell(r.get(c)) for c in columns] for r in rows], columns))


def _cell(value: Any) -> str:
    text = value.hex(" ") if isinstance(value, bytes) else str(value)
    return text if len(text) <= 48 else text[:45] + "..."


def run_demo(say: Say, pipeline: Path = Path("pipelines/shop.yml"), stack_dir: Path | None = None) -> dict[str, int]:
    """Run the demo; returns row counts per table (as read back through pyiceberg)."""
    from kafka_iceberg.observe.progress import Progress
    from kafka_iceberg.run import observers_for, open_session, prepare, run

    directory = stack_dir or run_dir() / "demo"
    shutil.rmtree(directory, ignore_errors=True)  # a fresh lakehouse every time: the demo is repeatable
    os.environ[RUN_DIR_ENV] = str(directory)  # ${local:...} in environments/local.yml resolve to this stack
    stack = LocalStack(directory)
    started = time.monotonic()
    state = stack.up(owned=True)
    say(f"local stack up in {time.monotonic() - started:.1f}s: Kafka {state.kafka_bootstrap}, "
        f"S3 {state.s3_endpoint}, Iceberg REST catalog {state.catalog_uri}, "
        f"schema registry {state.registry_url}")  # fmt: skip
    try:
        bootstrap = state.kafka_bootstrap
        sent = {
            "orders": _produce(bootstrap, "orders", ORDERS),
            "clicks": _produce(bootstrap, "clicks", CLICKS),
            "inventory": _produce(bootstrap, "inventory", INVENTORY),
            "audit_auth": _produce(bootstrap, "audit_auth", AUDIT),
            "blobs": _produce(bootstrap, "blobs", BLOBS),
            "products_cdc": _produce(bootstrap, "products_cdc", PRODUCTS_CDC),
            "payments": _produce(bootstrap, "payments", avro_payments(state.registry_url)),
        }
        say(f"sent to Kafka: {', '.join(f'{t} {n}' for t, n in sent.items())}")

        logging.getLogger("kafka_iceberg.write").setLevel(logging.WARNING)  # the DDL is in the plan, not the story
        prepared = prepare(pipeline, env_name="local")
        reader = READERS[prepared.env.kafka.reader]
        say(f"running {pipeline} ({len(prepared.jobs)} tables) with {reader}...")
        spark = open_session(prepared)
        observers = observers_for(prepared, spark, prepared.jobs[0].pipeline.pipeline, Progress(enabled=False))
        reports = run(prepared, spark, stop=threading.Event(), observers=observers)
        for r in reports:
            say(f"  {r.table} batch {r.batch_id}: {r.records_in} read, {r.records_written} written, "
                f"{r.records_failed} bad, snapshot {r.snapshot_id}")  # fmt: skip

        catalog = pyiceberg_catalog(stack.status())
        counts: dict[str, int] = {}
        views = [
            ("sales.orders", ["id", "name", "extendinfo", "partition", "offset"], "id"),
            ("sales.orders_quarantine", ["partition", "offset", "_error_stage", "_error"], "_error_stage"),
            ("web.clicks", ["partition", "offset", "value", "pt"], "value"),
            ("stock.inventory", ["sku", "warehouse", "quantity", "price"], "sku"),
            ("stock.products", ["id", "name", "price", "_op", "_source_position"], "id"),
            ("sales.payments", ["id", "order_id", "amount", "method", "paid_at", "coupon"], "id"),
            ("ops.audit_log", ["topic", "key", "value", "pt"], "key"),
            ("ops.blobs", ["offset", "key", "value"], "offset"),
        ]
        for identifier, columns, order in views:
            table = catalog.load_table(identifier)
            rows: list[dict[str, Any]] = table.scan().to_arrow().to_pylist()
            rows.sort(key=functools.partial(_sort_key, order))
            counts[identifier] = len(rows)
            _show(say, f"{identifier}  (pyiceberg, {table.metadata.location})", rows, columns)
        # The error topics are written in transactions: read to the end by position, read_committed.
        for topic in ("orders_errors", "payments_errors"):
            errors = list(read_records({"bootstrap.servers": bootstrap}, topic, timeout=60))
            say(f"\n{topic} ({len(errors)} records, read with a Kafka consumer)")
            for record in errors:
                reason = dict(record.headers() or []).get("kafka_iceberg.errors.reason") or b""
                say(f"  key={record.key()!r} value={record.value()!r} reason={reason.decode()}")
            counts[topic] = len(errors)
        results = verify_pipeline(prepared)
        say(f"\nkafka-iceberg verify: every committed offset in exactly one place\n{render_text(results)}")
        counts["verify_failed"] = sum(1 for r in results if not r.ok)
        return counts
    finally:
        stack.down()
        say("\nlocal stack stopped")


def _sort_key(column: str, row: dict[str, Any]) -> str:
    return str(row[column])
