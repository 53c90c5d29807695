"""capture records a live topic into replay files; replay streams them back unchanged."""

from __future__ import annotations

import uuid

import pytest

from kafka_iceberg.source.capture import capture
from kafka_iceberg.source.replay import replay_stream
from kafka_iceberg.spec.model import SourceSpec
from tests.support.kafka import consume_all, create_topic, produce

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("fmt", ["parquet", "jsonl"])
def test_capture_then_replay_yields_the_topic_as_sent(spark, stack, tmp_path, fmt):
    topic = f"cap_{uuid.uuid4().hex[:6]}"
    create_topic(stack.kafka_bootstrap, topic, partitions=2)
    produce(stack.kafka_bootstrap, topic, [(f"k{i}", f"v{i}") for i in range(7)], partition=0, headers=[("h", b"\x00")])
    produce(stack.kafka_bootstrap, topic, [(None, b"\xff\xfe"), ("tomb", None)], partition=1)
    out = tmp_path / "capture"
    assert capture({"bootstrap.servers": stack.kafka_bootstrap}, topic, out, fmt=fmt, records_per_file=4) == 9
    assert len(list(out.iterdir())) == 3  # 4 + 3 from partition 0 ... files never mix more than records_per_file

    seen = []
    query = (
        replay_stream(spark, str(out), SourceSpec(topics=[topic]), fmt)
        .writeStream.foreachBatch(lambda df, _id: seen.extend(df.collect()))
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    expected = consume_all(stack.kafka_bootstrap, topic)
    got = sorted(seen, key=lambda r: (r.partition, r.offset))
    assert [(r.partition, r.offset, r.key, r.value) for r in got] == [
        (m.partition, m.offset, m.key, m.value) for m in expected
    ]
    assert got[0].headers[0].key == "h" and got[0].headers[0].value == b"\x00"
    assert got[0].timestamp is not None
