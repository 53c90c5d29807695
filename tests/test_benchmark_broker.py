"""The benchmark's broker runs read what the replay runs read: ``benchmarks/broker.py`` puts every
replay message on the stack's Apache Kafka at its partition, offset, key, value and timestamp,
checked here with an independent consumer."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
from benchmarks import broker, datagen
from confluent_kafka.admin import AdminClient, ConfigResource

from tests.support.kafka import consume_all


def test_a_loaded_topic_holds_the_replay_files_messages_where_they_were(stack_status, tmp_path):
    ds = datagen.Dataset("json", "small", 300, 120, seed=11)
    gen = datagen.write_dataset(ds, tmp_path)
    bootstrap = stack_status["kafka"]["bootstrap"]

    assert broker.load_topic(bootstrap, ds, gen) == 300

    table = pa.concat_tables(pq.read_table(f) for f in gen.files)
    millis = [m // 1000 for m in table.column("timestamp").cast(pa.int64()).to_pylist()]  # stored in µs
    columns = [table.column(c).to_pylist() for c in ("partition", "offset", "key", "value")]
    expected = sorted(zip(*columns, millis, strict=True))
    found = [(r.partition, r.offset, r.key, r.value, r.timestamp_ms) for r in consume_all(bootstrap, ds.topic)]
    assert found == expected
    assert {p for p, *_ in found} == set(range(datagen.PARTITIONS))
    # Kept whatever their age: the broker's retention would delete January's messages mid-run.
    admin = AdminClient({"bootstrap.servers": bootstrap})
    (described,) = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, ds.topic)]).values()
    assert described.result(timeout=30)["retention.ms"].value == "-1"
