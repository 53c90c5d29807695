"""The direct reader: Kafka through confluent-kafka, for local and single-node runs.

Each micro-batch is at most ``max_records_per_batch`` records, assembled as an Arrow table of
the Kafka shape, written to a Parquet staging file and read by Spark (Arrow keeps binary values
and nested headers intact, which Spark 3.5's pandas path does not). Positions come from the
offsets recorded in the table's last Iceberg snapshot, so a restart resumes exactly where the
last commit ended — there is no separate checkpoint to lose. Consumer-group offsets are committed
after each table commit only so that lag tools see progress.
"""

from __future__ import annotations

import logging
import re
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kafka_iceberg.errors import DataLossError
from kafka_iceberg.spec.model import SourceSpec

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)

Offsets = dict[str, dict[int, int]]  # {topic: {partition: next offset}}, as in the commit marker
_OFFSET_BEGINNING, _OFFSET_END = -2, -1
_POLL_CHUNK = 10_000
_SLICE_S = 0.05  # one poll's wait
_QUIET_S = 0.5  # no record for this long: the batch is shipped even when not caught up


def arrow_schema() -> pa.Schema:
    """The Kafka shape as an Arrow schema (what Spark's Kafka source produces)."""
    import pyarrow as pa

    header = pa.struct([("key", pa.string()), ("value", pa.binary())])
    return pa.schema(
        [
            ("key", pa.binary()),
            ("value", pa.binary()),
            ("topic", pa.string()),
            ("partition", pa.int32()),
            ("offset", pa.int64()),
            ("timestamp", pa.timestamp("us", tz="UTC")),
            ("headers", pa.list_(header)),
        ]
    )


def to_arrow(messages: list[Any]) -> pa.Table:
    """confluent-kafka messages → an Arrow table of the Kafka shape."""
    import pyarrow as pa

    def headers(msg: Any) -> list[dict[str, Any]] | None:
        raw = msg.headers()
        return [{"key": k, "value": v} for k, v in raw] if raw else None

    columns = {
        "key": [m.key() for m in messages],
        "value": [m.value() for m in messages],
        "topic": [m.topic() for m in messages],
        "partition": [m.partition() for m in messages],
        "offset": [m.offset() for m in messages],
        # Kafka reports -1 when a record carries no timestamp.
        "timestamp": [ts * 1000 if (ts := m.timestamp()[1]) >= 0 else None for m in messages],
        "headers": [headers(m) for m in messages],
    }
    return pa.Table.from_pydict(columns, schema=arrow_schema())


@dataclass
class DirectBatch:
    """One micro-batch read from Kafka."""

    frame: DataFrame
    arrow: pa.Table
    records: int
    offsets: Offsets
    staging_file: Path


@dataclass
class DirectReader:
    """Reads one table's subscription in bounded micro-batches.

    Args:
        spark: the session the batches become DataFrames in.
        source: the table's source spec (topics or pattern, starting offsets, batch bound).
        config: resolved librdkafka consumer settings (bootstrap, security, consumer options).
        admin_config: resolved connection settings for the metadata queries (bootstrap, security).
        group_id: consumer group whose offsets are committed after each table commit.
        staging_dir: where batch files are written (deleted once the batch is done).
    """

    spark: SparkSession
    source: SourceSpec
    config: Mapping[str, str] = field(repr=False)  # resolved: SASL passwords included
    admin_config: Mapping[str, str] = field(repr=False)
    group_id: str
    staging_dir: Path
    fail_on_data_loss: bool = True  # ``kafka.fail_on_data_loss``: records gone from Kafka stop the run
    settings_file: str = ""  # the environment file that sets it, for the error's advice
    _consumer: Any = field(default=None, repr=False)
    _admin: Any = field(default=None, repr=False)
    _positions: dict[tuple[str, int], int] = field(default_factory=dict)
    # Ranges skipped as gone (``fail_on_data_loss: false``) since the last :meth:`take_lost`: ``orders[0] 4-7``.
    _lost: dict[str, int] = field(default_factory=dict)
    _targets: dict[tuple[str, int], int] | None = None

    # -- lifecycle ---------------------------------------------------------------------------------
    def open(self, resume: Mapping[str, Mapping[int, int]] | None, *, drain: bool = False) -> None:
        """Assign every partition of the subscription, positioned after the last commit.

        Args:
            resume: ``{topic: {partition: next offset}}`` from the table's last commit marker;
                partitions it does not name start at ``source.starting_offsets``.
            drain: fix the end of an ``available_now`` run at each partition's high watermark as
                it is assigned (asked once the consumer fetches, each query would wait behind the
                fetch: half a second a partition).
        """
        from confluent_kafka import Consumer
        from confluent_kafka.admin import AdminClient

        # Metadata goes through a connection of its own: on the consumer's, a metadata request waits
        # behind the fetch the broker holds up to fetch.wait.max.ms (0.4-0.5 s each, measured).
        self._admin = AdminClient(dict(self.admin_config))
        self._consumer = Consumer(
            {
                **self.config,
                "group.id": self.group_id,
                "enable.auto.commit": "false",
                "enable.auto.offset.store": "false",
                # Every partition is assigned at an explicit offset, so the broker refuses one only
                # when its records are gone: librdkafka reports it (_AUTO_OFFSET_RESET) instead of
                # silently reading on from elsewhere, and the reader decides (:meth:`_gone`).
                "auto.offset.reset": "error",
            }
        )
        self.staging_dir.mkdir(parents=True, exist_ok=True)
        self._positions, self._targets = {}, None  # a new consumer: every partition assigned afresh
        try:
            highs = self._assign(resume or {})
        except BaseException:  # records gone, the broker away: no consumer left behind retrying it
            self.close()
            raise
        if drain:
            self._targets = highs

    def close(self) -> None:
        """Close the consumer (does not commit anything)."""
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None
        self._admin = None  # librdkafka's handle goes with the last reference

    def _partitions(self) -> list[tuple[str, int]]:
        meta = self._admin.list_topics(timeout=10)
        if self.source.topics:
            topics = [t for t in self.source.topics if t in meta.topics]
        else:
            assert self.source.topic_pattern is not None
            pattern = re.compile(self.source.topic_pattern)
            topics = sorted(t for t in meta.topics if pattern.fullmatch(t) and not t.startswith("__"))
        return [(t, p) for t in topics for p in sorted(meta.topics[t].partitions)]

    def _start(self, topic: str, partition: int) -> int:
        offsets = self.source.starting_offsets
        if offsets == "latest":
            return _OFFSET_END
        if isinstance(offsets, dict):
            return int(offsets.get(topic, {}).get(str(partition), _OFFSET_BEGINNING))
        return _OFFSET_BEGINNING

    def _assign(self, resume: Mapping[str, Mapping[int, int]]) -> dict[tuple[str, int], int]:
        """Assign the partitions not assigned yet; returns their high watermarks.

        They are read before the assignment: once the consumer fetches, a query waits behind its
        fetch, which the broker holds up to fetch.wait.max.ms (500 ms).
        """
        from confluent_kafka import TopicPartition

        assignment, highs = [], {}
        for topic, partition in self._partitions():
            if (topic, partition) in self._positions:
                continue
            start = resume.get(topic, {}).get(partition)
            position = int(start) if start is not None else self._start(topic, partition)
            low, high = self._watermarks(topic, partition)
            highs[(topic, partition)] = high
            if position == _OFFSET_BEGINNING:
                position = low
            elif position == _OFFSET_END:
                position = high
            elif not low <= position <= high:
                position = self._gone(topic, partition, position, low, high)
            self._positions[(topic, partition)] = position
            assignment.append(TopicPartition(topic, partition, position))
        if assignment:
            self._consumer.incremental_assign(assignment)
        return highs

    def refresh(self) -> None:
        """Pick up topics and partitions created since :meth:`open` (pattern subscriptions).

        Called before each ``processing_time`` tick, as Spark's Kafka source lists the topics at each
        trigger: the metadata comes from the admin connection in milliseconds.
        """
        self._assign({})

    def _watermarks(self, topic: str, partition: int) -> tuple[int, int]:
        from confluent_kafka import KafkaException, TopicPartition

        try:
            low, high = self._consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
        except KafkaException:
            # A stopped broker also shows as local errors such as _UNKNOWN_PARTITION (its metadata is
            # gone): name the outage when it is one, else keep the original error.
            self.check_broker()
            raise
        return int(low), int(high)

    def _gone(self, topic: str, partition: int, position: int, low: int, high: int) -> int:
        """Where to read ``topic[partition]`` on from when ``position`` is outside ``[low, high]``.

        Below ``low``, retention or ``delete_records`` removed records this job had not read; above
        ``high``, the partition was truncated or the topic deleted and created again. Either way the
        records in between are lost to the table: an error unless ``fail_on_data_loss`` is false,
        when the reader logs the range and goes on from the partition's first offset, as Spark's
        Kafka source does.

        Raises:
            DataLossError: ``fail_on_data_loss`` is true.
        """
        if position < low:
            what = f"{topic}[{partition}] offsets {position}-{low - 1} are gone (the partition now starts at {low})"
        else:
            what = f"{topic}[{partition}] ends at offset {high}, before offset {position} this job reads next"
        if self.fail_on_data_loss:
            raise DataLossError.of(what, self.settings_file)
        log.warning("kafka: %s; skipped (kafka.fail_on_data_loss: false), reading on from offset %d", what, low)
        if position < low:  # above ``high`` nobody can tell how many records there were
            self._lost[f"{topic}[{partition}] {position}-{low - 1}"] = low - position
        return low

    def take_lost(self) -> dict[str, int]:
        """The ranges skipped as gone since the last call, with their record counts (for the next batch's report)."""
        lost, self._lost = self._lost, {}
        return lost

    def _fetch_error(self, msg: Any) -> None:
        """A fetch error librdkafka delivered as a message: records gone since assignment, or logged."""
        from confluent_kafka import KafkaError, TopicPartition

        if msg.error().code() != KafkaError._AUTO_OFFSET_RESET:
            log.warning("kafka: %s", msg.error())
            return
        tp = (msg.topic(), msg.partition())
        low, high = self._watermarks(*tp)
        position = self._gone(*tp, self._positions.get(tp, msg.offset()), low, high)
        self._positions[tp] = position
        # A partition whose offset the broker refused takes no seek (librdkafka: erroneous state):
        # it is assigned again, at the offset to read on from.
        self._consumer.incremental_unassign([TopicPartition(*tp)])
        self._consumer.incremental_assign([TopicPartition(*tp, position)])

    def check_broker(self) -> None:
        """Ask the broker for metadata: raises ``KafkaException`` when it does not answer.

        librdkafka reconnects quietly, so a consumer whose broker went away just reads nothing; this
        tells such an outage from a topic that has nothing more to give.
        """
        self._admin.list_topics(timeout=10)

    # -- reading -----------------------------------------------------------------------------------
    def drained(self) -> bool:
        """True when every partition reached its drain target."""
        assert self._targets is not None, "open(drain=True) fixes the ends"
        return all(self._positions.get(tp, 0) >= end for tp, end in self._targets.items())

    def next_batch(self, *, timeout: float = 2.0, first: float | None = None) -> DirectBatch | None:
        """Read up to ``max_records_per_batch`` records within ``timeout``; None when nothing arrived.

        ``first``: how long to wait for the first record (default ``timeout``). A batch ends as soon
        as the reader has caught up with the broker (:meth:`caught_up`), or when no record came for
        ``_QUIET_S`` (a topic whose last offsets are transaction markers may never look caught up),
        at the bound, at the drain target, or at ``timeout``.
        """
        import pyarrow.parquet as pq

        limit = self.source.max_records_per_batch
        messages: list[Any] = []
        started = last_record = time.monotonic()
        deadline, first_deadline = started + timeout, started + (timeout if first is None else min(first, timeout))
        while len(messages) < limit and (left := (deadline if messages else first_deadline) - time.monotonic()) > 0:
            if self._targets is not None and self.drained():
                break
            # librdkafka's consume waits its whole timeout unless the chunk fills: poll in slices so
            # that a record arriving is picked up, and a batch shipped, within one.
            wanted = min(_POLL_CHUNK, limit - len(messages))
            chunk = self._consumer.consume(num_messages=wanted, timeout=min(_SLICE_S, left))
            for msg in chunk:
                if msg.error():
                    self._fetch_error(msg)
                    continue
                tp = (msg.topic(), msg.partition())
                if self._targets is not None and msg.offset() >= self._targets.get(tp, 0):
                    continue  # beyond this run's end: the next run reads it
                messages.append(msg)
                self._positions[tp] = msg.offset() + 1
                last_record = time.monotonic()
            if messages and (self.caught_up() or time.monotonic() - last_record >= _QUIET_S):
                break  # the broker has nothing more right now: ship what we have
        if not messages:
            return None
        table = to_arrow(messages)
        staging = self.staging_dir / f"batch-{uuid.uuid4().hex}.parquet"
        # Spark splits a Parquet file only at row groups: one group per core lets every core decode.
        groups = max(1, self.spark.sparkContext.defaultParallelism)
        pq.write_table(table, staging, compression="none", row_group_size=max(1, -(-len(messages) // groups)))
        frame = self.spark.read.parquet(str(staging))
        return DirectBatch(
            frame=frame, arrow=table, records=len(messages), offsets=self.offsets(), staging_file=staging
        )

    def caught_up(self) -> bool:
        """Whether every partition is read to the high watermark its last fetch response carried.

        Local: no request. The consumer's position counts too, as it moves past transaction markers
        that are never delivered as records. False while a partition has no fetch answered yet.
        """
        from confluent_kafka import TopicPartition

        assigned = [TopicPartition(t, p) for t, p in self._positions]
        for tp in self._consumer.position(assigned):
            _low, high = self._consumer.get_watermark_offsets(tp, cached=True)
            if high < 0 or max(tp.offset, self._positions[(tp.topic, tp.partition)]) < high:
                return False
        return True

    def offsets(self) -> Offsets:
        """Next offset of every assigned partition (the whole position, not just this batch)."""
        out: Offsets = {}
        for (topic, partition), position in sorted(self._positions.items()):
            out.setdefault(topic, {})[partition] = position
        return out

    def commit_group(self, offsets: Offsets) -> None:
        """Record ``offsets`` as the consumer group's position (for lag tools; not for resuming).

        A failure is logged, not raised: the table commit already landed and the next batch's group
        commit catches up, so a busy or missing group coordinator must not fail the run.
        """
        from confluent_kafka import KafkaException, TopicPartition

        parts = [TopicPartition(t, p, o) for t, ps in offsets.items() for p, o in ps.items()]
        if not parts:
            return
        try:
            self._consumer.commit(offsets=parts, asynchronous=False)
        except KafkaException as exc:
            log.warning("consumer group %s: offsets not committed, lag tools lag until the next batch: %s",
                        self.group_id, exc.args[0] if exc.args else exc)  # fmt: skip

    def lag(self) -> int:
        """Records between the current positions and the high watermarks.

        Each fetch response carries its partition's high watermark, and the consumer keeps the last
        one: that is read here, as Kafka's own consumers compute their lag. Asking the broker took
        half a second a partition (the query waits behind the consumer's fetch), 4 s a batch for 8
        partitions. A partition with no fetch answered yet is asked.
        """
        from confluent_kafka import TopicPartition

        total = 0
        for tp, position in self._positions.items():
            _low, high = self._consumer.get_watermark_offsets(TopicPartition(*tp), cached=True)
            if high < 0:  # OFFSET_INVALID: nothing fetched from this partition yet
                high = self._watermarks(*tp)[1]
            total += max(0, high - position)
        return total

    def rewind(self, offsets: Offsets) -> None:
        """Seek back to ``offsets`` (after a failed batch, so it is read again)."""
        from confluent_kafka import TopicPartition

        for topic, parts in offsets.items():
            for partition, position in parts.items():
                self._positions[(topic, partition)] = position
                self._consumer.seek(TopicPartition(topic, partition, position))
