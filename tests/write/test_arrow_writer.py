"""The Arrow writer (``write.engine: arrow``) against Spark's writer: same records, same tables.

Both tables are read back through pyiceberg, never through the Spark session that wrote them.
"""

from __future__ import annotations

import datetime as dt
import json
import random
from typing import Any

import pytest

from kafka_iceberg.errors import ConfigError
from kafka_iceberg.spec.load import load_pipeline
from kafka_iceberg.write.jvm import IcebergTable
from tests.support.kafka import create_topic, produce
from tests.support.parses import counted_parses
from tests.support.run import run_pipeline, unique
from tests.support.verify import assert_verified
from tests.write.conftest import column_encodings

pytestmark = pytest.mark.integration

WRITERS = ("spark", "arrow")


def orders(n: int) -> list[tuple[str, str]]:
    """Typed, partly null, partly bad records spread over ids and, ten seconds apart, a few hours
    across midnight, so that files hold several records and their bounds are ranges."""
    rng = random.Random(7)
    start = dt.datetime(2026, 1, 5, 22, 30, tzinfo=dt.timezone.utc)
    out = []
    for i in range(n):
        doc: dict[str, Any] = {
            "id": i,
            "amount": round(rng.uniform(-5, 500), 2),
            "city": rng.choice(["Berlin", "Paris", None, "Hangzhou", "São Paulo"]),
            "at": (start + dt.timedelta(seconds=10 * i)).isoformat(),
            "due": (start + dt.timedelta(seconds=10 * i, days=2)).isoformat(),  # its day: a function of `at`
            "price": f"{rng.randint(0, 99999) / 100:.2f}",
            "vip": rng.random() < 0.3,
        }
        if i % 97 == 5:
            doc["id"] = "not a number"  # a bad record: the error topic, identically for both writers
        out.append((str(i), json.dumps(doc)))
    return out


def pipeline(ns: str, topic: str, errors_topic: str) -> str:
    tables = "".join(
        f"""
  - name: orders_{writer}
    namespace: {ns}
    source: {{topics: [{topic}], format: flatten, max_records_per_batch: 400}}
    schema: {{columns: {{id: long, amount: double, city: string, at: timestamp, due: timestamp, price: "decimal(10,2)", vip: boolean}}}}
    schema_evolution: strict
    partition_window: none
    partitioning: [hours(at), days(due), bucket(4, id), city]  # days: a date to Java, days since 1970 to pyiceberg
    errors: {{error_topic: {errors_topic}_{writer}}}
    write: {{engine: {writer}}}
"""
        for writer in WRITERS
    )
    return f"pipeline: writers\ncatalog: lake\ntables:{tables}"


def files_of(table: Any) -> list[dict[str, Any]]:
    """The table's data files, with their metric maps as dicts keyed by field id."""
    files: list[dict[str, Any]] = table.inspect.files().to_pylist()
    maps = ("value_counts", "null_value_counts", "lower_bounds", "upper_bounds", "column_sizes")
    return [{**f, **{m: dict(f[m] or []) for m in maps}} for f in files]


def footer_metrics(spark: Any, java_table: Any, f: dict[str, Any]) -> dict[str, dict[int, Any]]:
    """The metrics Iceberg's Java reads from data file ``f``'s footer with the table's metrics config."""
    iceberg = spark._jvm.org.apache.iceberg
    source = java_table.io().newInputFile(f["file_path"], f["file_size_in_bytes"])
    m = iceberg.parquet.ParquetUtil.fileMetrics(source, iceberg.MetricsConfig.forTable(java_table))

    def bounds(java: Any) -> dict[int, bytes]:
        return {int(k): bytes(iceberg.util.ByteBuffers.toByteArray(v)) for k, v in dict(java or {}).items()}

    counts = {name: getattr(m, name)() for name in ("valueCounts", "nullValueCounts", "columnSizes")}
    out = {name: {int(k): int(v) for k, v in dict(java or {}).items()} for name, java in counts.items()}
    return {
        "value_counts": out["valueCounts"],
        "null_value_counts": out["nullValueCounts"],
        "column_sizes": out["columnSizes"],
        "lower_bounds": bounds(m.lowerBounds()),
        "upper_bounds": bounds(m.upperBounds()),
    }


def assert_manifests_hold_footer_metrics(spark: Any, java_table: Any, files: list[dict[str, Any]]) -> None:
    """Each file's metrics in the manifests are what Iceberg's Java reads from its footer."""
    assert files
    for f in files:
        expected = footer_metrics(spark, java_table, f)
        assert {m: f[m] for m in expected} == expected, f["file_path"]


def test_both_writers_leave_the_same_table(tmp_path, lake, stack):
    ns, topic, errors = unique("writers"), unique("orders"), unique("errors")
    produce(stack.kafka_bootstrap, topic, orders(1000), partition=0)
    ran = run_pipeline(tmp_path, pipeline(ns, topic, errors))
    catalog = lake.pyiceberg()
    spark_t, arrow_t = (catalog.load_table(f"{ns}.orders_{w}") for w in WRITERS)

    # Rows, value for value.
    def rows(table: Any) -> list[dict[str, Any]]:
        return sorted(table.scan().to_arrow().to_pylist(), key=lambda r: r["offset"])

    spark_rows, arrow_rows = rows(spark_t), rows(arrow_t)
    assert len(spark_rows) == 1000 - len([i for i in range(1000) if i % 97 == 5])
    assert arrow_rows == spark_rows

    # Partition values of the data files, and the files' column statistics in the manifests.
    spark_files, arrow_files = files_of(spark_t), files_of(arrow_t)
    assert {json.dumps(f["partition"], sort_keys=True, default=str) for f in arrow_files} == {
        json.dumps(f["partition"], sort_keys=True, default=str) for f in spark_files
    }
    field_ids = {f.field_id for f in arrow_t.schema().fields}
    # What the records were spread for: hours and days across midnight, files of many records.
    partitions = [f["partition"] for f in arrow_files]
    assert len({p["at_hour"] for p in partitions}) >= 3 and len({p["due_day"] for p in partitions}) == 2
    assert max(f["record_count"] for f in arrow_files) > 1
    for f in arrow_files:
        assert set(f["value_counts"]) == field_ids, f["file_path"]
        # Each file's own metrics (its footer, read beside the batch's other files'): every value counted once.
        assert set(f["value_counts"].values()) == {f["record_count"]}, f["file_path"]
        assert set(f["null_value_counts"]) == field_ids
        assert set(f["lower_bounds"]) and set(f["upper_bounds"]), f["file_path"]
        assert f["file_path"].startswith(arrow_t.location()) and f["file_format"] == "PARQUET"
    # The tasks' metrics (pyiceberg's) are Iceberg's Java's, bounds included: hours, days, bucket,
    # decimal, double, boolean and null-holding string columns.
    java_table = IcebergTable(lake.spark, f"{lake.catalog}.{ns}.orders_arrow").refresh().java
    assert_manifests_hold_footer_metrics(lake.spark, java_table, arrow_files)
    for stat in ("value_counts", "null_value_counts"):
        totals = [{fid: sum(f[stat][fid] for f in files) for fid in field_ids} for files in (spark_files, arrow_files)]
        assert totals[0] == totals[1], stat
    # Files per commit: at most the partitions the commit touched, times the 2 cores' tasks.
    entries = arrow_t.inspect.entries().to_pylist()
    for snapshot in {e["snapshot_id"] for e in entries}:
        added = [e for e in entries if e["snapshot_id"] == snapshot]
        touched = {json.dumps(e["data_file"]["partition"], sort_keys=True, default=str) for e in added}
        assert len(added) <= len(touched) * 2

    # Each batch is one snapshot carrying the exactly-once marker, for both writers.
    for table in (spark_t, arrow_t):
        batch_ids = [s.summary.get("kafka-iceberg.batch-id") for s in table.snapshots()]
        assert None not in batch_ids and len(batch_ids) >= 3  # 1000 records, 400 per batch
        assert [int(b) for b in batch_ids] == sorted({int(b) for b in batch_ids})
    by_writer = {w: [r for r in ran.reports if r.table.endswith(f"orders_{w}")] for w in WRITERS}
    assert [r.records_written for r in by_writer["arrow"]] == [r.records_written for r in by_writer["spark"]]
    assert [r.records_failed for r in by_writer["arrow"]] == [r.records_failed for r in by_writer["spark"]]
    assert sum(r.files_created for r in by_writer["arrow"]) == len(arrow_files)
    assert_verified(tmp_path / "pipelines" / "p.yml")


def test_the_arrow_writer_is_refused_where_it_does_not_apply(tmp_path):
    path = tmp_path / "p.yml"
    path.write_text(
        """
pipeline: p
tables:
  - name: t
    namespace: n
    source: {topics: [t], format: flatten}
    schema: {columns: {id: long}}
    commit_mode: upsert
    key_fields: [id]
    write: {engine: arrow}
"""
    )
    with pytest.raises(ConfigError) as err:
        load_pipeline(path)
    (problem,) = [p for p in err.value.problems if p.key_path == "tables[0].write.engine"]
    assert "commit_mode upsert" in problem.expected and "spark or auto" in problem.expected


@pytest.mark.parametrize(
    ("table", "engine"),
    [
        ({}, "arrow"),  # flatten, declared columns, append: the single pass
        ({"source": {"topics": ["t"], "format": "json"}, "schema": None}, "arrow"),
        ({"source": {"topics": ["t"], "format": "text"}, "schema": None}, "arrow"),  # faster in 4 runs of 5
        ({"source": {"topics": ["t"], "format": "binary"}, "schema": None}, "arrow"),
        ({"source": {"topics": ["t"], "format": "binary"}, "schema": None, "partitioning": ["key"]}, "spark"),
        ({"commit_mode": "upsert", "key_fields": ["id"]}, "spark"),
        ({"commit_mode": "overwrite", "partitioning": ["city"]}, "arrow"),  # replaces the partitions it wrote
        ({"transform": "tests.run.test_batch:odd_ids_only"}, "spark"),
        ({"partitioning": ["hours(at)", "bucket(4, id)", "city", "pt"]}, "arrow"),
        ({"partitioning": ["at"]}, "spark"),  # identity on a timestamp: Java takes no string for it
        ({"partitioning": ["timestamp"]}, "spark"),  # ... nor for Kafka's timestamp
        ({"write": {"engine": "spark"}}, "spark"),
        ({"source": {"topics": ["t"], "format": "avro"}, "schema": None}, "arrow"),  # the JVM decodes first
        ({"source": {"topics": ["t"], "format": "avro", "include_headers": True}, "schema": None}, "spark"),
        ({"source": {"topics": ["t"], "format": "avro", "envelope": "debezium"}, "schema": None}, "spark"),
        ({"source": {"topics": ["t"], "format": "protobuf"}, "schema": None}, "spark"),  # not measured
        ({"source": {"topics": ["t"], "format": "json", "envelope": "debezium"}, "schema": None}, "spark"),
    ],
)
def test_auto_takes_the_arrow_writer_only_where_its_single_pass_applies_and_was_measured_faster(table, engine):
    from kafka_iceberg.spec.model import TableSpec
    from kafka_iceberg.write.arrow_files import write_engine

    spec = TableSpec.model_validate(
        {
            "name": "t",
            "namespace": "n",
            "source": {"topics": ["t"], "format": "flatten"},
            "schema": {"columns": {"id": "long", "at": "timestamp", "city": "string"}},
            "schema_evolution": "strict",
        }
        | table
    )
    assert write_engine(spec) == engine


def test_both_writers_overwrite_exactly_the_partitions_each_batch_holds_rows_for(tmp_path, lake, stack):
    # Three batches of 100: the third all bad, so it replaces nothing (Spark skips a dynamic
    # overwrite of no rows) and only carries its marker.
    ns, topic = unique("overwrite"), unique("cities")
    docs = [json.loads(v) for _, v in orders(200)]
    for doc in docs[100:]:  # Hangzhou only in the first batch: its partition is never replaced
        doc["city"] = "Paris" if doc["city"] == "Hangzhou" else doc["city"]
    records = [(str(i), json.dumps(doc)) for i, doc in enumerate(docs)]
    records += [(str(i), '{"id": "bad"}') for i in range(200, 300)]
    produce(stack.kafka_bootstrap, topic, records, partition=0)
    tables = "".join(
        f"""
  - name: {name}
    namespace: {ns}
    source: {{topics: [{topic}], format: flatten, max_records_per_batch: 100}}
    schema: {{columns: {{id: long, amount: double, city: string, at: timestamp, due: timestamp, price: "decimal(10,2)", vip: boolean}}}}
    schema_evolution: strict
    partition_window: none
    commit_mode: overwrite
    partitioning: {partitioning}
    errors: {{skip_error: true}}
    write: {{engine: {writer}}}
"""
        for name, writer, partitioning in (
            ("by_city_spark", "spark", "[city]"),
            ("by_city_arrow", "arrow", "[city]"),
            ("whole_arrow", "arrow", "[]"),  # unpartitioned: each batch replaces the whole table
        )
    )
    ran = run_pipeline(tmp_path, f"pipeline: overwrites\ncatalog: lake\ntables:{tables}")
    catalog = lake.pyiceberg()
    by_city_spark, by_city_arrow, whole_arrow = (
        catalog.load_table(f"{ns}.{n}") for n in ("by_city_spark", "by_city_arrow", "whole_arrow")
    )
    reports = [r for r in ran.reports if r.table.endswith("by_city_arrow")]
    assert [r.records_in for r in reports] == [100, 100, 100] and reports[2].records_written == 0

    def rows(table: Any) -> list[dict[str, Any]]:
        return sorted(table.scan().to_arrow().to_pylist(), key=lambda r: r["offset"])

    # Each city holds the good rows of the last batch that had any for it; a city only the first
    # batch had keeps that batch's rows.
    good = [(i, json.loads(v)) for i, (_, v) in enumerate(records) if isinstance(json.loads(v)["id"], int)]
    last_batch = {doc["city"]: i // 100 for i, doc in good}
    expected = sorted(i for i, doc in good if i // 100 == last_batch[doc["city"]])
    assert last_batch["Hangzhou"] == 0 and last_batch["Paris"] == 1
    arrow_rows = rows(by_city_arrow)
    assert [r["offset"] for r in arrow_rows] == expected
    assert arrow_rows == rows(by_city_spark)  # value for value
    assert [r["offset"] for r in rows(whole_arrow)] == [i for i, _ in good if i // 100 == 1]

    # One snapshot per batch, each with the marker: two overwrites, then the empty batch's append.
    for table in (by_city_spark, by_city_arrow):
        snapshots = table.snapshots()
        assert [s.summary.get("kafka-iceberg.batch-id") for s in snapshots] == ["0", "1", "2"]
        assert [s.summary.operation.value for s in snapshots] == ["overwrite", "overwrite", "append"]
    assert_verified(tmp_path / "pipelines" / "p.yml")


@pytest.mark.parametrize(
    ("columns", "properties", "from_tasks"),
    [
        (3, {}, True),
        (3, {"write.metadata.metrics.default": "counts"}, True),  # no bounds, as Java
        (3, {"write.metadata.metrics.column.c1": "none"}, True),  # c1 not even its size, as Java
        (101, {}, False),  # Java's metrics for the first 100 columns only: read from the footers
        (101, {"write.metadata.metrics.default": "truncate(16)"}, True),  # every column, as pyiceberg
    ],
)
def test_the_commit_keeps_the_metrics_java_would_under_the_tables_metrics_config(
    spark, files_catalog, columns, properties, from_tasks
):
    import uuid

    import pyarrow as pa
    from pyiceberg.table import StaticTable

    from kafka_iceberg.write.arrow_files import append_files, driver_files, file_target

    name = f"{files_catalog}.metrics_{uuid.uuid4().hex[:8]}.t"
    props = "".join(f", '{k}' = '{v}'" for k, v in properties.items())
    ddl = ", ".join(f"c{i} {'string' if i % 2 else 'bigint'}" for i in range(columns))
    spark.sql(f"CREATE TABLE {name} ({ddl}) USING iceberg TBLPROPERTIES ('format-version' = '2'{props})")
    java_table = IcebergTable(spark, name).refresh().java
    n = 50
    data = pa.table({f"c{i}": [f"v{j % 7}" if i % 2 else j for j in range(n)] for i in range(columns)})
    target = file_target(spark, java_table)
    written = driver_files(data, spark.table(name).schema, target)
    assert all(('"value-counts"' in f.content) == from_tasks for f in written)
    append_files(spark, java_table, written, {})

    location = IcebergTable(spark, name).refresh().metadata_location()
    files = files_of(StaticTable.from_metadata(location))
    assert_manifests_hold_footer_metrics(spark, java_table, files)
    (f,) = files
    bounded = set(f["lower_bounds"])
    if columns == 101 and not properties:
        assert bounded == set(range(1, 101))  # the 101st column (field id 101) has none


_WRITE_LOGGING_S3 = """
import json, sys
import pyarrow.fs as fs
fs.initialize_s3(fs.S3LogLevel.Debug)  # the AWS SDK logs each request it sends to stdout
from kafka_iceberg.write.arrow_files import FileTarget, data_files
import pyarrow.parquet as pq
given = json.load(open(sys.argv[1]))
files = data_files(pq.read_table(sys.argv[2]), FileTarget(given["metadata"], given["io"]))
print("FILES " + json.dumps(files))
"""


def test_a_task_writes_each_small_data_file_in_one_request(tmp_path, lake):
    """Opened when first written, a data file smaller than an upload part is one PUT, not a multipart upload.

    Run in a child process: the AWS SDK's request log is set once per process, before S3's first use.
    """
    import re
    import subprocess
    import sys
    from urllib.parse import unquote

    import pyarrow as pa
    import pyarrow.parquet as pq

    from kafka_iceberg.write.arrow_files import WrittenFile, append_files, file_target

    ns = lake.new_namespace("put")
    name = f"{lake.catalog}.{ns}.events"
    lake.spark.sql(f"CREATE TABLE {name} (id bigint, city string) USING iceberg PARTITIONED BY (city)")
    java_table = IcebergTable(lake.spark, name).refresh().java
    target = file_target(lake.spark, java_table)
    (tmp_path / "target.json").write_text(
        json.dumps({"metadata": target.metadata_json, "io": dict(target.io_properties)})
    )
    rows = pa.table(
        {"id": pa.array(range(3000), pa.int64()), "city": [("Berlin", "Paris", None)[i % 3] for i in range(3000)]}
    )
    pq.write_table(rows, tmp_path / "rows.parquet")

    child = subprocess.run(
        [sys.executable, "-c", _WRITE_LOGGING_S3, str(tmp_path / "target.json"), str(tmp_path / "rows.parquet")],
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    files = json.loads(next(line[6:] for line in child.stdout.splitlines() if line.startswith("FILES ")))
    sent = re.findall(r"\(HeaderOut\) (PUT|POST) (\S+)", child.stdout)
    assert len(files) == 3  # one per partition
    # path-style requests: /<bucket>/<key>, the key URL-encoded
    assert sorted(unquote(path) for _, path in sent) == sorted("/" + f["path"].split("://", 1)[1] for f in files)
    assert all(method == "PUT" and "?" not in path for method, path in sent), sent  # no multipart upload

    append_files(lake.spark, java_table, [WrittenFile(**f) for f in files], {})
    read = lake.pyiceberg().load_table(f"{ns}.events").scan().to_arrow()
    assert sorted(read.column("id").to_pylist()) == list(range(3000))


def test_the_arrow_writer_gives_a_dictionary_only_where_it_pays_as_sparks_writer_does(tmp_path, lake, stack):
    """pyarrow would dictionary-encode every column; parquet-mr drops a dictionary that does not pay.

    The Arrow writer decides per file from a sample (``write/dictionaries.py``), so its files hold
    the same rows in about the room Spark's do.
    """
    import io
    import uuid

    ns, topic = unique("dicts"), unique("events")
    rng = random.Random(3)
    docs = [
        {"id": i, "city": rng.choice(["Berlin", "Paris", "Hangzhou"]), "note": uuid.UUID(int=rng.getrandbits(128)).hex}
        for i in range(3000)
    ]
    produce(stack.kafka_bootstrap, topic, [(str(d["id"]), json.dumps(d)) for d in docs], partition=0)
    tables = "".join(
        f"""
  - name: events_{writer}
    namespace: {ns}
    source: {{topics: [{topic}], format: flatten, max_records_per_batch: 5000}}
    schema: {{columns: {{id: long, city: string, note: string}}}}
    partition_window: none
    write: {{engine: {writer}}}
"""
        for writer in WRITERS
    )
    run_pipeline(tmp_path, f"pipeline: dicts\ncatalog: lake\ntables:{tables}")
    catalog = lake.pyiceberg()

    def the_files(writer: str) -> tuple[int, dict[str, set[str]]]:
        """The table's files (a task per core each read half the partition): their size, each column's encodings."""
        table = catalog.load_table(f"{ns}.events_{writer}")
        files = files_of(table)
        assert sum(f["record_count"] for f in files) == 3000
        encodings: dict[str, set[str]] = {}
        for f in files:
            with table.io.new_input(f["file_path"]).open() as stream:
                for column, found in column_encodings(io.BytesIO(stream.read())).items():
                    encodings.setdefault(column, set()).update(found)
        return sum(f["file_size_in_bytes"] for f in files), encodings

    spark_size, spark_encodings = the_files("spark")
    arrow_size, arrow_encodings = the_files("arrow")
    assert "RLE_DICTIONARY" in arrow_encodings["city"] and "PLAIN_DICTIONARY" in spark_encodings["city"]
    for column in ("id", "note", "offset"):  # distinct in every row: plain (Spark's after its first page)
        assert not arrow_encodings[column] & {"RLE_DICTIONARY", "PLAIN_DICTIONARY"}, column
        assert "PLAIN" in spark_encodings[column], column
    assert arrow_size <= spark_size * 1.1, (arrow_size, spark_size)


def arrow_table(ns: str, topic: str, fmt: str, extra: str = "", schema: str = "") -> str:
    """A pipeline of one table, ``<ns>.t``, reading ``topic`` as ``fmt``, written by the Arrow writer."""
    return f"""pipeline: p
catalog: lake
tables:
  - name: t
    namespace: {ns}
    source: {{topics: [{topic}], format: {fmt}, {extra}max_records_per_batch: 1000}}{schema}
    write: {{engine: arrow}}
"""


@pytest.mark.parametrize(
    ("fmt", "extra"),
    [
        ("json", ""),  # decoded and written where parsed (write/certified.py)
        ("text", ""),  # made as sent by the writing tasks (decode/as_sent.py)
        ("binary", ""),  # decoded by Spark, written by the single pass (write/arrow_files.py, sort_and_write)
        ("flatten", "decoder: spark, "),  # the same with checks' columns
    ],
)
def test_a_commit_holds_a_file_per_core_for_each_partition_it_touches_however_many_topic_partitions_it_reads(
    tmp_path, lake, stack, fmt, extra
):
    # Spark's Kafka source reads each topic partition in a task of its own: six of them in one
    # batch would be six files of one partition value where the session has two cores.
    ns, topic = unique("per_core"), unique("spread")
    create_topic(stack.kafka_bootstrap, topic, partitions=6)
    for p in range(6):
        produce(stack.kafka_bootstrap, topic, [(f"k{p}-{i}", json.dumps({"id": p * 100 + i})) for i in range(40)],
                partition=p)  # fmt: skip
    schema = "\n    schema: {columns: {id: long}}" if fmt == "flatten" else ""
    run_pipeline(tmp_path, arrow_table(ns, topic, fmt, extra, schema))
    table = lake.pyiceberg().load_table(f"{ns}.t")
    rows = table.scan().to_arrow()
    assert rows.num_rows == 240 and set(rows.column("partition").to_pylist()) == set(range(6))
    (snapshot,) = table.snapshots()  # one batch read all six partitions
    added = table.inspect.entries().to_pylist()
    touched = {json.dumps(e["data_file"]["partition"], sort_keys=True, default=str) for e in added}
    assert len(touched) == 1 and 1 <= len(added) <= 2, (
        snapshot.summary,
        [e["data_file"]["record_count"] for e in added],
    )
    assert int(snapshot.summary["added-data-files"]) == len(added)


@pytest.mark.parametrize("fmt", ["json", "binary"])
def test_a_topic_of_fewer_partitions_than_cores_is_read_by_a_task_per_core(tmp_path, lake, stack, fmt):
    # Spark's Kafka source reads a topic partition in one task: a one-partition topic would keep
    # one of the session's two cores out of the batch. Its offset range is split between them.
    ns, topic = unique("split_range"), unique("one_partition")
    create_topic(stack.kafka_bootstrap, topic, partitions=1)
    produce(stack.kafka_bootstrap, topic, [(f"k{i}", json.dumps({"id": i})) for i in range(400)])
    run_pipeline(tmp_path, arrow_table(ns, topic, fmt))
    table = lake.pyiceberg().load_table(f"{ns}.t")
    rows = table.scan().to_arrow()
    assert sorted(rows.column("offset").to_pylist()) == list(range(400))
    (snapshot,) = table.snapshots()  # one batch read the whole partition
    counts = sorted(e["data_file"]["record_count"] for e in table.inspect.entries().to_pylist())
    assert counts == [200, 200], snapshot.summary  # two tasks, an even half each


def test_a_task_leaves_a_mistyped_key_out_of_the_parse_of_its_next_batches(spark, monkeypatch):
    """One task's batches (here ``rows_parsed``, the MERGE's task, run in this process): the first
    batch's parse fails once at the key holding a string in an ``int`` column and starts again
    without such records; the next batches start from what it learned and parse once each. Without
    the carry, each batch would fail once more (``decode.arrow``, ``_raise_if_type_changed``)."""
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.types import IntegerType, LongType, StructField, StructType

    from kafka_iceberg.decode.arrow import Layout
    from kafka_iceberg.write.certified import Part, rows_parsed, sorted_schema

    parses = counted_parses(monkeypatch)

    def batch(first: int) -> pa.RecordBatch:
        docs = [json.dumps({"id": i, "qty": "12" if i % 25 == 0 else i}).encode() for i in range(first, first + 500)]
        return pa.RecordBatch.from_pydict({
            "topic": pa.array(["t"] * 500), "partition": pa.array([0] * 500, pa.int32()),
            "offset": pa.array(range(first, first + 500), pa.int64()),
            "timestamp": pa.array([0] * 500, pa.timestamp("us", tz="UTC")),
            "_ki_key": pa.nulls(500, pa.binary()), "_ki_value": pa.array(docs, pa.binary()),
            "_ki_headers": pa.nulls(500, pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))),
        })  # fmt: skip

    layout = Layout(fmt="flatten", source="_ki_value", columns=(("id", "long"), ("qty", "int")))
    rows_of = [StructField("_ki_r0", LongType()), StructField("_ki_r1", IntegerType())]  # spark: Arrow's settings
    schema = to_arrow_schema(StructType([*sorted_schema()[0].fields, *rows_of]))
    out = list(rows_parsed(iter([batch(0), batch(500), batch(1000)]), layout, Part(part="value", pt=None),
                           columns=("id", "qty"), required=(), schema=schema))  # fmt: skip
    rows = pa.Table.from_batches(out).to_pylist()
    assert parses == [False, True, True, True]
    assert sorted(r["_ki_r0"] for r in rows if r["kind"] == "row") == [i for i in range(1500) if i % 25]
    assert sum(r["kind"] in ("error", "left") for r in rows) == 60  # Spark's or the task's errors: not rows
