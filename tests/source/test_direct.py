"""The direct reader against the local Apache Kafka broker: bounded batches, exact drains, resumption, group offsets."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from kafka_iceberg.errors import DataLossError
from kafka_iceberg.records import KAFKA_SCHEMA_DDL
from kafka_iceberg.source.direct import DirectReader
from kafka_iceberg.spec.model import SourceSpec
from tests.support.kafka import create_topic, produce

pytestmark = pytest.mark.integration


def reader(spark, stack, tmp_path, **source):
    return DirectReader(
        spark=spark,
        source=SourceSpec(**source),
        config={"bootstrap.servers": stack.kafka_bootstrap},
        admin_config={"bootstrap.servers": stack.kafka_bootstrap},
        group_id=f"g-{uuid.uuid4().hex[:6]}",
        staging_dir=tmp_path / "staging",
    )


def drain(r):
    """What an ``available_now`` run reads: batches until the ends fixed by ``open(drain=True)``."""
    batches = []
    while not r.drained():
        batch = r.next_batch()
        if batch is None:
            break
        batches.append(batch)
    return batches


@pytest.fixture
def topics(stack):
    names = [f"direct_a_{uuid.uuid4().hex[:6]}", f"direct_b_{uuid.uuid4().hex[:6]}"]
    for name in names:
        create_topic(stack.kafka_bootstrap, name, partitions=2)
        for p in range(2):
            produce(
                stack.kafka_bootstrap,
                name,
                [(f"k{i}", f"{name}-{p}-{i}") for i in range(25)],
                partition=p,
                headers=[("h", b"1")],
            )
    return names


def test_batches_are_bounded_complete_and_kafka_shaped(spark, stack, tmp_path, topics):
    r = reader(spark, stack, tmp_path, topics=topics, max_records_per_batch=30)
    r.open(resume=None, drain=True)
    batches = drain(r)
    r.close()
    assert [b.records for b in batches][:-1] == [30] * (len(batches) - 1) and sum(b.records for b in batches) == 100
    assert batches[0].frame.schema.simpleString() == spark.createDataFrame([], KAFKA_SCHEMA_DDL).schema.simpleString()
    rows = [row for b in batches for row in b.frame.collect()]
    assert len({(r.topic, r.partition, r.offset) for r in rows}) == 100
    assert all(r.headers[0].key == "h" and r.headers[0].value == b"1" for r in rows)
    assert batches[-1].offsets == {t: {0: 25, 1: 25} for t in sorted(topics)}


def test_resume_from_recorded_offsets_reads_only_the_rest(spark, stack, tmp_path, topics):
    r = reader(spark, stack, tmp_path, topics=topics[:1])
    r.open(resume={topics[0]: {0: 20, 1: 24}}, drain=True)
    rows = [row for b in drain(r) for row in b.frame.collect()]
    r.close()
    assert sorted((x.partition, x.offset) for x in rows) == [(0, 20), (0, 21), (0, 22), (0, 23), (0, 24), (1, 24)]


def test_pattern_subscription_and_starting_offsets_latest(spark, stack, tmp_path, topics):
    # As a processing_time run reads: batch after batch, with no end fixed.
    r = reader(spark, stack, tmp_path, topic_pattern="direct_(a|b)_.*", starting_offsets="latest")
    r.open(resume=None)
    assert r.next_batch(timeout=1) is None  # nothing new since the start
    produce(stack.kafka_bootstrap, topics[1], [("late", "v")], partition=1)
    batch = r.next_batch(timeout=30)
    r.close()
    assert batch is not None
    assert [(x.topic, x.partition, x.offset, x.value) for x in batch.frame.collect()] == [(topics[1], 1, 25, b"v")]


def test_group_offsets_are_committed_for_lag_tools(spark, stack, tmp_path, topics):
    r = reader(spark, stack, tmp_path, topics=topics[:1])
    r.open(resume=None, drain=True)
    last = drain(r)[-1]
    assert r.lag() == 0
    r.commit_group(last.offsets)
    r.close()
    admin = AdminClient({"bootstrap.servers": stack.kafka_bootstrap})
    request = ConsumerGroupTopicPartitions(r.group_id, [TopicPartition(topics[0], 0), TopicPartition(topics[0], 1)])
    result = admin.list_consumer_group_offsets([request])[r.group_id].result(timeout=10)
    assert sorted((tp.partition, tp.offset) for tp in result.topic_partitions) == [(0, 25), (1, 25)]


class CountingConsumer:
    """The reader's consumer, counting the watermark and metadata queries it sends and the records each poll gave."""

    def __init__(self, consumer):
        self.consumer, self.queries, self.metadata, self.polls = consumer, 0, 0, []

    def get_watermark_offsets(self, partition, *args, cached=False, **kwargs):
        self.queries += not cached
        return self.consumer.get_watermark_offsets(partition, *args, cached=cached, **kwargs)

    def list_topics(self, *args, **kwargs):
        self.metadata += 1
        return self.consumer.list_topics(*args, **kwargs)

    def consume(self, *args, **kwargs):
        chunk = self.consumer.consume(*args, **kwargs)
        self.polls.append(len(chunk))
        return chunk

    def empty_polls_at_the_end(self):
        """Polls that gave nothing after the last that gave records."""
        return len(self.polls) - 1 - max(i for i, n in enumerate(self.polls) if n)

    def __getattr__(self, name):
        return getattr(self.consumer, name)


def test_lag_comes_from_the_fetches_without_asking_the_broker(spark, stack, tmp_path, topics):
    # Asked of the broker, each partition's high watermark waited behind the consumer's own fetch
    # (up to fetch.wait.max.ms, 500 ms): 4 s a batch on the chaos test's 8 partitions.
    r = reader(spark, stack, tmp_path, topics=topics, max_records_per_batch=30)
    r.open(resume=None, drain=True)
    r._consumer = counting = CountingConsumer(r._consumer)
    lags, read = [], 0
    while not r.drained():
        batch = r.next_batch()
        assert batch is not None
        read += batch.records
        lags.append((r.lag(), 100 - read))
    r.close()
    assert len(lags) >= 4 and all(lag == left for lag, left in lags), lags
    assert counting.queries == 0


def test_a_drain_fixed_at_open_ends_where_the_topics_ended_then(spark, stack, tmp_path, topics):
    r = reader(spark, stack, tmp_path, topics=topics[:1])
    r.open(resume=None, drain=True)
    produce(stack.kafka_bootstrap, topics[0], [("late", "v")], partition=0)  # the next run's
    rows = []
    while not r.drained():
        batch = r.next_batch()
        assert batch is not None
        rows += batch.frame.collect()
    assert sorted((x.partition, x.offset) for x in rows) == [(p, o) for p in (0, 1) for o in range(25)]
    assert r.offsets() == {topics[0]: {0: 25, 1: 25}}
    r.close()


def test_a_pattern_picks_up_a_topic_created_after_open_through_the_admin_connection(spark, stack, tmp_path, topics):
    # On the consumer's connection a metadata request waited behind its fetch (0.4-0.5 s a refresh,
    # each processing_time tick, per table): the metadata now comes from an admin connection.
    prefix = f"direct_new_{uuid.uuid4().hex[:6]}"
    create_topic(stack.kafka_bootstrap, f"{prefix}_x", partitions=1)
    produce(stack.kafka_bootstrap, f"{prefix}_x", [("k", "first")], partition=0)
    r = reader(spark, stack, tmp_path, topic_pattern=f"{prefix}_.*")
    r.open(resume=None)
    r._consumer = counting = CountingConsumer(r._consumer)
    assert [row.value for row in r.next_batch().frame.collect()] == [b"first"]
    create_topic(stack.kafka_bootstrap, f"{prefix}_y", partitions=2)
    produce(stack.kafka_bootstrap, f"{prefix}_y", [("k", "late")], partition=1)
    r.refresh()
    batch = r.next_batch(timeout=30)
    r.close()
    assert batch is not None
    assert [(x.topic, x.partition, x.offset, x.value) for x in batch.frame.collect()] == [
        (f"{prefix}_y", 1, 0, b"late")
    ]
    assert batch.offsets == {f"{prefix}_x": {0: 1}, f"{prefix}_y": {0: 0, 1: 1}}
    assert counting.metadata == 0


def test_a_batch_ends_once_the_reader_caught_up_with_the_broker(spark, stack, tmp_path, topics):
    r = reader(spark, stack, tmp_path, topics=topics, max_records_per_batch=1000)
    r.open(resume=None)
    r._consumer = counting = CountingConsumer(r._consumer)
    assert not r.caught_up()  # 100 records wait, nothing fetched yet
    batch = r.next_batch(timeout=60)
    assert batch is not None and batch.records == 100 and r.caught_up()
    # Shipped when the fetches showed nothing more, not after a quiet _QUIET_S (10 empty polls).
    assert counting.empty_polls_at_the_end() < 10, counting.polls
    produce(stack.kafka_bootstrap, topics[0], [("k", "more")], partition=1)
    batch = r.next_batch(timeout=60)
    r.close()
    assert [(x.topic, x.partition, x.offset) for x in batch.frame.collect()] == [(topics[0], 1, 25)]


def test_a_transactional_topic_is_caught_up_past_its_last_marker(spark, stack, tmp_path):
    # The last offset is a commit marker, never delivered: the consumer's position passes it.
    topic = f"direct_txn_{uuid.uuid4().hex[:6]}"
    create_topic(stack.kafka_bootstrap, topic, partitions=1)
    producer = Producer({"bootstrap.servers": stack.kafka_bootstrap, "transactional.id": topic})
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(5):
        producer.produce(topic, value=f"v{i}".encode(), partition=0)
    producer.commit_transaction(30)
    r = reader(spark, stack, tmp_path, topics=[topic])
    r.open(resume=None)
    r._consumer = counting = CountingConsumer(r._consumer)
    batch = r.next_batch(timeout=60)
    r.close()
    assert [x.value for x in batch.frame.collect()] == [f"v{i}".encode() for i in range(5)]
    assert counting.empty_polls_at_the_end() < 10, counting.polls


def _trim(stack, topic, before):
    """Delete a partition's records below ``before``, as retention does."""
    admin = AdminClient({"bootstrap.servers": stack.kafka_bootstrap})
    for future in admin.delete_records([TopicPartition(topic, 0, before)]).values():
        future.result(timeout=30)


@pytest.fixture
def trimmed(stack):
    """A topic whose offsets 0-7 are gone (deleted as retention deletes), 8-11 left."""
    topic = f"direct_gone_{uuid.uuid4().hex[:6]}"
    produce(stack.kafka_bootstrap, topic, [(None, f"v{i}") for i in range(12)], partition=0)
    _trim(stack, topic, 8)
    return topic


def test_resuming_below_what_kafka_still_holds_is_data_loss_named_with_its_offsets(spark, stack, tmp_path, trimmed):
    r = reader(spark, stack, tmp_path, topics=[trimmed])
    r.settings_file = "environments/prod.yml"
    with pytest.raises(DataLossError) as err:
        r.open(resume={trimmed: {0: 4}}, drain=True)
    r.close()
    assert f"{trimmed}[0] offsets 4-7 are gone (the partition now starts at 8)" in str(err.value)
    assert "kafka.fail_on_data_loss: false in environments/prod.yml" in str(err.value)


def test_with_fail_on_data_loss_off_the_reader_skips_what_is_gone_and_says_so(spark, stack, tmp_path, trimmed, caplog):
    r = reader(spark, stack, tmp_path, topics=[trimmed])
    r.fail_on_data_loss = False
    with caplog.at_level("WARNING", logger="kafka_iceberg.source.direct"):
        r.open(resume={trimmed: {0: 4}}, drain=True)
        rows = [row for b in drain(r) for row in b.frame.collect()]
    r.close()
    assert [x.offset for x in rows] == [8, 9, 10, 11]
    assert any(f"{trimmed}[0] offsets 4-7 are gone" in m and "skipped" in m for m in caplog.messages)
    assert r.take_lost() == {f"{trimmed}[0] 4-7": 4}  # for the next batch's report, once
    assert r.take_lost() == {}


@pytest.mark.parametrize("fail", [True, False])
def test_records_deleted_while_the_reader_waits_for_them_are_data_loss_too(spark, stack, tmp_path, fail, caplog):
    # Assigned at offset 4 while 4 is still the end; the records 4-11 come and 4-7 go before the
    # reader fetches (its partition paused meanwhile): the broker refuses offset 4.
    topic = f"direct_gone_{uuid.uuid4().hex[:6]}"
    produce(stack.kafka_bootstrap, topic, [(None, f"v{i}") for i in range(4)], partition=0)
    r = reader(spark, stack, tmp_path, topics=[topic])
    r.fail_on_data_loss = fail
    r.open(resume={topic: {0: 4}})
    r._consumer.pause([TopicPartition(topic, 0)])
    produce(stack.kafka_bootstrap, topic, [(None, f"v{i}") for i in range(4, 12)], partition=0)
    _trim(stack, topic, 8)
    r._consumer.resume([TopicPartition(topic, 0)])
    try:
        if fail:
            with pytest.raises(DataLossError, match=rf"{topic}\[0\] offsets 4-7 are gone"):
                r.next_batch(timeout=10)
        else:
            with caplog.at_level("WARNING", logger="kafka_iceberg.source.direct"):
                batch = r.next_batch(timeout=10)
            assert [x.offset for x in batch.frame.collect()] == [8, 9, 10, 11] and batch.offsets == {topic: {0: 12}}
            assert any("offsets 4-7 are gone" in m for m in caplog.messages)
            assert r.take_lost() == {f"{topic}[0] 4-7": 4}
    finally:
        r.close()


def test_a_topic_created_again_behind_the_recorded_offsets_is_data_loss(spark, stack, tmp_path):
    # The table recorded offset 12 as partition 1's next; it now holds 2 records: deleted and created again.
    topic = f"direct_again_{uuid.uuid4().hex[:6]}"
    create_topic(stack.kafka_bootstrap, topic, partitions=2)
    produce(stack.kafka_bootstrap, topic, [(None, f"v{i}") for i in range(4)], partition=0)
    produce(stack.kafka_bootstrap, topic, [(None, f"v{i}") for i in range(2)], partition=1)
    r = reader(spark, stack, tmp_path, topics=[topic])
    with pytest.raises(DataLossError, match=rf"{topic}\[1\] ends at offset 2, before offset 12 this job reads next"):
        r.open(resume={topic: {0: 1, 1: 12}}, drain=True)
    r.fail_on_data_loss = False  # opened again: every partition assigned afresh, partition 0 too
    r.open(resume={topic: {0: 1, 1: 12}}, drain=True)
    rows = [row for b in drain(r) for row in b.frame.collect()]
    r.close()
    # partition 1 read again from its start, as Spark's source does
    assert sorted((x.partition, x.offset) for x in rows) == [(0, 1), (0, 2), (0, 3), (1, 0), (1, 1)]
