"""Publishing bad records to an error topic, exactly once per source record.

Records go out unchanged (key, value, original headers) with headers naming the reason, the
stage and the source coordinates (``kafka_iceberg.errors.*``, after Kafka Connect's
``__connect.errors.*`` convention). A batch that published and then crashed before its table
commit is published again on restart; the records it already published are found by scanning
the error topic from the end offsets recorded with the last commit, and are not sent twice.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kafka_iceberg.errors import KafkaIcebergError

log = logging.getLogger(__name__)

HEADER_PREFIX = "kafka_iceberg.errors."
H_TOPIC, H_PARTITION, H_OFFSET = (HEADER_PREFIX + k for k in ("topic", "partition", "offset"))
H_REASON, H_STAGE, H_PIPELINE, H_TABLE = (HEADER_PREFIX + k for k in ("reason", "stage", "pipeline", "table"))
Coordinate = tuple[str, int, int]
# librdkafka refuses messages over 1,000,000 bytes by default, below Kafka's own 1 MiB topic limit,
# so a record the source topic took could not be republished. The broker enforces the error topic's
# max.message.bytes instead; the environment's producer settings still win.
PRODUCER_DEFAULTS = {"message.max.bytes": str(64 * 1024 * 1024)}


class ErrorTopicError(KafkaIcebergError):
    """Records could not be delivered to the error topic."""


@dataclass
class ErrorTopicPublisher:
    """Sends error rows to ``topic`` with a confluent-kafka producer.

    Args:
        topic: the error topic.
        config: resolved librdkafka settings (bootstrap, security, producer options).
        pipeline: pipeline id, stamped on every record.
        table: ``namespace.table``, stamped on every record.
    """

    topic: str
    producer_config: Mapping[str, str]
    consumer_config: Mapping[str, str]
    pipeline: str
    table: str
    _already: set[Coordinate] | None = field(default=None, repr=False)

    def recover(self, since: Mapping[int, int]) -> int:
        """Learn which source records were published after the last commit; return how many.

        Args:
            since: error topic end offsets recorded with the last commit (``{}``: from the start).
        """
        from confluent_kafka import Consumer, TopicPartition

        consumer = Consumer(
            {
                **self.consumer_config,
                "group.id": f"kafka-iceberg-recover-{uuid.uuid4().hex}",
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
            }
        )
        found: set[Coordinate] = set()
        try:
            meta = consumer.list_topics(self.topic, timeout=10)
            topic_meta = meta.topics.get(self.topic)
            if topic_meta is None or topic_meta.error is not None:
                self._already = found
                return 0
            assignments, ends = [], {}
            for p in topic_meta.partitions:
                low, high = consumer.get_watermark_offsets(TopicPartition(self.topic, p), timeout=10)
                start = max(int(since.get(p, low)), low)
                if start < high:
                    assignments.append(TopicPartition(self.topic, p, start))
                    ends[p] = high
            consumer.assign(assignments)
            remaining = set(ends)
            while remaining:
                msg = consumer.poll(5.0)
                if msg is None:
                    break  # nothing more arrives: the watermark was optimistic
                if msg.error():
                    continue
                headers: dict[str, Any] = dict(msg.headers() or [])
                if headers.get(H_PIPELINE) == self.pipeline.encode() and headers.get(H_TABLE) == self.table.encode():
                    found.add((headers[H_TOPIC].decode(), int(headers[H_PARTITION]), int(headers[H_OFFSET])))
                if int(msg.offset() or 0) + 1 >= ends[msg.partition()]:
                    remaining.discard(msg.partition())
        finally:
            consumer.close()
        self._already = found
        if found:
            log.info("error topic %s already holds %d record(s) of an uncommitted batch", self.topic, len(found))
        return len(found)

    def publish(self, rows: Iterable[Any]) -> tuple[int, dict[int, int] | None]:
        """Send error rows not published before.

        Returns:
            Records sent, and the error topic's end offsets after them (None when nothing was sent).
        """
        from confluent_kafka import KafkaError, KafkaException, Producer

        producer = Producer({**PRODUCER_DEFAULTS, **self.producer_config})
        failures: list[KafkaError] = []

        def on_delivery(err: KafkaError | None, _msg: object) -> None:
            if err is not None:
                failures.append(err)

        sent = 0
        already = self._already or set()
        for row in rows:
            coordinate = (row["topic"], int(row["partition"]), int(row["offset"]))
            if coordinate in already:
                continue
            headers: list[tuple[str, str | bytes | None]] = [
                (str(h["key"]), None if h["value"] is None else bytes(h["value"])) for h in row["headers"] or []
            ]
            headers += [
                (H_TOPIC, row["topic"].encode()),
                (H_PARTITION, str(row["partition"]).encode()),
                (H_OFFSET, str(row["offset"]).encode()),
                (H_REASON, (row["_error"] or "").encode()),
                (H_STAGE, (row["_error_stage"] or "").encode()),
                (H_PIPELINE, self.pipeline.encode()),
                (H_TABLE, self.table.encode()),
            ]
            value = bytes(row["value"]) if row["value"] is not None else None
            key = bytes(row["key"]) if row["key"] is not None else None
            while True:
                try:
                    producer.produce(self.topic, key=key, value=value, headers=headers, on_delivery=on_delivery)
                    break
                except BufferError:  # the local queue is full: let deliveries drain, then retry
                    producer.poll(1.0)
                except KafkaException as exc:  # refused before sending, e.g. larger than message.max.bytes
                    where = f"topic {coordinate[0]} partition {coordinate[1]} offset {coordinate[2]}"
                    reason = exc.args[0].str()
                    raise ErrorTopicError(f"record {where} cannot be sent to {self.topic}: {reason}") from None
            producer.poll(0)
            sent += 1
        remaining = producer.flush(60)
        if failures or remaining:
            raise ErrorTopicError(
                f"{len(failures) + remaining} record(s) not delivered to {self.topic}: {failures[:3]}"
            )
        return sent, (self.end_offsets() if sent else None)

    def end_offsets(self) -> dict[int, int]:
        """High watermark of every partition of the error topic."""
        from confluent_kafka import Consumer, TopicPartition

        consumer = Consumer({**self.consumer_config, "group.id": f"kafka-iceberg-offsets-{uuid.uuid4().hex}"})
        try:
            meta = consumer.list_topics(self.topic, timeout=10).topics.get(self.topic)
            if meta is None or meta.error is not None:
                return {}
            return {
                int(p): int(consumer.get_watermark_offsets(TopicPartition(self.topic, p), timeout=10)[1])
                for p in meta.partitions
            }
        finally:
            consumer.close()
