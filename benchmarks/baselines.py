"""The two baselines every framework figure is divided by, measured in the same run on the same data.

(a) ``spark_baseline``: the minimal job a data engineer would hand-write instead of the framework —
    a Structured Streaming query over the same replay files (one file per micro-batch, the same
    batches as the framework), ``foreachBatch`` doing the parse (``from_json`` / ``from_csv`` /
    ``from_avro`` of the bytes after the 5-byte wire header, with the one writer schema it knows /
    casts) and ``writeTo(table).append()`` (``overwritePartitions()``, or a ``MERGE INTO`` of the
    newest row per key, for the other modes) into a table of the same columns and properties in the
    same REST catalog. No error routing, no expectations, no idempotency marker: bad records become
    NULL columns (``from_json``/``from_csv`` PERMISSIVE) and are written. From the broker
    (``benchmarks/broker.py``) the same job reads the topic with Spark's Kafka source instead.
(c) ``spark_arrow_baseline``: (a) with the parse done by pyarrow inside Spark instead — the same
    ``foreachBatch`` and ``writeTo(table).append()``, the parse a ``mapInArrow`` calling (b)'s
    pyarrow parse on each Arrow batch — over the good messages only (pyarrow's readers fail a whole
    batch on one bad record; the framework's Arrow decoder pays for isolating it, (c) does not).
    Nothing is checked, routed or marked, so (c) is the ceiling of any Arrow decoder that runs
    inside Spark and hands its rows to Spark's Iceberg writer: the framework's Arrow decoder can
    only be slower.
(d) ``arrow_writer_baseline``: (c)'s parse, but each Spark task also writes its rows as Parquet data
    files itself (pyiceberg's writer, the table's schema with field ids, to the table's location
    through its FileIO) and returns only each file's path, size and record count; the driver appends
    all of a batch's files in **one** Iceberg commit through the Java API (``newAppend().appendFile``)
    with a property set in its snapshot summary. Rows never become Spark rows. Good messages only,
    nothing checked or routed: the ceiling of the framework's Arrow writer, which issue 20 asks to
    come within 20 % of.
(b) ``pyarrow_baseline``: pyarrow parsing the same good messages' bytes (``pyarrow.json`` /
    ``pyarrow.csv`` / a UTF-8 cast / fastavro record by record into ``pa.Table.from_pylist``) and
    writing zstd Parquet to local disk, single core, in a child
    process (``python -m benchmarks.baselines pyarrow ...``) so its peak RSS is its own.
"""

from __future__ import annotations

import argparse
import io
import json
import resource
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.datagen import AVRO_COLUMNS, AVRO_SCHEMA, CSV_COLUMNS, FLATTEN_COLUMNS, Dataset

_SPARK_TYPES = {
    "long": "BIGINT",
    "int": "INT",
    "string": "STRING",
    "double": "DOUBLE",
    "boolean": "BOOLEAN",
    "timestamp": "TIMESTAMP",
    "date": "DATE",
    "binary": "BINARY",
}
HEAD = ["topic", "partition", "offset", "timestamp"]  # the Kafka columns (c) and (d) keep
KAFKA_DDL = "key BINARY, value BINARY, topic STRING, partition INT, offset BIGINT, timestamp TIMESTAMP, " + (
    "headers ARRAY<STRUCT<key: STRING, value: BINARY>>"
)


def payload_columns(fmt: str) -> dict[str, str]:
    if fmt == "flatten":
        return dict(FLATTEN_COLUMNS)
    if fmt == "csv":
        return dict(CSV_COLUMNS)
    if fmt == "avro":
        return dict(AVRO_COLUMNS)
    if fmt == "binary":
        return {"key": "binary", "value": "binary"}
    return {"key": "string", "value": "string"}


def _ddl(columns: dict[str, str]) -> str:
    return ", ".join(f"`{n}` {_SPARK_TYPES.get(t, t)}" for n, t in columns.items())  # avro's are DDL already


# -- (a) hand-written Spark ------------------------------------------------------------------------
def parse_batch(df: Any, fmt: str, pt: str) -> Any:
    """The hand-written parse of one Kafka-shaped batch into the table's columns."""
    from pyspark.sql import functions as F

    head = ["topic", "partition", "offset", "timestamp"]
    tail = [F.lit(pt).alias("pt")]
    if fmt == "flatten":
        parsed = F.from_json(F.col("value").cast("string"), _ddl(FLATTEN_COLUMNS))
        return df.select(*head, parsed.alias("j"), *tail).select(*head, "j.*", "pt")
    if fmt == "csv":
        options = {"sep": ",", "quote": '"', "escape": '"', "timestampFormat": "yyyy-MM-dd HH:mm:ss"}
        parsed = F.from_csv(F.col("value").cast("string"), _ddl(CSV_COLUMNS), options)
        return df.select(*head, parsed.alias("c"), *tail).select(*head, "c.*", "pt")
    if fmt == "avro":  # spark-avro's from_avro after the wire header, assuming the one schema it knows
        from pyspark.sql.avro.functions import from_avro

        body = F.expr("substring(value, 6)")
        parsed = from_avro(body, json.dumps(AVRO_SCHEMA), {"mode": "PERMISSIVE"})
        return df.select(*head, parsed.alias("a"), *tail).select(*head, "a.*", "pt")
    if fmt == "json":
        text = F.col("value").cast("string")
        valid = F.from_json(text, "map<string,string>").isNotNull()
        return df.select(*head, F.lit(None).cast("string").alias("key"), F.when(valid, text).alias("value"), *tail)
    if fmt == "text":
        return df.select(*head, F.lit(None).cast("string").alias("key"), F.col("value").cast("string"), *tail)
    return df.select(*head, F.lit(None).cast("binary").alias("key"), "value", *tail)


def create_table(spark: Any, table: str, fmt: str, mode: str) -> None:
    columns = {"topic": "string", "partition": "int", "offset": "long", "timestamp": "timestamp"}
    columns |= payload_columns(fmt)
    columns["pt"] = "string"
    props = {"format-version": "2", "write.parquet.compression-codec": "zstd"}
    if mode == "upsert":
        props["write.merge.mode"] = "merge-on-read"
    partitioned = " PARTITIONED BY (pt)" if mode == "overwrite" else ""
    tblprops = ", ".join(f"'{k}'='{v}'" for k, v in props.items())
    spark.sql(f"CREATE TABLE {table} ({_ddl(columns)}) USING iceberg{partitioned} TBLPROPERTIES ({tblprops})")


def spark_baseline(
    spark: Any, ds: Dataset, replay_dir: Path, table: str, mode: str, checkpoint: Path, source: Any = None
) -> float:
    """Run the hand-written job over ``replay_dir`` into ``table`` (created first, untimed); returns seconds.

    ``source``: the streaming DataFrame to read instead of the replay files (the broker's topic).
    """
    import datetime as dt

    from pyspark.sql import Window
    from pyspark.sql import functions as F

    create_table(spark, table, ds.fmt, mode)
    key = "uid" if ds.fmt == "flatten" else "key"

    def each_batch(df: Any, _batch_id: int) -> None:
        pt = dt.datetime.now(dt.timezone.utc).strftime("%m-%d-%Y %H")
        rows = parse_batch(df, ds.fmt, pt)
        if mode == "append":
            rows.writeTo(table).append()
        elif mode == "overwrite":
            rows.writeTo(table).overwritePartitions()
        else:
            newest = Window.partitionBy(key).orderBy(F.col("offset").desc())
            latest = rows.withColumn("_rn", F.row_number().over(newest)).where("_rn = 1").drop("_rn")
            view = f"src_{table.rsplit('.', 1)[-1]}"
            latest.createOrReplaceTempView(view)
            latest.sparkSession.sql(
                f"MERGE INTO {table} t USING {view} s ON t.{key} = s.{key} "
                "WHEN MATCHED AND s.offset >= t.offset THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *"
            )

    if source is not None:
        return run_stream(source, each_batch, checkpoint, "(a)")
    return replay_stream(spark, ds, replay_dir, each_batch, checkpoint, "(a)")


def attach_local_catalog(spark: Any) -> None:
    """Attach the local stack's ``lake`` catalog (the one in ``$KAFKA_ICEBERG_RUN_DIR``) to ``spark``."""
    from kafka_iceberg.catalogs import render
    from kafka_iceberg.environment import local_resolver
    from kafka_iceberg.local.profile import LOCAL_CATALOG, local_catalog_profile
    from kafka_iceberg.session import attach_catalogs

    attach_catalogs(spark, [render(LOCAL_CATALOG, local_catalog_profile())], local_resolver())


def replay_stream(spark: Any, ds: Dataset, replay_dir: Path, each_batch: Any, checkpoint: Path, label: str) -> float:
    """Seconds of a ``foreachBatch`` query over the replay files, one file per micro-batch, to the end."""
    from pyspark.sql import functions as F

    stream = spark.readStream.option("maxFilesPerTrigger", 1).schema(KAFKA_DDL).parquet(str(replay_dir))
    return run_stream(stream.where(F.col("topic") == ds.topic), each_batch, checkpoint, label)


def run_stream(stream: Any, each_batch: Any, checkpoint: Path, label: str) -> float:
    """Seconds of a ``foreachBatch`` query over ``stream`` to its end (``availableNow``)."""
    attached: list[Any] = []

    def with_catalog(df: Any, batch_id: int) -> None:
        # The query runs its batches in a clone of the session, whose catalogs load afresh from its
        # settings, and the local catalog's credentials are not kept there (session.attach_catalogs):
        # attached to the clone once, as any job on this stack must.
        if not attached:
            attach_local_catalog(df.sparkSession)
            attached.append(True)
        each_batch(df, batch_id)

    started = time.monotonic()
    query = (
        stream.writeStream.foreachBatch(with_catalog)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    if query.exception() is not None:
        raise RuntimeError(f"baseline {label} failed: {query.exception()}")
    return time.monotonic() - started


# -- (c) hand-written Arrow inside Spark -------------------------------------------------------------
def good_replay_files(good_file: Path, out_dir: Path, records_per_file: int) -> Path:
    """The good messages as replay files of ``records_per_file`` (the framework's micro-batches)."""
    import pyarrow.parquet as pq

    out_dir.mkdir(parents=True, exist_ok=True)
    table = pq.read_table(good_file)
    for i, start in enumerate(range(0, table.num_rows, records_per_file)):
        pq.write_table(table.slice(start, records_per_file), out_dir / f"batch-{i:05d}.parquet")
    return out_dir


def _arrow_parse(spark: Any, ds: Dataset, replay_dir: Path, table: str) -> tuple[Any, Any]:
    """(c) and (d)'s parse of an Arrow batch into the table's columns, and its Spark schema; creates ``table``."""
    import datetime as dt

    import pyarrow as pa
    import pyarrow.parquet as pq
    from pyspark import cloudpickle
    from pyspark.sql.pandas.types import from_arrow_schema

    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the workers need not import benchmarks
    fmt, pt = ds.fmt, dt.datetime.now(dt.timezone.utc).strftime("%m-%d-%Y %H")

    def parse(batch: Any) -> Any:
        columns = {c: batch.column(c) for c in HEAD} | pyarrow_parse(fmt, batch)
        columns["pt"] = pa.array([pt] * batch.num_rows, pa.string())
        return pa.table(columns)

    sample = pq.read_table(sorted(replay_dir.glob("*.parquet"))[0]).slice(0, 2000)
    schema = from_arrow_schema(parse(sample.combine_chunks().to_batches()[0]).schema)
    spark.createDataFrame([], schema).writeTo(table).using("iceberg").tableProperty(
        "format-version", "2"
    ).tableProperty("write.parquet.compression-codec", "zstd").create()
    return parse, schema


def spark_arrow_baseline(spark: Any, ds: Dataset, replay_dir: Path, table: str, checkpoint: Path) -> float:
    """Run (c) over ``replay_dir`` (:func:`good_replay_files`) into ``table`` (created untimed); returns seconds."""
    from pyspark.sql.pandas.types import to_arrow_schema

    parse, schema = _arrow_parse(spark, ds, replay_dir, table)
    target = to_arrow_schema(schema)

    def each_partition(batches: Any) -> Any:
        for batch in batches:
            if batch.num_rows:
                yield from parse(batch).cast(target).to_batches()

    def each_batch(df: Any, _batch_id: int) -> None:
        df.select(*HEAD, "value").mapInArrow(each_partition, schema).writeTo(table).append()

    return replay_stream(spark, ds, replay_dir, each_batch, checkpoint, "(c)")


# -- (d) hand-written Arrow writer inside Spark -----------------------------------------------------
def arrow_writer_baseline(spark: Any, ds: Dataset, replay_dir: Path, table: str, checkpoint: Path) -> float:
    """Run (d) over ``replay_dir`` (:func:`good_replay_files`) into ``table`` (created untimed); returns seconds."""
    import itertools
    import uuid

    import pyarrow as pa

    parse, _schema = _arrow_parse(spark, ds, replay_dir, table)
    jvm = spark._jvm
    java_table = jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(spark._jsparkSession, table)
    metadata_json = str(jvm.org.apache.iceberg.TableMetadataParser.toJson(java_table.operations().current()))
    io_props = dict(java_table.io().properties())
    if io_props.get("s3.path-style-access", "").lower() == "true":
        io_props.setdefault("s3.force-virtual-addressing", "false")

    def write_partition(batches: Any) -> Any:
        import os

        from pyiceberg.io import load_file_io
        from pyiceberg.io.pyarrow import _dataframe_to_data_files
        from pyiceberg.table.metadata import TableMetadataUtil

        parts = [parse(b) for b in batches if b.num_rows]
        if not parts:
            return
        os.environ.setdefault("AWS_REQUEST_CHECKSUM_CALCULATION", "when_required")
        metadata = TableMetadataUtil.parse_raw(metadata_json)
        data = pa.concat_tables(parts).cast(metadata.schema().as_arrow())
        io = load_file_io(io_props, metadata.location)
        files = _dataframe_to_data_files(metadata, data, io, write_uuid=uuid.uuid4(), counter=itertools.count(0))
        rows = [{"path": f.file_path, "size": f.file_size_in_bytes} for f in files]
        yield pa.RecordBatch.from_pylist(rows, schema=pa.schema([("path", pa.string()), ("size", pa.int64())]))

    def each_batch(df: Any, batch_id: int) -> None:
        written = df.select(*HEAD, "value").mapInArrow(write_partition, "path string, size long").collect()
        iceberg = jvm.org.apache.iceberg
        target = iceberg.spark.Spark3Util.loadIcebergTable(df.sparkSession._jsparkSession, table)
        config = iceberg.MetricsConfig.forTable(target)
        append = target.newAppend()
        for row in written:
            metrics = iceberg.parquet.ParquetUtil.fileMetrics(target.io().newInputFile(row.path, row.size), config)
            data_file = iceberg.DataFiles.builder(target.spec()).withPath(row.path).withFileSizeInBytes(row.size)
            append.appendFile(data_file.withFormat("PARQUET").withMetrics(metrics).build())
        append.set("baseline-batch-id", str(batch_id))
        append.commit()

    return replay_stream(spark, ds, replay_dir, each_batch, checkpoint, "(d)")


# -- (b) pyarrow, single core ----------------------------------------------------------------------
def _lines(values: Any) -> Any:
    """The values as one newline-delimited buffer (vectorised; no Python per record)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    joined = pc.binary_join_element_wise(values, pa.scalar(b"\n"), pa.scalar(b""))
    joined = joined.combine_chunks() if isinstance(joined, pa.ChunkedArray) else joined
    offsets = joined.buffers()[1]
    data = joined.buffers()[2]
    import numpy as np

    ends = np.frombuffer(offsets, dtype=np.int32, count=len(joined) + 1, offset=joined.offset * 4)
    return pa.py_buffer(memoryview(data)[int(ends[0]) : int(ends[-1])])


def pyarrow_parse(fmt: str, batch: Any) -> Any:
    """Parse the ``value`` column of a Kafka-shaped Arrow table; returns the payload columns."""

    import pyarrow as pa
    import pyarrow.compute as pc

    values = batch.column("value")
    if fmt in ("flatten", "json"):
        import pyarrow.json as pj

        scalar = {"long": pa.int64(), "int": pa.int32(), "double": pa.float64(), "boolean": pa.bool_()}
        scalar |= {"string": pa.string(), "timestamp": pa.timestamp("us", tz="UTC"), "date": pa.string()}
        explicit = pa.schema([(n, scalar[t]) for n, t in FLATTEN_COLUMNS.items() if n not in ("tags", "ctx")])
        parsed = pj.read_json(
            pa.BufferReader(_lines(values)),
            read_options=pj.ReadOptions(use_threads=False, block_size=64 << 20),
            parse_options=pj.ParseOptions(explicit_schema=explicit, unexpected_field_behavior="infer"),
        )
        if fmt == "json":  # validated: keep the document as sent
            return {"key": pa.nulls(len(values), pa.string()), "value": pc.cast(values, pa.string())}
        return {n: (pc.cast(parsed[n], pa.date32()) if n == "day" else parsed[n]) for n in FLATTEN_COLUMNS}
    if fmt == "csv":
        import pyarrow.csv as pcsv

        types = {"long": pa.int64(), "int": pa.int32(), "double": pa.float64(), "string": pa.string()}
        types["timestamp"] = pa.timestamp("us")  # naive here, then declared UTC
        parsed = pcsv.read_csv(
            pa.BufferReader(_lines(values)),
            read_options=pcsv.ReadOptions(column_names=list(CSV_COLUMNS), use_threads=False, block_size=64 << 20),
            parse_options=pcsv.ParseOptions(delimiter=",", quote_char='"', double_quote=True),
            convert_options=pcsv.ConvertOptions(
                column_types={n: types[t] for n, t in CSV_COLUMNS.items()}, timestamp_parsers=["%Y-%m-%d %H:%M:%S"]
            ),
        )
        return {n: (pc.assume_timezone(parsed[n], "UTC") if n == "ts" else parsed[n]) for n in CSV_COLUMNS}
    if fmt == "avro":
        import fastavro

        from benchmarks.datagen import avro_writer_schema

        schema = avro_writer_schema()
        rows = [fastavro.schemaless_reader(io.BytesIO(v[5:]), schema, None) for v in values.to_pylist()]
        parsed = pa.Table.from_pylist(rows, avro_arrow_schema())
        return {n: parsed[n] for n in AVRO_COLUMNS}
    if fmt == "text":
        return {"key": pa.nulls(len(values), pa.string()), "value": pc.cast(values, pa.string())}
    return {"key": pa.nulls(len(values), pa.binary()), "value": values}


def avro_arrow_schema() -> Any:
    """The Arrow schema of ``AVRO_COLUMNS`` (the types fastavro's values convert to)."""
    import pyarrow as pa

    s = pa.string()
    return pa.schema(
        [("id", pa.int64()), ("ts", pa.timestamp("us", tz="UTC")), ("uid", pa.int64()), ("sid", s), ("ev", s),
         ("amount", pa.decimal128(10, 2)), ("qty", pa.int32()), *[(n, s) for n in ("cur", "cc", "city", "dev", "os")],
         ("new", pa.bool_()), ("score", pa.float64()), ("day", pa.date32()), ("tags", pa.list_(s)),
         ("ctx", pa.struct([("ab", s), ("agent", s), ("ref", s)])), ("note", s)]
    )  # fmt: skip


def pyarrow_baseline(fmt: str, good_file: Path, out_dir: Path, records_per_file: int) -> dict[str, Any]:
    """Read the good messages, parse them batch by batch, write zstd Parquet; single core."""
    import datetime as dt

    import pyarrow as pa
    import pyarrow.parquet as pq

    pa.set_cpu_count(1)
    pa.set_io_thread_count(1)
    out_dir.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    cpu_started = time.process_time()
    table = pq.read_table(good_file, use_threads=False)
    pt = dt.datetime.now(dt.timezone.utc).strftime("%m-%d-%Y %H")
    written = 0
    for i, start in enumerate(range(0, table.num_rows, records_per_file)):
        batch = table.slice(start, records_per_file)
        columns = {c: batch.column(c) for c in ("topic", "partition", "offset", "timestamp")}
        columns |= pyarrow_parse(fmt, batch)
        columns["pt"] = pa.array([pt] * batch.num_rows, pa.string())
        out = pa.table(columns)
        path = out_dir / f"part-{i:04d}.parquet"
        pq.write_table(out, path, compression="zstd")
        written += out.num_rows
    seconds = time.monotonic() - started
    return {
        "seconds": seconds,
        "cpu_seconds": time.process_time() - cpu_started,
        "records": written,
        "peak_rss_mb": _peak_rss_mb(),
        "files": len(list(out_dir.glob("*.parquet"))),
        "bytes_written": sum(p.stat().st_size for p in out_dir.glob("*.parquet")),
    }


def _peak_rss_mb() -> float:
    """This process's peak RSS (``VmHWM``: reset by exec, unlike ``ru_maxrss`` after a fork)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_pyarrow_child(fmt: str, good_file: Path, out_dir: Path, records_per_file: int) -> dict[str, Any]:
    """:func:`pyarrow_baseline` in a fresh interpreter; returns its JSON result."""
    import os
    import subprocess

    repo = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(repo / "src"), str(repo)])}
    cmd = [sys.executable, "-m", "benchmarks.baselines", "pyarrow", fmt, str(good_file), str(out_dir)]
    done = subprocess.run(
        [*cmd, str(records_per_file)], capture_output=True, text=True, env=env, cwd=repo, check=False, timeout=600
    )
    if done.returncode != 0:
        raise RuntimeError(f"pyarrow baseline failed:\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="pyarrow baseline (child process of benchmarks/run.py)")
    parser.add_argument("kind", choices=["pyarrow"])
    parser.add_argument("fmt")
    parser.add_argument("good_file", type=Path)
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("records_per_file", type=int)
    args = parser.parse_args(argv)
    print(json.dumps(pyarrow_baseline(args.fmt, args.good_file, args.out_dir, args.records_per_file)))


if __name__ == "__main__":
    main()
