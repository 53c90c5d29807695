"""TableWriter against the local REST catalog on S3 (SeaweedFS), read back through pyiceberg."""

from __future__ import annotations

import threading
import uuid
from typing import Any

import pytest

from kafka_iceberg.write import CommitResult, TableWriter
from tests.write.conftest import BASE_SCHEMA, make_spec, marker, rows

pytestmark = pytest.mark.integration
UPSERT_SCHEMA = BASE_SCHEMA + ", _ki_tombstone BOOLEAN"


def writer_on(lake: Any, *, pipeline: str = "shop", **overrides: Any) -> TableWriter:
    spec = make_spec(namespace=f"w_{uuid.uuid4().hex[:8]}", **overrides)  # the writer creates the namespace
    return TableWriter(lake.spark, lake.catalog, spec, pipeline_id=pipeline)


def read(lake: Any, writer: TableWriter) -> Any:
    return lake.pyiceberg().load_table(f"{writer.spec.namespace}.{writer.spec.name}")


def markers(table: Any) -> list[tuple[str | None, ...]]:
    keys = ("kafka-iceberg.pipeline", "kafka-iceberg.stream", "kafka-iceberg.batch-id", "kafka-iceberg.offsets")
    return [tuple(s.summary.get(k) for k in keys) for s in table.snapshots()]


def test_append_with_a_partition_on_the_first_column(lake):
    spark = lake.spark
    writer = writer_on(lake, partitioning=["bucket(4, id)", "pt"])  # SeaweedFS refuses bucket(id) at CREATE
    writer.commit(spark.createDataFrame([(1, "a", "x", 0), (2, "b", "y", 1)], BASE_SCHEMA), marker(0))
    result = writer.commit(spark.createDataFrame([(3, "c", "x", 2)], BASE_SCHEMA), marker(1, orders=3))
    table = read(lake, writer)
    fields = [(str(f.transform), f.name) for f in table.spec().fields]
    assert fields == [("bucket[4]", "id_bucket_4"), ("identity", "pt")]
    assert table.metadata.format_version == 2 and table.properties["write.parquet.compression-codec"] == "zstd"
    assert [r["id"] for r in rows(table)] == [1, 2, 3]
    assert markers(table) == [
        ("shop", "orders", "0", '{"orders":{"0":1}}'),
        ("shop", "orders", "1", '{"orders":{"0":3}}'),
    ]
    assert result.snapshot_id == table.current_snapshot().snapshot_id and result.records_written == 1


def test_overwrite_leaves_untouched_partitions_intact(lake):
    spark = lake.spark
    writer = writer_on(lake, commit_mode="overwrite", partitioning=["pt"])
    writer.commit(spark.createDataFrame([(1, "a", "p1", 0), (2, "b", "p2", 1)], BASE_SCHEMA), marker(0))
    writer.commit(spark.createDataFrame([(3, "c", "p2", 2), (4, "d", "p3", 3)], BASE_SCHEMA), marker(1))
    table = read(lake, writer)
    assert [(r["id"], r["pt"]) for r in rows(table)] == [(1, "p1"), (3, "p2"), (4, "p3")]
    assert table.current_snapshot().summary["kafka-iceberg.batch-id"] == "1"


def test_upsert_with_duplicates_late_records_and_tombstones(lake):
    spark = lake.spark
    writer = writer_on(lake, commit_mode="upsert", key_fields=["id"], partitioning=["bucket(4, id)"])
    batch0 = [(1, "a1", "x", 1, False), (1, "a2", "x", 2, False), (2, "b1", "x", 3, False), (3, "c1", "x", 4, False)]
    writer.commit(spark.createDataFrame(batch0, UPSERT_SCHEMA), marker(0))
    batch1 = [(1, "a0", "x", 0, False), (2, None, None, 9, True), (3, "c2", "x", 8, False), (4, None, None, 9, True)]
    writer.commit(spark.createDataFrame(batch1, UPSERT_SCHEMA), marker(1))
    table = read(lake, writer)
    assert [(r["id"], r["name"], r["offset"]) for r in rows(table)] == [(1, "a2", 2), (3, "c2", 8)]
    assert [m[2] for m in markers(table)] == ["0", "1"]


def test_the_same_batch_committed_twice_leaves_one_copy(lake):
    spark = lake.spark
    writer = writer_on(lake)
    batch = spark.createDataFrame([(1, "a", "x", 0), (2, "b", "x", 1)], BASE_SCHEMA)
    first = writer.commit(batch, marker(0))
    replay = TableWriter(spark, lake.catalog, writer.spec, pipeline_id="shop")  # a restarted job
    again = replay.commit(batch, marker(0))
    assert again.skipped and again.snapshot_id == first.snapshot_id
    table = read(lake, writer)
    assert len(table.scan().to_arrow()) == 2
    assert markers(table) == [("shop", "orders", "0", '{"orders":{"0":1}}')]


@pytest.mark.parametrize("mode", ["upsert", "append"])
def test_two_writers_committing_at_once_both_succeed(lake, mode):
    """Two streams of one table commit from two threads; a stale commit is retried, no row is lost."""
    spark = lake.spark
    extra = {"key_fields": ["id"]} if mode == "upsert" else {}
    first = writer_on(lake, commit_mode=mode, **extra)
    first.commit(spark.createDataFrame([(0, "seed", "x", 0)], BASE_SCHEMA), marker(0, stream="seed"))
    writers = {s: TableWriter(spark, lake.catalog, first.spec, pipeline_id="shop") for s in ("left", "right")}
    results: dict[str, list[CommitResult]] = {s: [] for s in writers}
    errors: list[BaseException] = []
    rounds = 3

    def run(stream: str, base: int) -> None:
        try:
            for n in range(rounds):
                batch = spark.createDataFrame([(base + n * 10 + i, stream, "x", n) for i in range(3)], BASE_SCHEMA)
                barrier.wait()
                results[stream].append(writers[stream].commit(batch, marker(n, stream=stream)))
        except BaseException as exc:
            errors.append(exc)
            barrier.abort()

    barrier = threading.Barrier(2)
    threads = [threading.Thread(target=run, args=(s, b)) for s, b in (("left", 100), ("right", 200))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    table = read(lake, first)
    ids = sorted(r["id"] for r in table.scan().to_arrow().to_pylist())
    assert ids == sorted([0] + [b + n * 10 + i for b in (100, 200) for n in range(rounds) for i in range(3)])
    snapshots = {s.snapshot_id: s for s in table.snapshots()}
    for stream, done in results.items():
        assert [r.batch_id for r in done] == list(range(rounds)) and not any(r.skipped for r in done)
        assert writers[stream].last_commit(stream).batch_id == rounds - 1
        assert all(r.snapshot_id in snapshots for r in done)
    if mode == "upsert":
        # Both MERGEs of a round read the same snapshot; the later commit fails Iceberg's validation
        # and is retried by the writer: its snapshot's parent is the other stream's snapshot.
        retried = [r for done in results.values() for r in done if r.retries > 0]
        assert retried, "no commit conflicted: the writers never overlapped"
        for r in retried:
            parent = snapshots[snapshots[r.snapshot_id].parent_snapshot_id]
            assert parent.summary["kafka-iceberg.stream"] != r.stream
