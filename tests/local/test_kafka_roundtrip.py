"""A Kafka round trip through the local Apache Kafka broker: keys, headers, null values, several partitions."""

from __future__ import annotations

import uuid

import pytest

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
