"""Kafka helpers for tests: an exact-watermark producer and an independent consumer."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

# Tansu miscounts the high watermark under batched produce (ENVIRONMENT.md): one record per request.
EXACT_WATERMARK_PRODUCER = {"linger.ms": 0, "batch.num.messages": 1, "max.in.flight": 1}


@dataclass(frozen=True)
class Message:
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    timestamp_ms: int


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
) -> int:
    """Send (key, value) pairs one per request; returns how many were sent."""
    producer = Producer({"bootstrap.servers": bootstrap, **EXACT_WATERMARK_PRODUCER})
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


def consume_all(bootstrap: str, topic: str, *, timeout: float = 15.0) -> list[Message]:
    """Read every record of ``topic`` from the beginning up to the high watermarks, independently
    of any consumer group of the code under test."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"test-reader-{uuid.uuid4().hex}", "enable.auto.commit": False}
    )
    try:
        meta = consumer.list_topics(topic, timeout=10)
        if topic not in meta.topics or meta.topics[topic].error is not None:
            return []
        partitions = sorted(meta.topics[topic].partitions)
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in partitions}
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
        out: list[Message] = []
        remaining = {p for p, end in ends.items() if end > 0}
        deadline = time.monotonic() + timeout
        while remaining and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None or msg.error():
                continue
            out.append(
                Message(
                    msg.topic(),
                    msg.partition(),
                    msg.offset(),
                    msg.key(),
                    msg.value(),
                    tuple(msg.headers() or ()),
                    msg.timestamp()[1],
                )
            )
            if msg.offset() + 1 >= ends[msg.partition()]:
                remaining.discard(msg.partition())
        return sorted(out, key=lambda m: (m.partition, m.offset))
    finally:
        consumer.close()
