"""Publishing bad records to an error topic, exactly once per source record.

Records go out unchanged (key, value, original headers) with headers naming the reason, the
stage and the source coordinates (``kafka_iceberg.errors.*``, after Kafka Connect's
``__connect.errors.*`` convention).

Each batch's records are sent in one Kafka transaction of a transactional producer whose id is
fixed per pipeline, table and error topic. A restart's :meth:`ErrorTopicPublisher.recover` first
calls ``init_transactions``, which fences any earlier producer of that id (a crashed run whose
requests may still be in flight) and aborts its open transaction; it then reads the error topic
with ``isolation.level=read_committed`` from the offsets recorded with the table's last commit
up to the high watermark it read *after* the fencing, until the consumer's position reaches it.
The offsets a commit records are the topic's end, held back to the first record a recovery found
whose source record is not committed yet (:meth:`ErrorTopicPublisher.resume_offsets`).
Nothing there depends on a poll timing out: a scan that cannot reach the end fails the run. A batch
that published and then crashed before its table commit is published again on restart without
the records already committed to the topic; an aborted transaction's records are invisible to every
``read_committed`` reader (librdkafka's default) and are sent again.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from kafka_iceberg import faults
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
# How long a restart may take to read the error topic up to its end (other writers' open
# transactions hold read_committed readers back at most their transaction timeout, 60 s by default).
SCAN_TIMEOUT_S_DEFAULT = 180.0
METADATA_TIMEOUT_S = 60.0


class ErrorTopicError(KafkaIcebergError):
    """Records could not be delivered to the error topic."""


@dataclass
class ErrorTopicPublisher:
    """Sends error rows to ``topic`` with a transactional confluent-kafka producer.

    Args:
        topic: the error topic.
        producer_config: resolved librdkafka settings (bootstrap, security, producer options); a
            ``transactional.id`` there replaces the default ``kafka-iceberg.<pipeline>.<table>.<topic>``.
        consumer_config: resolved librdkafka settings for reading the topic back.
        pipeline: pipeline id, stamped on every record.
        table: ``namespace.table``, stamped on every record.
        scan_timeout_s: how long :meth:`recover` may take to read up to the end before failing.
    """

    topic: str
    producer_config: Mapping[str, str] = field(repr=False)  # resolved: SASL passwords included
    consumer_config: Mapping[str, str] = field(repr=False)
    pipeline: str
    table: str
    scan_timeout_s: float = SCAN_TIMEOUT_S_DEFAULT
    # The source records recover() found published, and where each sits in the error topic.
    _held: dict[Coordinate, tuple[int, int]] = field(default_factory=dict, repr=False)
    _producer: Any = field(default=None, repr=False)

    @property
    def transactional_id(self) -> str:
        """The producer's transactional id: one per pipeline, table and error topic."""
        return self.producer_config.get("transactional.id", f"kafka-iceberg.{self.pipeline}.{self.table}.{self.topic}")

    def _open(self) -> Any:
        """The transactional producer, fencing earlier producers of the same id on first use."""
        if self._producer is None:
            from confluent_kafka import KafkaException, Producer

            producer = Producer(
                {**PRODUCER_DEFAULTS, **self.producer_config, "transactional.id": self.transactional_id}
            )
            try:
                producer.init_transactions(self.scan_timeout_s)
            except KafkaException as exc:
                reason = exc.args[0].str()
                raise ErrorTopicError(f"cannot start transactions on {self.topic}: {reason}") from None
            self._producer = producer
        return self._producer

    def recover(self, since: Mapping[int, int]) -> int:
        """Learn which source records were published after the last commit; return how many.

        Fences the previous producer of this table first, so that nothing of a crashed run can
        still land after the scan, then reads every committed record up to the high watermark.

        Args:
            since: error topic end offsets recorded with the last commit (``{}``: from the start).

        Raises:
            ErrorTopicError: the topic could not be read up to its end within ``scan_timeout_s``.
        """
        self._open()
        held: dict[Coordinate, tuple[int, int]] = {}
        for msg in read_records(self.consumer_config, self.topic, since, timeout=self.scan_timeout_s):
            headers = {str(k): v for k, v in (msg.headers() or [])}
            if headers.get(H_PIPELINE) == self.pipeline.encode() and headers.get(H_TABLE) == self.table.encode():
                source = (headers[H_TOPIC].decode(), int(headers[H_PARTITION]), int(headers[H_OFFSET]))
                held[source] = (msg.partition(), msg.offset())
        self._held = held
        if held:
            log.info("error topic %s already holds %d record(s) of an uncommitted batch", self.topic, len(held))
        return len(held)

    def resume_offsets(self, consumed: Mapping[str, Mapping[int, int]], end: Mapping[int, int]) -> dict[int, int]:
        """Where the next :meth:`recover` must start, for a commit that consumed up to ``consumed``.

        ``end`` (the topic's end after this run's last publish), held back to any record the recovery
        found whose source record ``consumed`` does not cover yet. A restarted direct reader cuts its
        batches afresh: a crashed batch's published records may belong to a later batch than the one
        being committed, and a start past them would forget them and publish them again.

        Args:
            consumed: the source offsets the commit records (``{topic: {partition: next offset}}``).
            end: the error topic's end offsets recorded so far.
        """
        out = dict(end)
        for (topic, partition, offset), (held_partition, held_offset) in self._held.items():
            if offset >= consumed.get(topic, {}).get(partition, 0):
                out[held_partition] = min(out.get(held_partition, held_offset), held_offset)
        return out

    def publish(self, rows: Iterable[Any]) -> tuple[int, dict[int, int] | None]:
        """Send error rows not published before, in one transaction.

        Returns:
            Records sent, and the error topic's end offsets after them (None when nothing was sent).
        """
        from confluent_kafka import KafkaError, KafkaException

        producer = self._open()
        failures: list[KafkaError] = []

        def on_delivery(err: KafkaError | None, _msg: object) -> None:
            if err is not None:
                failures.append(err)

        sent = 0
        already = self._held
        producer.begin_transaction()
        try:
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
                if sent == 1:
                    faults.reached("publish")
            remaining = producer.flush(60)
            if failures or remaining:
                raise ErrorTopicError(
                    f"{len(failures) + remaining} record(s) not delivered to {self.topic}: {failures[:3]}"
                )
            producer.commit_transaction(60)
        except BaseException:
            self._abort()
            raise
        faults.reached("published")
        return sent, (self.end_offsets() if sent else None)

    def _abort(self) -> None:
        try:
            self._producer.abort_transaction(30)
        except Exception as exc:  # the producer is unusable: the next batch starts a fresh one
            log.warning("error topic %s: transaction not aborted (%s); fencing it on the next batch", self.topic, exc)
            self._producer = None

    def close(self) -> None:
        """Shut the producer down at the end of a run, so it stops reconnecting to a broker that is gone.

        Between batches no transaction is open and nothing is in flight: closing loses nothing, and
        a later :meth:`publish` (or :meth:`recover`) opens and fences a new producer.
        """
        producer, self._producer = self._producer, None
        if producer is not None:
            producer.close()

    def end_offsets(self) -> dict[int, int]:
        """High watermark of every partition of the error topic."""
        return end_offsets(self.consumer_config, self.topic)


def end_offsets(config: Mapping[str, str], topic: str) -> dict[int, int]:
    """High watermark of every partition of ``topic`` (``{}`` when it does not exist).

    Read uncommitted: a ``read_committed`` client is told the last stable offset instead, which
    another writer's open transaction holds back before records committed after it.
    """
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    consumer = Consumer(
        {**config, "group.id": f"kafka-iceberg-offsets-{uuid.uuid4().hex}", "isolation.level": "read_uncommitted"}
    )
    try:
        # Only a topic the broker does not know is empty. Any other metadata error (a leader being
        # elected, a broker under load) is retried, then fails: read as "no records", it would make
        # a restart publish again what an earlier run published.
        deadline = time.monotonic() + METADATA_TIMEOUT_S
        while True:
            meta = consumer.list_topics(topic, timeout=10).topics.get(topic)
            if meta is None or (meta.error is not None and meta.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART):
                return {}
            if meta.error is None and meta.partitions:
                break
            if time.monotonic() > deadline:
                raise ErrorTopicError(f"no metadata for {topic}: {meta.error}")
            time.sleep(0.5)
        return {
            int(p): int(consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1])
            for p in meta.partitions
        }
    finally:
        consumer.close()


def read_committed(
    config: Mapping[str, str], topic: str, since: Mapping[int, int] | None = None, *, timeout: float
) -> Iterator[dict[str, Any]]:
    """Headers of every committed record of ``topic`` from ``since`` up to the high watermarks.

    The high watermarks are read first (:func:`end_offsets`); the scan ends when the consumer's
    position has reached each one (``read_committed`` positions step over transaction markers and aborted records),
    never because a poll came back empty.

    Raises:
        ErrorTopicError: the end was not reached within ``timeout`` seconds.
    """
    for msg in read_records(config, topic, since, timeout=timeout):
        yield {str(k): v for k, v in (msg.headers() or [])}


def read_records(
    config: Mapping[str, str], topic: str, since: Mapping[int, int] | None = None, *, timeout: float
) -> Iterator[Any]:
    """Every committed record (confluent-kafka ``Message``) of ``topic`` from ``since`` to the end.

    See :func:`read_committed`.
    """
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            **config,
            "group.id": f"kafka-iceberg-recover-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
        }
    )
    try:
        highs = end_offsets(config, topic)
        ends = {}
        for p, high in highs.items():
            low, _ = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            start = max(int((since or {}).get(p, low)), low)
            if start < high:
                ends[p] = (start, high)
        consumer.assign([TopicPartition(topic, p, start) for p, (start, _) in ends.items()])
        remaining = dict(ends)
        deadline = time.monotonic() + timeout
        while remaining:
            for msg in consumer.consume(1000, timeout=0.5):
                if msg.error() is None:
                    yield msg
            positions = consumer.position([TopicPartition(topic, p) for p in remaining])
            for tp in positions:
                if tp.offset >= remaining[tp.partition][1]:
                    del remaining[tp.partition]
            if remaining and time.monotonic() > deadline:
                where = ", ".join(f"partition {p} at {tp.offset} of {remaining[p][1]}" for p, tp in
                                  ((tp.partition, tp) for tp in positions) if p in remaining)  # fmt: skip
                raise ErrorTopicError(f"could not read {topic} to its end within {timeout:.0f}s ({where})")
    finally:
        consumer.close()
