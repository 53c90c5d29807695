"""TableWriter against a Hadoop catalog on local disk, results read back through pyiceberg.

Table management, schema evolution, the three commit modes, the exactly-once marker and retries.
The same behaviour against the REST catalog on S3 is in ``test_writer_lake.py``.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from pathlib import Path

import pytest

from kafka_iceberg.errors import CommitConflictError, ConfigError, SchemaMismatchError
from kafka_iceberg.write import TableWriter
from kafka_iceberg.write.jvm import IcebergTable
from tests.write.conftest import BASE_SCHEMA, files_table, make_spec, marker, rows, summaries
from tests.write.test_marker_and_retries import conflict

UTC = dt.timezone.utc
MARKER_KEYS = ("kafka-iceberg.pipeline", "kafka-iceberg.stream", "kafka-iceberg.batch-id", "kafka-iceberg.offsets")


def df(spark, data, schema=BASE_SCHEMA):
    return spark.createDataFrame(data, schema)


def marker_of(summary):
    return tuple(summary.get(k) for k in MARKER_KEYS)


# -- table management ----------------------------------------------------------------------------
def test_plan_changes_nothing_and_apply_creates_the_declared_table(spark, new_writer):
    writer = new_writer(
        partitioning=["bucket(4, id)", "pt"],
        write={"sort_order": ["name DESC"], "compression": "snappy", "properties": {"commit.retry.num-retries": "6"}},
    )
    plan = writer.plan(df(spark, [], BASE_SCHEMA).schema)
    assert plan.create_namespace and plan.create_table
    assert not writer.exists() and writer.current_schema() is None and writer.last_commit("orders") is None

    writer.apply(plan)
    table = files_table(writer)
    assert [f.name for f in table.schema().fields] == ["id", "name", "pt", "offset"]
    assert all(not f.required for f in table.schema().fields)
    assert [(str(f.transform), table.schema().find_column_name(f.source_id)) for f in table.spec().fields] == [
        ("bucket[4]", "id"),
        ("identity", "pt"),
    ]
    assert [str(f.direction) for f in table.sort_order().fields] == ["DESC"]
    props = table.properties
    assert props["write.parquet.compression-codec"] == "snappy"
    assert props["write.target-file-size-bytes"] == str(128 * 1024 * 1024)
    assert props["commit.retry.num-retries"] == "6"
    assert table.metadata.format_version == 2
    assert not writer.plan(df(spark, [], BASE_SCHEMA).schema).changes


def test_an_invalid_partition_spec_is_an_error_never_an_unpartitioned_table(spark, new_writer):
    writer = new_writer(partitioning=["days(name)"])  # name is a string: no days() on it
    with pytest.raises(ConfigError) as err:
        writer.commit(df(spark, [(1, "a", "x", 0)]), marker(0))
    assert err.value.problems[0].code == "BAD_PARTITION"
    assert not writer.exists()


def test_a_table_whose_partition_fields_fail_after_create_is_dropped(spark, new_writer):
    writer = new_writer(partitioning=["bucket(4, id)"])  # on the first column: added after CREATE
    plan = writer.plan(df(spark, [], BASE_SCHEMA).schema)
    broken = dataclasses.replace(plan, add_partition_fields=("bucket(4, `no_such_column`)",))
    with pytest.raises(Exception, match="no_such_column"):
        writer.apply(broken)
    assert not writer.exists()


def test_names_with_hyphens_are_refused_before_anything_happens(spark, files_catalog):
    spec = make_spec().model_copy(update={"name": "orders-v2"})
    with pytest.raises(ConfigError, match="'-'"):
        TableWriter(spark, files_catalog, spec, pipeline_id="shop")


def test_a_table_another_session_dropped_is_created_again_by_the_next_commit(spark, new_writer):
    writer = new_writer()
    writer.commit(df(spark, [(1, "a", "x", 0)]), marker(0))
    other = spark.newSession()  # a catalog of its own: this session's still caches the table
    for row in spark.sql("SET").collect():
        if row.key.startswith(f"spark.sql.catalog.{writer.catalog}"):
            other.conf.set(row.key, row.value)
    other.sql(f"DROP TABLE {writer.quoted}")
    assert spark.catalog.tableExists(writer.table)  # what Spark's cache says, and what the writer must not believe

    with writer.batch():
        assert not writer.exists() and writer.last_commit("orders") is None
        writer.commit(df(spark, [(2, "b", "x", 1)]), marker(1))
    table = files_table(writer)
    assert [r["id"] for r in rows(table)] == [2]
    assert [marker_of(s) for s in summaries(table)] == [("shop", "orders", "1", '{"orders":{"0":2}}')]


def test_a_table_that_fails_to_load_for_another_reason_is_not_taken_for_dropped(spark, new_writer, monkeypatch):
    writer = new_writer()
    writer.commit(df(spark, [(1, "a", "x", 0)]), marker(0))

    def unreachable(self):
        raise RuntimeError("catalog unreachable")

    monkeypatch.setattr(IcebergTable, "refresh", unreachable)
    with pytest.raises(RuntimeError, match="catalog unreachable"):
        writer.exists()
    monkeypatch.undo()
    assert [r["id"] for r in rows(files_table(writer))] == [1]


# -- schema evolution ----------------------------------------------------------------------------
NESTED = "id BIGINT, info STRUCT<city: STRING>, offset BIGINT"
NESTED_PLUS = "id BIGINT, info STRUCT<city: STRING, zip: STRING>, offset BIGINT, note STRING"


def test_add_columns_adds_new_top_level_and_nested_fields(spark, new_writer):
    writer = new_writer(schema_evolution="add_columns")
    writer.commit(df(spark, [(1, ("Oslo",), 0)], NESTED), marker(0))
    writer.commit(df(spark, [(2, ("Rome", "00100"), 1, "new")], NESTED_PLUS), marker(1))
    table = files_table(writer)
    assert table.schema().find_field("info.zip").required is False
    assert rows(table) == [
        {"id": 1, "info": {"city": "Oslo", "zip": None}, "offset": 0, "note": None},
        {"id": 2, "info": {"city": "Rome", "zip": "00100"}, "offset": 1, "note": "new"},
    ]


def test_strict_refuses_a_new_field_and_changes_nothing(spark, new_writer):
    writer = new_writer(schema_evolution="strict")
    writer.commit(df(spark, [(1, ("Oslo",), 0)], NESTED), marker(0))
    with pytest.raises(SchemaMismatchError) as err:
        writer.commit(df(spark, [(2, ("Rome", "00100"), 1, "new")], NESTED_PLUS), marker(1))
    assert err.value.fields == ("info.zip", "note")
    table = files_table(writer)
    assert [f.name for f in table.schema().fields] == ["id", "info", "offset"] and len(table.snapshots()) == 1
    assert writer.last_commit("orders").batch_id == 0


def test_add_columns_refuses_widening_and_full_widens(spark, new_writer):
    narrow = "id BIGINT, qty INT, price FLOAT, offset BIGINT"
    wide = "id BIGINT, qty BIGINT, price DOUBLE, offset BIGINT"
    writer = new_writer(schema_evolution="add_columns")
    writer.commit(df(spark, [(1, 5, 1.5, 0)], narrow), marker(0))
    with pytest.raises(SchemaMismatchError) as err:
        writer.commit(df(spark, [(2, 2**40, 2.25, 1)], wide), marker(1))
    assert err.value.fields == ("qty", "price")
    assert "schema_evolution: full" in str(err.value)

    full = TableWriter(
        spark, writer.catalog, writer.spec.model_copy(update={"schema_evolution": "full"}), pipeline_id="shop"
    )
    full.commit(df(spark, [(2, 2**40, 2.25, 1)], wide), marker(1))
    table = files_table(full)
    assert [str(f.field_type) for f in table.schema().fields] == ["long", "long", "double", "long"]
    assert rows(table) == [
        {"id": 1, "qty": 5, "price": 1.5, "offset": 0},
        {"id": 2, "qty": 2**40, "price": 2.25, "offset": 1},
    ]


def test_full_relaxes_a_required_column(spark, new_writer):
    strict = new_writer(schema_evolution="add_columns")
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {strict.catalog}.{strict.spec.namespace}")
    spark.sql(f"CREATE TABLE {strict.table} (id BIGINT NOT NULL, name STRING NOT NULL, offset BIGINT) USING iceberg")
    batch = df(spark, [(1, None, 0)], "id BIGINT, name STRING, offset BIGINT")  # nullable name
    with pytest.raises(SchemaMismatchError) as err:
        strict.commit(batch, marker(0))
    assert err.value.fields == ("id", "name")  # a DataFrame's columns are nullable unless declared otherwise
    full = TableWriter(
        spark, strict.catalog, strict.spec.model_copy(update={"schema_evolution": "full"}), pipeline_id="shop"
    )
    full.commit(df(spark, [(1, None, "x", 0)]), marker(0))
    table = files_table(full)
    assert [(f.name, f.required) for f in table.schema().fields] == [
        ("id", False),
        ("name", False),
        ("offset", False),
        ("pt", False),
    ]
    assert rows(table) == [{"id": 1, "name": None, "offset": 0, "pt": "x"}]


# -- commit modes and markers --------------------------------------------------------------------
def test_append_writes_rows_with_the_marker_and_drops_internal_columns(spark, new_writer):
    writer = new_writer()
    schema = BASE_SCHEMA + ", _ki_tombstone BOOLEAN, _ki_source STRING"
    first = writer.commit(df(spark, [(1, "a", "x", 0, False, "s"), (2, "b", "x", 1, False, "s")], schema), marker(0))
    second = writer.commit(df(spark, [(3, "c", "y", 2, False, "s")], schema), marker(1, orders=3))
    assert (first.records_written, first.skipped, first.operation) == (2, False, "append")
    assert first.files_added >= 1 and first.bytes_added > 0 and first.latency_ms > 0 and first.retries == 0
    table = files_table(writer)
    assert [f.name for f in table.schema().fields] == ["id", "name", "pt", "offset"]
    assert [r["id"] for r in rows(table)] == [1, 2, 3]
    assert [marker_of(s) for s in summaries(table)] == [
        ("shop", "orders", "0", '{"orders":{"0":1}}'),
        ("shop", "orders", "1", '{"orders":{"0":3}}'),
    ]
    last = writer.last_commit("orders")
    assert (last.batch_id, last.offsets, last.snapshot_id) == (1, {"orders": {0: 3}}, second.snapshot_id)


def test_overwrite_replaces_only_the_partitions_the_batch_touches(spark, new_writer):
    writer = new_writer(commit_mode="overwrite", partitioning=["pt"])
    writer.commit(df(spark, [(1, "a", "p1", 0), (2, "b", "p2", 1), (3, "c", "p2", 2)]), marker(0))
    result = writer.commit(df(spark, [(4, "d", "p2", 3), (5, "e", "p3", 4)]), marker(1))
    table = files_table(writer)
    assert [(r["id"], r["pt"]) for r in rows(table)] == [(1, "p1"), (4, "p2"), (5, "p3")]
    assert (result.operation, result.records_written, result.records_deleted) == ("overwrite", 2, 2)
    assert marker_of(summaries(table)[-1])[2] == "1"


def test_upsert_keeps_the_newest_version_per_key_and_honours_tombstones(spark, new_writer):
    writer = new_writer(commit_mode="upsert", key_fields=["id"], partitioning=["bucket(4, id)"])
    schema = BASE_SCHEMA + ", _ki_tombstone BOOLEAN"
    # One batch with duplicates: the highest offset per key wins.
    writer.commit(
        df(
            spark,
            [
                (1, "a1", "x", 10, False),
                (1, "a3", "x", 12, False),
                (1, "a2", "x", 11, False),
                (2, "b1", "x", 13, False),
                (3, "c1", "x", 14, None),
            ],
            schema,
        ),
        marker(0),
    )
    # Late, older versions of 1 and 2 arrive after newer ones; 3 is deleted; 4 is new; 5 is a tombstone
    # for a key never seen (nothing to delete, never inserted); 2's tombstone is older than its row.
    result = writer.commit(
        df(
            spark,
            [
                (1, "a0", "x", 9, False),
                (2, "b-old", "x", 5, False),
                (2, None, None, 6, True),
                (3, None, None, 20, True),
                (4, "d1", "x", 21, False),
                (5, None, None, 22, True),
            ],
            schema,
        ),
        marker(1),
    )
    table = files_table(writer)
    assert [(r["id"], r["name"], r["offset"]) for r in rows(table)] == [(1, "a3", 12), (2, "b1", 13), (4, "d1", 21)]
    assert result.operation in ("overwrite", "delete") and not result.skipped
    # An equal sequence re-applies (idempotent); a newer one updates.
    writer.commit(df(spark, [(1, "a3", "x", 12, False), (4, "d2", "x", 30, False)], schema), marker(2))
    assert [(r["id"], r["name"]) for r in rows(files_table(writer))] == [(1, "a3"), (2, "b1"), (4, "d2")]


def test_upsert_by_a_declared_sequence_field(spark, new_writer):
    schema = "id BIGINT, version INT, name STRING, offset BIGINT"
    writer = new_writer(commit_mode="upsert", key_fields=["id"], sequence_field="version")
    writer.commit(df(spark, [(1, 3, "v3", 0), (1, 1, "v1", 1)], schema), marker(0))
    writer.commit(df(spark, [(1, 2, "v2", 2)], schema), marker(1))
    assert [(r["version"], r["name"]) for r in rows(files_table(writer))] == [(3, "v3")]


def test_the_upsert_merge_shuffles_the_batch_once(spark, new_writer):
    """The newest-per-key window already partitions the batch by its keys; the MERGE's join reuses that.

    Matching keys with ``<=>`` made Spark join on ``coalesce(k, 0), isnull(k)`` and shuffle the batch a
    second time (the MERGE took 1.6-2.3 s a 100,000-record batch against 1.4-1.9 s; benchmarks/fixes.md,
    stop 52).
    """
    from kafka_iceberg.write import commit as modes

    writer = new_writer(commit_mode="upsert", key_fields=["id"])
    schema = BASE_SCHEMA + ", _ki_tombstone BOOLEAN"
    writer.commit(df(spark, [(1, "a", "x", 10, False)], schema), marker(0))
    table = spark.table(writer.table).schema
    batch = df(spark, [(1, "b", "x", 11, False), (2, "c", "x", 12, False), (2, None, None, 13, True)], schema)
    modes.upsert_source(batch, table, ["id"], "offset").createOrReplaceTempView("upsert_batch")
    plan = spark.sql(
        "EXPLAIN FORMATTED " + modes.merge_sql(writer.table, "upsert_batch", table.names, ["id"], "offset")
    )
    shuffles = [line for line in plan.collect()[0][0].splitlines() if "ENSURE_REQUIREMENTS" in line]
    assert len(shuffles) == 2, shuffles  # the table's rows and the batch, each once, both on the key
    assert all(line.startswith("Arguments: hashpartitioning(id#") for line in shuffles), shuffles


def test_the_same_batch_committed_twice_leaves_one_copy(spark, new_writer):
    writer = new_writer()
    batch = df(spark, [(1, "a", "x", 0), (2, "b", "x", 1)])
    first = writer.commit(batch, marker(0))
    again = writer.commit(batch, marker(0))
    older = writer.commit(batch, marker(0).__class__(stream="orders", batch_id=0, offsets={}))
    assert not first.skipped and again.skipped and older.skipped
    assert again.snapshot_id == first.snapshot_id and again.records_written == 0
    table = files_table(writer)
    assert len(rows(table)) == 2 and len(table.snapshots()) == 1


def test_last_commit_walks_past_other_streams_and_foreign_snapshots(spark, new_writer):
    writer = new_writer()
    writer.commit(df(spark, [(1, "a", "x", 0)]), marker(4, orders=5))
    other = TableWriter(spark, writer.catalog, writer.spec, pipeline_id="billing")
    other.commit(df(spark, [(2, "b", "x", 0)]), marker(0, orders=1))
    writer.commit(df(spark, [(3, "c", "x", 0)]), marker(0, stream="refunds", refunds=1))
    spark.sql(f"INSERT INTO {writer.table} VALUES (9, 'manual', 'x', 0)")  # no marker
    assert writer.last_commit("orders").batch_id == 4
    assert writer.last_commit("orders").offsets == {"orders": {0: 5}}
    assert writer.last_commit("refunds").batch_id == 0
    assert other.last_commit("orders").batch_id == 0 and other.last_commit("refunds") is None
    assert writer.commit(df(spark, [(1, "a", "x", 0)]), marker(4)).skipped


def test_the_table_is_read_once_until_its_schema_spec_or_properties_change_by_anyone(spark, new_writer, monkeypatch):
    """The writer reads schema, spec, sort order and properties through py4j once, not again at each
    commit's new metadata file (each read is many round trips, several times per batch); a change
    made by anyone else shows at the next refresh."""
    from kafka_iceberg.write import jvm as jvm_module

    writer = new_writer()
    writer.apply(writer.plan(df(spark, [], BASE_SCHEMA).schema))
    writer.commit(df(spark, [(1, "a", "x", 0)]), marker(0, orders=1))
    reads = []
    jvm = jvm_module.jvm

    def counted(session):
        reads.append(1)
        return jvm(session)

    monkeypatch.setattr(jvm_module, "jvm", counted)
    for _ in range(3):
        assert [f.name for f in writer.current_schema().fields] == ["id", "name", "pt", "offset"]
        assert not writer.plan(df(spark, [], BASE_SCHEMA).schema).changes
        assert writer.last_commit("orders").batch_id == 0
    assert not reads  # the schema's conversion was made for the commit above
    writer.commit(df(spark, [(3, "c", "x", 0)]), marker(1, orders=2))  # a new metadata file, the same table shape
    assert [f.name for f in writer.current_schema().fields] == ["id", "name", "pt", "offset"]
    assert not reads
    spark.sql(f"ALTER TABLE {writer.table} ADD COLUMN note string")  # another writer
    spark.sql(f"ALTER TABLE {writer.table} SET TBLPROPERTIES ('team'='billing')")
    writer.commit(df(spark, [(2, "b", "x", 0)]), marker(2, orders=3))
    assert [f.name for f in writer.current_schema().fields] == ["id", "name", "pt", "offset", "note"]
    assert writer._iceberg.refresh().properties()["team"] == "billing"
    assert writer.last_commit("orders").batch_id == 2
    assert reads  # the schema converted again
    read = len(reads)
    for _ in range(3):
        assert writer.current_schema().fields[-1].name == "note" and writer.last_commit("orders").batch_id == 2
    assert len(reads) == read


def test_the_arrow_writers_target_is_serialized_once_and_again_when_the_table_changes(spark, new_writer, monkeypatch):
    """Each batch's tasks get the table's schema, spec and properties without its growing history;
    serializing the metadata (tens of ms, growing with the snapshots) happens only when those change."""
    import json

    import kafka_iceberg.write.writer as writer_module

    writer = new_writer(write={"engine": "arrow"})
    built = []
    real = writer_module.file_target

    def counted(*args):
        built.append(real(*args))
        return built[-1]

    monkeypatch.setattr(writer_module, "file_target", counted)
    for batch in range(3):
        writer.commit(df(spark, [(batch, "a", "x", batch)]), marker(batch, orders=batch + 1))
    assert len(built) == 1  # three commits, three metadata files, one target
    metadata = json.loads(built[0].metadata_json)
    assert "snapshots" not in metadata and metadata["current-snapshot-id"] == -1
    assert [f["name"] for f in metadata["schemas"][0]["fields"]] == ["id", "name", "pt", "offset"]
    # Another writer changes a property the spec leaves alone (the spec's own ones are set back).
    spark.sql(f"ALTER TABLE {writer.table} SET TBLPROPERTIES ('write.metadata.metrics.default'='counts')")
    writer.commit(df(spark, [(9, "b", "x", 9)]), marker(3, orders=10))
    assert len(built) == 2
    table = files_table(writer)
    with_bounds = sorted(bool(f["lower_bounds"]) for f in table.inspect.files().to_pylist())
    assert with_bounds == [False, True, True, True]  # the change applies from the next batch on
    assert [r["id"] for r in rows(table)] == [0, 1, 2, 9]


def test_a_stale_marker_copied_by_maintenance_does_not_roll_offsets_back(spark, new_writer):
    from kafka_iceberg.write.jvm import with_commit_properties

    writer = new_writer()
    writer.commit(df(spark, [(1, "a", "x", 0)]), marker(0))
    stale = dict(marker(0).summary(writer.pipeline_id), **{"kafka-iceberg.copied-from": "1"})
    writer.commit(df(spark, [(2, "b", "x", 1)]), marker(1))
    # A compaction that read the marker before batch 1 landed commits a copy of batch 0's marker on top.
    empty = spark.createDataFrame([], writer.current_schema())
    with_commit_properties(spark, stale, lambda: empty.writeTo(writer.table).append())
    last = writer.last_commit("orders")
    assert last.batch_id == 1 and last.offsets == {"orders": {0: 2}}
    assert writer.commit(df(spark, [(2, "b", "x", 1)]), marker(1)).skipped


@pytest.mark.parametrize("mode", ["append", "overwrite", "upsert"])
def test_an_empty_batch_still_commits_its_marker(spark, new_writer, mode):
    extra = {"key_fields": ["id"]} if mode == "upsert" else {"partitioning": ["pt"]}
    writer = new_writer(commit_mode=mode, **extra)
    writer.commit(df(spark, [(1, "a", "x", 0)]), marker(0))
    # Every record of batch 1 was bad: nothing to write, but offsets must still advance to 7.
    result = writer.commit(df(spark, []), marker(1, orders=7))
    assert not result.skipped and result.records_written == 0 and result.files_added == 0
    assert writer.last_commit("orders").offsets == {"orders": {0: 7}}
    assert [r["id"] for r in rows(files_table(writer))] == [1]


@pytest.mark.parametrize("engine", ["spark", "arrow"])
def test_a_commit_conflict_is_retried(spark, new_writer, monkeypatch, engine):
    import kafka_iceberg.write.writer as writer_module

    writer = new_writer(write={"engine": engine})
    waits: list[float] = []
    writer._sleep = waits.append
    calls = []
    if engine == "spark":
        real = writer._write

        def flaky(rows_, schema):
            calls.append(1)
            if len(calls) == 1:
                raise conflict("metadata changed underneath")
            real(rows_, schema)

        monkeypatch.setattr(writer, "_write", flaky)
    else:  # the Arrow writer's files are written once; the Java API append of them is retried
        real_append = writer_module.append_files

        def flaky_append(*args, **kwargs):
            calls.append(1)
            if len(calls) == 1:
                raise conflict("metadata changed underneath")
            real_append(*args, **kwargs)

        monkeypatch.setattr(writer_module, "append_files", flaky_append)
    result = writer.commit(df(spark, [(1, "a", "x", 0)]), marker(0))
    assert result.retries == 1 and len(waits) == 1 and 0.1 <= waits[0] <= 0.11
    assert len(rows(files_table(writer))) == 1


def java_failure(spark, exception: str, message: str):
    """A Py4JJavaError around a live Java ``exception``, as py4j raises one that Java threw."""
    from py4j.protocol import Py4JJavaError

    view = spark.sparkContext._jvm
    no_args = spark.sparkContext._gateway.new_array(view.java.lang.Object, 0)
    java = getattr(view.org.apache.iceberg.exceptions, exception)(message, no_args)
    return Py4JJavaError("An error occurred while calling o1.commit.\n", java)


# A filter that fails a frame's second task once its first has written its files and ended (Spark
# then aborts the job): the first sleeps no time, the second 2 s before raising.
SECOND_TASK_FAILS_LATE = (
    "CASE WHEN spark_partition_id() = 1 THEN raise_error(concat('second task failed', "
    "coalesce(java_method('java.lang.Thread', 'sleep', 2000L), ''))) IS NULL ELSE true END"
)


def data_files_in(writer) -> list[str]:
    """The Parquet files under the table's data folder, read from the disk (the Hadoop catalog's warehouse)."""
    location = IcebergTable(writer.spark, writer.table).refresh().java.location()
    return sorted(p.name for p in Path(location.removeprefix("file:")).joinpath("data").rglob("*.parquet"))


@pytest.mark.parametrize(
    ("exception", "kept"),
    [
        ("CommitFailedException", False),  # Iceberg's CleanableFailure: the commit surely did not land
        ("CommitStateUnknownException", True),  # it may have landed: the files may be the table's
    ],
)
def test_the_arrow_writers_files_are_deleted_only_when_their_commit_surely_did_not_land(
    spark, new_writer, monkeypatch, exception, kept
):
    import kafka_iceberg.write.writer as writer_module

    writer = new_writer(write={"engine": "arrow", "properties": {"commit.retry.num-retries": "1"}})
    writer._sleep = lambda s: None
    writer.commit(df(spark, [(1, "a", "x", 0)]), marker(0))
    committed = data_files_in(writer)

    def refused(*args, **kwargs):
        raise java_failure(spark, exception, "refused by the test")

    monkeypatch.setattr(writer_module, "append_files", refused)
    with pytest.raises(CommitConflictError, match=exception):
        writer.commit(df(spark, [(2, "b", "y", 0), (3, "c", "z", 1)]), marker(1))
    monkeypatch.undo()
    left = data_files_in(writer)
    assert set(committed) <= set(left)  # the committed batch's files are never touched
    assert (len(left) > len(committed)) is kept
    # The batch runs again from its source, with files of its own, and the table is whole.
    writer.commit(df(spark, [(2, "b", "y", 0), (3, "c", "z", 1)]), marker(1))
    assert [r["id"] for r in rows(files_table(writer))] == [1, 2, 3]


def test_the_arrow_writers_files_of_a_batch_that_fails_before_its_commit_are_deleted(spark, new_writer):
    writer = new_writer(write={"engine": "arrow"})
    writer.commit(df(spark, [(1, "a", "x", 0)]), marker(0))
    committed = data_files_in(writer)
    with pytest.raises(RuntimeError, match="routing failed"), writer.batch():
        written = writer.write_rows(df(spark, [(2, "b", "y", 0)]))
        assert len(data_files_in(writer)) == len(committed) + len(written)
        raise RuntimeError("routing failed")  # as a bad record under on_error: fail, before the commit
    assert data_files_in(writer) == committed
    assert [r["id"] for r in rows(files_table(writer))] == [1]


def test_the_files_of_arrow_tasks_that_succeeded_in_a_job_that_failed_are_deleted(spark, new_writer):
    # The driver never sees a failed job's results: only the ledger (a Spark accumulator, which takes
    # the updates of tasks that succeeded) names the files the job's other tasks wrote.
    writer = new_writer(write={"engine": "arrow"})
    writer.commit(df(spark, [(1, "a", "x", 0)]), marker(0))
    committed = data_files_in(writer)
    two_tasks = spark.createDataFrame(
        spark.sparkContext.parallelize([(2, "b", "y", 1), (3, "c", "y", 2)], 2), BASE_SCHEMA
    )
    with pytest.raises(Exception, match="second task failed"), writer.batch():
        writer.write_rows(two_tasks.where(SECOND_TASK_FAILS_LATE))
    assert data_files_in(writer) == committed
    assert [r["id"] for r in rows(files_table(writer))] == [1]


@pytest.mark.parametrize("store", ["local disk", "object store"])  # Hadoop's FileIO; pyarrow's S3 (REST catalog)
def test_an_arrow_task_attempt_that_fails_after_writing_deletes_its_files(spark, request, store):
    # As when Spark stops reading a task's output (the job failed elsewhere, the executor is told to
    # stop): a failed attempt's accumulator updates never reach the driver, so it deletes its own files.
    import pyarrow as pa

    from kafka_iceberg.write.arrow_files import file_target, write_files
    from tests.support.store import files_under

    if store == "local disk":
        writer = request.getfixturevalue("new_writer")(write={"engine": "arrow"})
    else:
        lake = request.getfixturevalue("lake")
        spec = make_spec(namespace=lake.new_namespace("attempt"), write={"engine": "arrow"})
        writer = TableWriter(spark, lake.catalog, spec, pipeline_id="shop")

    def listed() -> list[str]:
        if store == "local disk":
            return data_files_in(writer)
        location = IcebergTable(spark, writer.table).refresh().java.location()
        return sorted(path.rsplit("/", 1)[1] for path in files_under(lake.status, f"{location}/data/"))

    writer.commit(df(spark, [(1, "a", "x", 0)]), marker(0))
    committed = listed()
    target = file_target(spark, IcebergTable(spark, writer.table).refresh().java)
    batch = pa.RecordBatch.from_pydict(
        {"id": [2, 3], "name": ["b", "c"], "pt": ["y", "z"], "offset": [1, 2]},
        schema=pa.schema([("id", pa.int64()), ("name", pa.string()), ("pt", pa.string()), ("offset", pa.int64())]),
    )
    task = write_files(iter([batch]), target)
    written = next(task).to_pylist()
    assert len(committed) == 1 and len(listed()) == len(committed) + len(written)
    with pytest.raises(ConnectionResetError):
        task.throw(ConnectionResetError("the JVM closed the task's socket"))
    assert listed() == committed
    read = files_table(writer) if store == "local disk" else lake.pyiceberg().load_table(writer.spec.identifier)
    assert [r["id"] for r in rows(read)] == [1]


@pytest.mark.parametrize("version", ["1", "3"])  # 2 is what the writer creates, and every other test's
def test_the_arrow_writer_appends_to_a_table_of_another_format_version(spark, new_writer, version):
    # A table created elsewhere: format 1 (older tables), 3 (row lineage, which Java assigns at the commit).
    writer = new_writer(write={"engine": "arrow"}, partitioning=["bucket(4, id)", "pt"])
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {writer.catalog}.{writer.spec.namespace}")
    spark.sql(
        f"CREATE TABLE {writer.table} ({BASE_SCHEMA}) USING iceberg "
        f"PARTITIONED BY (bucket(4, id), pt) TBLPROPERTIES ('format-version'='{version}')"
    )
    writer.commit(df(spark, [(1, "a", "x", 0), (2, None, None, 1)]), marker(0))
    writer.commit(df(spark, [(3, "c", "x", 0)]), marker(1, orders=3))
    table = files_table(writer)
    assert table.metadata.format_version == int(version)
    assert [r["id"] for r in rows(table)] == [1, 2, 3]
    assert sorted(r.id for r in spark.table(writer.table).select("id").collect()) == [1, 2, 3]
    assert writer.last_commit("orders").offsets == {"orders": {0: 3}}
    if version == "3":  # each row got its lineage id from Java's commit
        row_ids = spark.sql(f"SELECT _row_id FROM {writer.table}").collect()
        assert sorted(r[0] for r in row_ids) == [0, 1, 2]


def test_a_jdbc_catalog_takes_the_same_writer(spark, tmp_path):
    """JDBC catalog rendering works end to end; pyiceberg's SQL catalog reads the same SQLite file."""
    from pyiceberg.catalog.sql import SqlCatalog

    from kafka_iceberg.catalogs import JdbcCatalog, render
    from kafka_iceberg.refs import Resolver
    from kafka_iceberg.session import attach_catalogs

    db, warehouse = tmp_path / "catalog.db", tmp_path / "wh"
    profile = JdbcCatalog(type="jdbc", uri=f"jdbc:sqlite:{db}", warehouse=f"file://{warehouse}")
    attach_catalogs(spark, [render("jdbc_wh", profile)], Resolver(env={}))
    writer = TableWriter(spark, "jdbc_wh", make_spec(namespace="sales", name="orders"), pipeline_id="shop")
    writer.commit(df(spark, [(1, "a", "x", 0)]), marker(0))
    table = SqlCatalog("jdbc_wh", uri=f"sqlite:///{db}", warehouse=f"file://{warehouse}").load_table("sales.orders")
    assert rows(table) == [{"id": 1, "name": "a", "pt": "x", "offset": 0}]
    assert table.current_snapshot().summary["kafka-iceberg.batch-id"] == "0"
