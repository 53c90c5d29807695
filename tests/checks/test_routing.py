"""The MaxCompute error table, row by row, and exactly-once delivery to the error topic."""

from __future__ import annotations

import uuid

import pytest

from kafka_iceberg.checks import ErrorRouter, write_rejections
from kafka_iceberg.checks.error_topic import (
    H_OFFSET,
    H_PARTITION,
    H_REASON,
    H_STAGE,
    H_TOPIC,
    ErrorTopicError,
    ErrorTopicPublisher,
)
from kafka_iceberg.errors import RecordError
from kafka_iceberg.spec.model import TableSpec
from tests.support.frames import error_frame, kafka_frame
from tests.support.kafka import consume_all


def spec(**errors):
    return TableSpec.model_validate(
        {"name": "t", "namespace": "n", "source": {"topics": ["src"], "format": "json"}, "errors": errors}
    )


@pytest.fixture
def errors(spark):
    return error_frame(
        spark,
        [
            ("src", 1, 7, b"k7", b"{bad", [("trace", b"abc")], "invalid JSON", "decode"),
            ("src", 0, 3, None, b"\xff\xfe", None, "invalid UTF-8 in value", "decode"),
        ],
    )


@pytest.fixture(params=["frame", "driver rows"])
def bad(request, errors):
    """The same bad records as a DataFrame, or already on the driver (as the single pass hands them over)."""
    return errors if request.param == "frame" else errors.collect()


class RecordingQuarantine:
    def __init__(self):
        self.batches = []

    def append(self, errors, batch_id):
        self.on_driver = isinstance(errors, list)
        rows = sorted(errors if self.on_driver else errors.collect(), key=lambda r: (r.partition, r.offset))
        self.batches.append((batch_id, rows))
        return len(rows)


def test_no_skip_and_no_target_fails_with_the_first_bad_record(bad):
    with pytest.raises(RecordError) as err:
        ErrorRouter(spec()).route(bad, None, batch_id=1)
    assert (err.value.topic, err.value.partition, err.value.offset) == ("src", 0, 3)
    assert err.value.stage == "decode" and err.value.reason == "invalid UTF-8 in value"
    assert "and 1 more" in str(err.value) and "Nothing of this batch was committed" in str(err.value)


def test_skip_without_target_drops_and_counts(bad):
    result = ErrorRouter(spec(skip_error=True)).route(bad, None, batch_id=1)
    assert (result.failed, result.skipped, result.published, result.quarantined) == (2, 2, 0, 0)


@pytest.mark.parametrize("skip_error", [False, True])
def test_quarantine_target_receives_the_records(spark, bad, skip_error):
    sink = RecordingQuarantine()
    router = ErrorRouter(spec(skip_error=skip_error, quarantine_table="n.q"), quarantine=sink)
    result = router.route(bad, None, batch_id=4)
    assert (result.failed, result.skipped, result.quarantined) == (2, 0, 2)
    ((batch_id, rows),) = sink.batches
    assert batch_id == 4 and [(r.partition, r.offset, r.value) for r in rows] == [(0, 3, b"\xff\xfe"), (1, 7, b"{bad")]
    # Rows on the driver stay there; a frame of few rows is brought there: no Spark job to write them.
    assert sink.on_driver


@pytest.mark.parametrize("limit", ["FEW_FAILURES", "FEW_FAILURE_BYTES"])
def test_many_or_large_bad_records_stay_in_spark(spark, errors, monkeypatch, limit):
    from kafka_iceberg.checks import routing

    quarantined = error_frame(
        spark, [("src", 0, 9, b"k", b"{}", None, "expectation x failed: id > 0", "expectation:x")]
    )
    monkeypatch.setattr(routing, limit, 2 if limit == "FEW_FAILURES" else 20)  # 3 rows; 41 bytes
    sink = RecordingQuarantine()
    router = ErrorRouter(spec(quarantine_table="n.q"), quarantine=sink)
    result = router.route(errors, quarantined, batch_id=5)
    assert (result.failed, result.quarantined) == (3, 3) and not sink.on_driver
    assert [r.offset for r in sink.batches[0][1]] == [3, 9, 7]
    monkeypatch.undo()
    router.route(errors, quarantined, batch_id=6)
    assert sink.on_driver and [r.offset for r in sink.batches[1][1]] == [3, 9, 7]


def test_errors_only_counted_are_not_brought_to_the_driver(spark, errors, monkeypatch):
    from pyspark.sql import DataFrame

    collected = []
    original = DataFrame.collect
    monkeypatch.setattr(DataFrame, "collect", lambda self: collected.append(self.columns) or original(self))
    result = ErrorRouter(spec(skip_error=True)).route(errors, None, batch_id=1)
    assert (result.failed, result.skipped) == (2, 2)
    assert collected and not any("value" in columns for columns in collected), collected  # counted only
    ErrorRouter(spec(skip_error=True, quarantine_table="n.q"), quarantine=RecordingQuarantine()).route(
        errors, None, batch_id=1
    )
    assert "value" in collected[-1]  # the spy sees a collect of the rows when they are routed


def test_expectation_quarantine_goes_to_the_table_only(spark, errors):
    sink = RecordingQuarantine()
    quarantined = error_frame(
        spark, [("src", 0, 9, b"k", b"{}", None, "expectation x failed: id > 0", "expectation:x")]
    )
    router = ErrorRouter(spec(quarantine_table="n.q"), quarantine=sink)
    result = router.route(None, quarantined, batch_id=2)
    assert result.quarantined == 1 and result.published == 0
    assert sink.batches[0][1][0]._error_stage == "expectation:x"


def _publisher(stack, topic, **producer):
    conf = {"bootstrap.servers": stack.kafka_bootstrap}
    return ErrorTopicPublisher(
        topic=topic,
        producer_config={**conf, **{k: str(v) for k, v in producer.items()}},
        consumer_config=conf,
        pipeline="p",
        table="n.t",
    )


@pytest.mark.integration
@pytest.mark.parametrize("skip_error", [False, True])
def test_error_topic_gets_original_bytes_and_explaining_headers(stack, bad, skip_error):
    topic = f"errors_{uuid.uuid4().hex[:8]}"
    router = ErrorRouter(spec(skip_error=skip_error, error_topic=topic), publisher=_publisher(stack, topic))
    result = router.route(bad, None, batch_id=1)
    assert (result.published, result.skipped) == (2, 0)
    # Past the two records; the transaction's commit marker (offset 2) counts once the broker has
    # written it, which it does after the commit returns. A restart scans from here: either is safe.
    assert sum(result.error_offsets.values()) in (2, 3)
    got = consume_all(stack.kafka_bootstrap, topic)
    by_offset = {int(dict(m.headers)[H_OFFSET]): m for m in got}
    assert set(by_offset) == {3, 7}
    assert by_offset[7].key == b"k7" and by_offset[7].value == b"{bad"
    assert by_offset[3].key is None and by_offset[3].value == b"\xff\xfe"  # byte-for-byte, even invalid UTF-8
    h7 = dict(by_offset[7].headers)
    assert h7["trace"] == b"abc"  # original headers kept
    assert (h7[H_TOPIC], h7[H_PARTITION], h7[H_REASON], h7[H_STAGE]) == (b"src", b"1", b"invalid JSON", b"decode")


@pytest.mark.integration
def test_republishing_after_a_crash_does_not_duplicate(stack, errors):
    topic = f"errors_{uuid.uuid4().hex[:8]}"
    first = _publisher(stack, topic)
    assert first.publish(errors.toLocalIterator())[0] == 2  # then the process "crashes" before its commit
    again = _publisher(stack, topic)
    assert again.recover(since={}) == 2
    sent, _ = again.publish(errors.toLocalIterator())
    assert sent == 0
    assert len(consume_all(stack.kafka_bootstrap, topic)) == 2


@pytest.mark.integration
def test_closing_the_publisher_between_batches_loses_nothing_and_it_opens_again(stack, errors):
    topic = f"errors_{uuid.uuid4().hex[:8]}"
    publisher = _publisher(stack, topic)
    publisher.recover(since={})
    assert publisher.publish(errors.toLocalIterator())[0] == 2
    publisher.close()  # the end of a run: the producer stops talking to the broker
    assert publisher._producer is None
    publisher.close()  # closing twice is harmless
    # The next run's publisher (or this one, reopened) fences, scans and sends nothing twice.
    assert publisher.recover(since={}) == 2
    assert publisher.publish(errors.toLocalIterator())[0] == 0
    assert len(consume_all(stack.kafka_bootstrap, topic)) == 2


@pytest.mark.integration
def test_a_crashed_runs_open_transaction_is_fenced_and_its_records_sent_again(stack, errors):
    """A run killed in the middle of a publish leaves an open transaction whose requests may still
    be in flight. The restart's recovery fences that producer first: its records are aborted (no
    read_committed reader sees them), nothing of it can land after the scan, and the batch is sent
    again in full."""
    from confluent_kafka import KafkaException, Producer

    topic = f"errors_{uuid.uuid4().hex[:8]}"
    crashed = _publisher(stack, topic)
    zombie = Producer({"bootstrap.servers": stack.kafka_bootstrap, "transactional.id": crashed.transactional_id})
    zombie.init_transactions(30)
    zombie.begin_transaction()
    for row in errors.toLocalIterator():
        zombie.produce(topic, value=bytes(row["value"]), headers=[("kafka_iceberg.errors.pipeline", b"p"),
                       ("kafka_iceberg.errors.table", b"n.t"), ("kafka_iceberg.errors.topic", b"src"),
                       ("kafka_iceberg.errors.partition", b"1"), ("kafka_iceberg.errors.offset", b"9")])  # fmt: skip
    zombie.flush(10)  # sent, never committed: the run "died" here
    again = _publisher(stack, topic)
    assert again.recover(since={}) == 0  # the open transaction was aborted by the fencing
    with pytest.raises(KafkaException):
        zombie.commit_transaction(10)  # the crashed run cannot complete it any more
    assert again.publish(errors.toLocalIterator())[0] == 2
    assert len(consume_all(stack.kafka_bootstrap, topic)) == 2


@pytest.mark.integration
def test_recovery_reads_to_the_end_or_fails_it_never_stops_on_a_quiet_poll(stack, errors):
    """The scan ends when the consumer's position reaches the high watermark read after fencing;
    a topic it cannot read to the end fails the run instead of republishing."""
    from kafka_iceberg.checks.error_topic import ErrorTopicError, read_committed

    topic = f"errors_{uuid.uuid4().hex[:8]}"
    first = _publisher(stack, topic)
    for _ in range(3):
        first.publish(errors.toLocalIterator())  # three transactions, three commit markers
    conf = {"bootstrap.servers": stack.kafka_bootstrap}
    assert len(list(read_committed(conf, topic, {}, timeout=30))) == 6
    # An open transaction of another writer holds read_committed readers back: fail, do not guess.
    from confluent_kafka import Producer

    other = Producer({**conf, "transactional.id": f"other-{uuid.uuid4().hex}"})
    other.init_transactions(30)
    other.begin_transaction()
    other.produce(topic, value=b"x")
    other.flush(10)
    with pytest.raises(ErrorTopicError, match="could not read"):
        list(read_committed(conf, topic, {}, timeout=3))
    other.commit_transaction(10)
    assert len(list(read_committed(conf, topic, {}, timeout=30))) == 7


@pytest.mark.integration
def test_a_record_above_librdkafkas_default_size_limit_is_republished(spark, stack):
    """Kafka topics take 1 MiB records; librdkafka's producer alone would refuse one over 1,000,000 bytes."""
    topic = f"errors_{uuid.uuid4().hex[:8]}"
    big = b"x" * 1_000_000 + b"\xff"
    rows = error_frame(spark, [("src", 0, 5, b"k", big, None, "invalid UTF-8 in value", "decode")])
    assert _publisher(stack, topic).publish(rows.toLocalIterator())[0] == 1
    (got,) = consume_all(stack.kafka_bootstrap, topic)
    assert got.value == big and dict(got.headers)[H_OFFSET] == b"5"


@pytest.mark.integration
def test_a_record_the_producer_refuses_fails_naming_it(spark, stack):
    topic = f"errors_{uuid.uuid4().hex[:8]}"
    rows = error_frame(spark, [("src", 2, 9, None, b"y" * 5000, None, "bad", "decode")])
    with pytest.raises(ErrorTopicError, match=f"topic src partition 2 offset 9 cannot be sent to {topic}"):
        _publisher(stack, topic, **{"message.max.bytes": 1000}).publish(rows.toLocalIterator())


@pytest.mark.integration
def test_a_full_producer_queue_waits_instead_of_failing(spark, stack):
    topic = f"errors_{uuid.uuid4().hex[:8]}"
    rows = error_frame(spark, [("src", 0, i, None, b"v%d" % i, None, "bad", "decode") for i in range(5)])
    publisher = _publisher(stack, topic, **{"queue.buffering.max.messages": 1})
    assert publisher.publish(rows.toLocalIterator())[0] == 5
    assert sorted(m.value for m in consume_all(stack.kafka_bootstrap, topic)) == [b"v%d" % i for i in range(5)]


def test_write_rejections_split_null_required_columns_and_keys(spark):
    raw = kafka_frame(spark, [(0, i, "k", "v") for i in range(4)])
    rows = spark.createDataFrame(
        [
            ("t", 0, 0, 1, "a", False),
            ("t", 0, 1, None, "b", False),
            ("t", 0, 2, 3, None, False),
            ("t", 0, 3, 4, None, True),
        ],
        "topic STRING, partition INT, offset BIGINT, id BIGINT, name STRING, _ki_tombstone BOOLEAN",
    )
    ok, rejected = write_rejections(rows, raw, required=["name"], keys=["id"], payload_columns=["id", "name"])
    assert sorted(r.offset for r in ok.collect()) == [0, 3]  # a tombstone needs its key, not its payload
    bad = {r.offset: r for r in rejected.collect()}
    assert bad[1]._error == "upsert key id is null" and bad[1]._error_stage == "write"
    assert bad[2]._error == "column name is required (NOT NULL) but is null"
