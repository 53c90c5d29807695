"""Kafka helpers for tests: an exact-watermark producer and an independent consumer."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable, Mapping, Sequence

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kafka_iceberg.local.readback import TopicRecord


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
    under test.

    Error topics are written in transactions: their last offset is a transaction marker, which no
    consumer receives, so the end is reached when the consumer's *position* reaches the high
    watermark (``read_topic`` waits for a record at the last offset, until its timeout).
    """
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"consume-all-{uuid.uuid4().hex}", "enable.auto.commit": False,
         "isolation.level": "read_committed"}
    )  # fmt: skip
    try:
        deadline = time.monotonic() + timeout
        meta = consumer.list_topics(topic, timeout=10).topics.get(topic)
        # A topic created a moment ago may not have its leader yet (a loaded machine): ask again.
        while meta is not None and meta.error is not None and time.monotonic() < deadline:
            time.sleep(0.2)
            meta = consumer.list_topics(topic, timeout=10).topics.get(topic)
        if meta is None or meta.error is not None:
            return []
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in meta.partitions}
        consumer.assign([TopicPartition(topic, p, 0) for p in ends])
        remaining = {p for p, end in ends.items() if end > 0}
        out: list[TopicRecord] = []
        while remaining and time.monotonic() < deadline:
            for msg in consumer.consume(1000, timeout=0.5):
                if msg.error() is None:
                    headers = tuple((str(k), v if v is None else bytes(v)) for k, v in (msg.headers() or ()))
                    out.append(TopicRecord(str(msg.topic()), int(msg.partition() or 0), int(msg.offset() or 0),
                                           msg.key(), msg.value(), headers, int(msg.timestamp()[1])))  # fmt: skip
            for tp in consumer.position([TopicPartition(topic, p) for p in remaining]):
                if tp.offset >= ends[tp.partition]:
                    remaining.discard(tp.partition)
        return sorted(out, key=lambda r: (r.partition, r.offset))
    finally:
        consumer.close()


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
