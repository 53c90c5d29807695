"""Kafka helpers for tests: an exact-watermark producer and an independent consumer."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable, Mapping, Sequence

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kafka_iceberg.local.readback import TopicRecord, read_topic


def create_topic(bootstrap: str, topic: str, partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)]).values():
        future.result(timeout=10)


def produce(
    bootstrap: str,
    topic: str,
    records: Iterable[tuple[bytes | str | None, bytes | str | None]],
    *,
    partition: int | None = None,
    headers: Sequence[tuple[str, bytes]] | None = None,
    config: Mapping[str, str | int] | None = None,
) -> int:
    """Send (key, value) pairs; returns how many were sent.

    ``config`` adds librdkafka settings (``message.max.bytes`` for messages of about 1 MB).
    """
    producer = Producer({"bootstrap.servers": bootstrap, **(config or {})})
    count = 0
    errors: list[KafkaError] = []

    def on_delivery(err: KafkaError | None, _msg: object) -> None:
        if err is not None:
            errors.append(err)

    for key, value in records:
        kwargs = {"partition": partition} if partition is not None else {}
        producer.produce(topic, key=key, value=value, headers=list(headers or []), on_delivery=on_delivery, **kwargs)
        producer.poll(0)
        count += 1
    producer.flush(30)
    assert not errors, errors
    return count


def consume_all(bootstrap: str, topic: str, *, timeout: float = 15.0) -> list[TopicRecord]:
    """Every committed record of ``topic`` up to the high watermarks, read independently of the code
    under test (the local stack's readback, which the deployed-jobs harness reads with too)."""
    return read_topic(bootstrap, topic, timeout=timeout)


def read_count(bootstrap: str, topic: str, count: int, *, timeout: float = 30.0) -> list[tuple[int, int, bytes]]:
    """The first ``count`` records of ``topic`` as (partition, offset, value), read without trusting
    high watermarks: a reader that must not assume what the code under test assumes."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"readcount-{uuid.uuid4().hex}"})
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
        out: list[tuple[int, int, bytes]] = []
        deadline = time.monotonic() + timeout
        while len(out) < count and time.monotonic() < deadline:
            for msg in consumer.consume(1000, timeout=0.5):
                if not msg.error():
                    out.append((msg.partition(), msg.offset(), msg.value()))
        return out
    finally:
        consumer.close()
