"""A Kafka round trip through the local Apache Kafka broker: keys, headers, null values, several partitions."""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Producer

from kafka_iceberg.local.readback import read_topic
from tests.support.kafka import consume_all, create_topic, produce

pytestmark = pytest.mark.integration


def test_keys_headers_and_partitions_survive_a_round_trip(stack):
    topic = f"roundtrip_{uuid.uuid4().hex[:8]}"
    create_topic(stack.kafka_bootstrap, topic, partitions=3)
    for p in range(3):
        produce(
            stack.kafka_bootstrap,
            topic,
            [(f"k{p}-{i}", f"v{p}-{i}") for i in range(4)] + [(f"k{p}-gone", None)],
            partition=p,
            headers=[("source", f"p{p}".encode()), ("trace", b"\x00\x01")],
        )
    got = consume_all(stack.kafka_bootstrap, topic)
    assert len(got) == 15
    assert {m.partition for m in got} == {0, 1, 2}
    for p in range(3):
        part = [m for m in got if m.partition == p]
        assert [m.offset for m in part] == [0, 1, 2, 3, 4]
        assert [m.key for m in part] == [f"k{p}-{i}".encode() for i in range(4)] + [f"k{p}-gone".encode()]
        assert [m.value for m in part[:4]] == [f"v{p}-{i}".encode() for i in range(4)]
        assert part[4].value is None  # a tombstone stays a tombstone
        assert all(m.headers == (("source", f"p{p}".encode()), ("trace", b"\x00\x01")) for m in part)


def test_a_transactional_topic_is_read_to_its_end_committed_records_only(stack):
    # An error topic's last offset is a transaction marker, which no consumer receives: the read
    # ends when the consumer's position passes it (a wait for a record there lasted the timeout).
    topic = f"transactional_{uuid.uuid4().hex[:8]}"
    create_topic(stack.kafka_bootstrap, topic, partitions=2)
    producer = Producer({"bootstrap.servers": stack.kafka_bootstrap, "transactional.id": topic})
    producer.init_transactions(30)
    for values, commit in ((["a", "b", "c"], True), (["gone", "gone"], False), (["d"], True)):
        producer.begin_transaction()
        for i, v in enumerate(values):
            producer.produce(topic, value=v.encode(), partition=i % 2)
        (producer.commit_transaction if commit else producer.abort_transaction)(30)
    started = time.monotonic()
    got = read_topic(stack.kafka_bootstrap, topic, timeout=120)
    assert time.monotonic() - started < 60  # at the end, not at the timeout
    assert sorted(m.value for m in got) == [b"a", b"b", b"c", b"d"]
