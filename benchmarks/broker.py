"""From the broker: the replay files' messages produced to the stack's Apache Kafka and read back by
Spark's Kafka source, the reader a job cluster uses.

The replay files measure decode, checks and commit without the broker. Here the same messages
(key, value, partition, timestamp) go to a topic of the same partitions, once per run and untimed,
and both the framework (``reader: spark``, ``max_records_per_batch`` = the replay file size, so the
same batch sizes) and baseline (a) (``readStream.format("kafka")`` with ``maxOffsetsPerTrigger``)
read it from the earliest offset to the end (``availableNow``).
"""

from __future__ import annotations

from typing import Any

from benchmarks.datagen import PARTITIONS, Dataset, Generated


def load_topic(bootstrap: str, ds: Dataset, gen: Generated) -> int:
    """Produce every message of ``gen``'s replay files to ``ds.topic`` (created with their partitions).

    Each message keeps its partition, key, value and timestamp; returns the number produced.
    """
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]  # re-exported

    admin = AdminClient({"bootstrap.servers": bootstrap})
    # The messages keep the dataset's timestamps (January 2026): under the broker's default 7-day
    # retention, its next retention check (every 5 minutes) would delete them in the middle of a run.
    topic = NewTopic(ds.topic, num_partitions=PARTITIONS, replication_factor=1, config={"retention.ms": "-1"})
    for future in admin.create_topics([topic]).values():
        future.result(timeout=30)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "enable.idempotence": True})
    failed: list[str] = []

    def delivered(err: Any, _msg: Any) -> None:
        if err is not None:
            failed.append(str(err))

    sent = 0
    for path in gen.files:
        table = pq.read_table(path, columns=["key", "value", "partition", "timestamp"])
        millis = pc.divide(table.column("timestamp").cast(pa.int64()), 1000).to_pylist()  # stored in µs
        rows = zip(table.column("key").to_pylist(), table.column("value").to_pylist(),
                   table.column("partition").to_pylist(), millis, strict=True)  # fmt: skip
        for key, value, partition, timestamp in rows:
            while True:
                try:
                    producer.produce(ds.topic, value=value, key=key, partition=partition, timestamp=timestamp,
                                     on_delivery=delivered)  # fmt: skip
                    break
                except BufferError:  # the local queue is full: let it drain
                    producer.poll(0.1)
            sent += 1
        producer.poll(0)
    if producer.flush(120) or failed:
        raise RuntimeError(f"producing {ds.topic} failed: {failed[:3] or 'messages still queued after 120 s'}")
    return sent


def kafka_stream(spark: Any, bootstrap: str, topic: str, per_batch: int) -> Any:
    """Baseline (a)'s source: ``topic`` from the earliest offset, ``per_batch`` records per micro-batch."""
    return (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", per_batch)
        .load()
    )
