"""The Arrow writer: Spark tasks write a batch's Parquet data files with pyarrow, the driver commits them.

``write.engine: arrow`` (append and overwrite tables). Each Spark task receives its rows as Arrow batches
(``mapInArrow``) and writes them through pyiceberg's Parquet writer: the table's schema with its
field ids, its partition spec (identity, bucket, truncate and time transforms), codec and target
file size, to the table's location through a FileIO built from the *table's own* FileIO
properties (the catalog's settings plus any credentials it vended). Tasks return only each file's
path, size, record count and the file as Iceberg's ``ContentFileParser`` JSON: its partition and
the column metrics pyiceberg took from the footer it had just written. The driver then appends
every file of the batch (or, under ``commit_mode: overwrite``, replaces the partitions they hold
rows for) in **one** Iceberg commit through the Java API of the Spark catalog's table (so every
catalog type works), with the batch's exactly-once marker in the snapshot summary.

A retried commit appends the same files again. Files no commit holds are deleted when the batch
ends (``TableWriter.batch``): those the driver was told of, and through :class:`AttemptFiles` those
of tasks that succeeded in a job that failed, or ran again; a task attempt that fails deletes its
own. What a killed process wrote stays, an orphan that ``maintain-tables`` removes.
"""

from __future__ import annotations

import functools
import itertools
import json
import logging
import os
import threading
import uuid
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pyspark.accumulators import AccumulatorParam

from kafka_iceberg.checks.labels import Labels, merged_stats, sort_batch
from kafka_iceberg.decode.schemaful import is_schemaful
from kafka_iceberg.records import ERROR_COLUMNS, ERROR_SCHEMA_DDL
from kafka_iceberg.spec.load import arrow_writer_unsupported
from kafka_iceberg.spec.model import TableSpec
from kafka_iceberg.tasks import cores, map_in_arrow
from kafka_iceberg.write import dictionaries
from kafka_iceberg.write.jvm import string_map

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.accumulators import Accumulator
    from pyspark.sql import DataFrame, Row, SparkSession
    from pyspark.sql.types import StructType

log = logging.getLogger(__name__)

FILE_SCHEMA = "path string, size long, records long, content string"
# What a task of the single pass returns (write_sorted): files, records leaving the table, counts.
SORTED_SCHEMA = (
    f"kind string, file_path string, file_size long, file_records long, file_content string, stats string, "
    f"{ERROR_SCHEMA_DDL}"
)
# Java S3FileIO's path-style switch, as pyiceberg names it.
_PATH_STYLE = "s3.path-style-access"
_VIRTUAL = "s3.force-virtual-addressing"


# The formats ``write.engine: auto`` writes with the Arrow writer's single pass: those whose whole
# runs measured faster with it than with Spark's writer (docs/benchmarks/results.md, "Writers").
# Text joined in stop 33: 0.83-0.88 in its first run, then 1.06-1.13, 0.94-1.38, 1.13-1.26 and 1.31-1.33.
# Avro joined in stop 58, when its tasks took the JVM's decode: 0.45-0.59 of (a) against 0.40-0.44.
AUTO_ARROW_WRITER = frozenset({"json", "csv", "flatten", "binary", "text", "avro"})
FOOTER_READERS = 8  # data files whose footers the driver reads at once (append_files, wide tables)
# Column types whose identity partition values the tasks can hand to Iceberg's Java API (_partition_value).
_PARTITION_SAFE = frozenset({"string", "long", "int", "short", "byte", "double", "float", "boolean", "date", "uuid"})
_SAFE_FIXED_COLUMNS = frozenset({"topic", "partition", "offset", "pt"})  # Kafka's timestamp is not


def write_engine(spec: TableSpec) -> str:
    """The writer of ``spec``'s data files: ``write.engine``, with ``auto`` resolved per table.

    ``auto`` is the Arrow writer where its single pass applies and was measured faster
    (:data:`AUTO_ARROW_WRITER`), and Spark's everywhere else: other commit modes, a sort order, a
    transform, Protobuf and JSON Schema, a Debezium envelope or ``include_headers`` (the tasks
    decode plain records only), and identity partitions on a column whose type is not known to
    convert (timestamps, binary, undeclared columns: all of a registry format's). Validation
    refuses ``arrow`` where it cannot write at all.
    """
    engine = spec.write.engine
    if engine != "auto":
        return engine
    return "arrow" if _arrow_by_default(spec) else "spark"


def _arrow_by_default(spec: TableSpec) -> bool:
    if spec.source.format not in AUTO_ARROW_WRITER or spec.transform:
        return False
    if is_schemaful(spec) and (spec.source.envelope == "debezium" or spec.source.include_headers):
        return False  # the tasks would decode none of it (run/batch.py, _decode_where_written)
    if arrow_writer_unsupported(spec) is not None:
        return False
    declared = dict(spec.schema_.columns or {}) if spec.schema_ is not None else {}
    for f in spec.partition_fields:
        if f.transform == "identity" and f.column not in _SAFE_FIXED_COLUMNS:
            col_type = declared.get(f.column, "")
            if col_type not in _PARTITION_SAFE and not col_type.startswith("decimal("):
                return False
    return True


@dataclass(frozen=True)
class FileTarget:
    """What a Spark task needs to write a table's data files (pickled to Spark's Python workers)."""

    metadata_json: str  # the table's current metadata without its history (:func:`without_history`)
    io_properties: Mapping[str, str] = field(repr=False)  # may hold (vended) storage credentials


def pyiceberg_io_properties(java_io_properties: Mapping[str, str]) -> dict[str, str]:
    """The table's Java FileIO properties as pyiceberg's FileIO reads them.

    Both use Iceberg's property names (``s3.endpoint``, ``s3.access-key-id``, ``client.region``);
    only path-style addressing is spelled differently.
    """
    props = dict(java_io_properties)
    if props.get(_PATH_STYLE, "").lower() == "true":
        props.setdefault(_VIRTUAL, "false")
    return props


def file_target(spark: SparkSession, java_table: Any) -> FileTarget:
    """The target of the table ``java_table`` (an ``org.apache.iceberg.Table``) as it is now.

    The metadata is the table's current one, already in the JVM: serialized, not read again from
    the object store.
    """
    iceberg = spark._jvm.org.apache.iceberg  # type: ignore[union-attr]
    metadata = str(iceberg.TableMetadataParser.toJson(java_table.operations().current()))
    return FileTarget(without_history(metadata), pyiceberg_io_properties(string_map(java_table.io().properties())))


# What a data file's writer does not read of the metadata: the table's history, which grows by a
# snapshot per commit (about 1 KB each with the commit marker) until snapshots expire.
_HISTORY = ("snapshots", "snapshot-log", "metadata-log", "refs", "statistics", "partition-statistics")


def arrow_unwritable(metadata_json: str) -> str | None:
    """Why the Arrow writer cannot write a table of this metadata's current partition spec (None: it can).

    pyiceberg takes one partition field per source column; Iceberg allows more (``bucket(8, c)``
    beside ``truncate(3, c)``), which a table declared elsewhere, or evolved, may have.
    """
    metadata = json.loads(metadata_json)
    spec = next(s for s in metadata["partition-specs"] if s["spec-id"] == metadata["default-spec-id"])
    schema = next(s for s in metadata["schemas"] if s["schema-id"] == metadata["current-schema-id"])
    by_source: dict[int, list[str]] = {}
    for f in spec["fields"]:
        by_source.setdefault(f["source-id"], []).append(f["name"])
    for source, names in by_source.items():
        if len(names) > 1:
            column = next((c["name"] for c in schema["fields"] if c["id"] == source), f"field {source}")
            return f"its partition fields {' and '.join(names)} both read column {column}"
    return None


def without_history(metadata_json: str) -> str:
    """``metadata_json`` with only what writing data files reads: current schema, spec, sort order, properties.

    Every task of every batch receives and parses the target; with the whole metadata that cost
    grew with the table's age.
    """
    metadata = json.loads(metadata_json)
    for key in _HISTORY:
        metadata.pop(key, None)
    metadata["current-snapshot-id"] = -1  # none: the history is not here
    current = {
        "schemas": ("schema-id", metadata.get("current-schema-id")),
        "partition-specs": ("spec-id", metadata.get("default-spec-id")),
        "sort-orders": ("order-id", metadata.get("default-sort-order-id")),
    }
    for key, (id_key, wanted) in current.items():
        if key in metadata:
            metadata[key] = [item for item in metadata[key] if item.get(id_key) == wanted]
    return json.dumps(metadata)


def _quiet_checksums() -> None:
    # AWS SDK 2.20+ defaults to chunked checksums, which S3-compatible stores (OSS, SeaweedFS) keep
    # verbatim; clusters pass -Daws.requestChecksumCalculation=when_required to the JVM for the same reason.
    os.environ.setdefault("AWS_REQUEST_CHECKSUM_CALCULATION", "when_required")


def _partition_value(value: Any, result_type: Any) -> Any:
    """A partition value as Iceberg's ``SingleValueParser`` reads it in a ``ContentFileParser`` JSON.

    ``value`` is pyiceberg's: a transform's result as its internal value (hours since the epoch,
    bucket numbers, days since the epoch for ``days``), an identity value as the column's own.
    Binary values (``truncate`` of a binary column) are hexadecimal, in capitals, as Guava's
    ``base16`` reads them. Timestamps are refused: no spec the Arrow writer takes produces them.
    """
    import datetime as dt

    from pyiceberg.types import (
        BinaryType,
        BooleanType,
        DateType,
        DecimalType,
        DoubleType,
        FloatType,
        IntegerType,
        LongType,
        StringType,
        UUIDType,
    )

    if value is None:  # a null partition value: left out of the file's partition
        return None
    if isinstance(result_type, DateType):
        day = dt.date(1970, 1, 1) + dt.timedelta(days=value) if isinstance(value, int) else value
        return day.isoformat()
    if isinstance(result_type, DecimalType):
        return format(value, "f")  # the column's scale, never an exponent
    if isinstance(result_type, UUIDType):
        return str(value)
    if isinstance(result_type, BinaryType):
        return bytes(value).hex().upper()
    if isinstance(result_type, StringType | IntegerType | LongType | BooleanType | FloatType | DoubleType):
        return value
    raise TypeError(f"the arrow writer cannot pass a {result_type} partition value to Iceberg")


def _id_map(values: Mapping[int, Any]) -> dict[str, list[Any]]:
    """A metrics map the way ``ContentFileParser`` spells it; bounds (bytes) in hex."""
    keys = sorted(values)
    return {"keys": keys, "values": [v.hex() if isinstance(v, bytes) else v for v in (values[k] for k in keys)]}


def metrics_as_java(metadata: Any) -> bool:
    """Whether pyiceberg's column metrics for the table ``metadata`` are the ones Iceberg's Java would keep.

    pyiceberg applies the table's ``write.metadata.metrics.*`` modes as Java does, but not Java's
    other rules: a sort column's modes, nested fields' bounds, and the first
    ``max-inferred-column-defaults`` (100) columns only, when a table wider than that sets no
    default. For such tables the driver reads each file's footer instead (:func:`_java_data_files`).
    """
    props = metadata.properties
    wide = len(metadata.schema().fields) > int(props.get("write.metadata.metrics.max-inferred-column-defaults", "100"))
    default_set = "write.metadata.metrics.default" in props
    flat = all(f.field_type.is_primitive for f in metadata.schema().fields)
    return flat and (default_set or not wide) and metadata.sort_order().is_unsorted


def content_json(data_file: Any, metadata: Any, with_metrics: bool) -> str:
    """A data file pyiceberg wrote for the table ``metadata``, as Iceberg's Java ``ContentFileParser`` reads it.

    ``with_metrics`` false leaves the column metrics out (the driver reads them from the footer).
    """
    spec = metadata.spec()
    out: dict[str, Any] = {
        "spec-id": spec.spec_id,
        "content": "DATA",
        "file-path": data_file.file_path,
        "file-format": "PARQUET",
    }
    if spec.fields:
        types = spec.partition_type(metadata.schema()).fields
        values = (_partition_value(data_file.partition[i], t.field_type) for i, t in enumerate(types))
        out["partition"] = {str(t.field_id): v for t, v in zip(types, values, strict=True) if v is not None}
    out["file-size-in-bytes"] = data_file.file_size_in_bytes
    out["record-count"] = data_file.record_count
    if with_metrics:
        counted = data_file.value_counts or {}
        # pyiceberg measures a column under metrics mode `none` too; Java leaves it out.
        sizes = {k: v for k, v in (data_file.column_sizes or {}).items() if k in counted}
        out["column-sizes"] = _id_map(sizes)
        out["value-counts"] = _id_map(counted)
        out["null-value-counts"] = _id_map(data_file.null_value_counts or {})
        out["nan-value-counts"] = _id_map(data_file.nan_value_counts or {})
        out["lower-bounds"] = _id_map(data_file.lower_bounds or {})
        out["upper-bounds"] = _id_map(data_file.upper_bounds or {})
    if data_file.split_offsets:
        out["split-offsets"] = list(data_file.split_offsets)
    return json.dumps(out)


# -- Python side (runs in Spark's Python workers) --------------------------------------------------
def _file_schema() -> pa.Schema:
    import pyarrow as pa

    return pa.schema([("path", pa.string()), ("size", pa.int64()), ("records", pa.int64()), ("content", pa.string())])


def file_io(properties: Mapping[str, str], location: str) -> Any:
    """The FileIO (pyiceberg's) for a table's files, whose S3 files are opened when they are first written.

    pyarrow's S3 filesystem starts a multipart upload when a file is opened and completes it when
    the file is closed: three requests for every data file, however small. Opened on the first
    write instead (``allow_delayed_open``), a file smaller than one part (most of a micro-batch's)
    is one ``PUT``: two round trips to the object store fewer on each task's way to its commit. A
    FileIO other than pyarrow's (``py-io-impl``) is left as it is.
    """
    from pyiceberg.io import load_file_io
    from pyiceberg.io.pyarrow import PyArrowFileIO

    io = load_file_io(dict(properties), location)
    return _delayed_open_io()(io.properties) if type(io) is PyArrowFileIO else io


@functools.cache
def _delayed_open_io() -> type:
    """The pyarrow FileIO with S3 files opened on first write (a class made here: pyiceberg loads lazily)."""
    from pyiceberg.io.pyarrow import PyArrowFileIO

    class DelayedOpenFileIO(PyArrowFileIO):
        def _initialize_s3_fs(self, netloc: str | None) -> Any:
            fs = super()._initialize_s3_fs(netloc)
            rebuild, (options,) = fs.__reduce__()  # pyarrow's own pickling: every option pyiceberg set
            return rebuild({**options, "allow_delayed_open": True})

    return DelayedOpenFileIO


def _for_transforms(data: pa.Table, metadata: Any) -> pa.Table:
    """``data``, cast to the table's schema, as pyiceberg's partition transforms (Rust, through FFI) take it.

    - A decimal column's values are copied where their buffer is not aligned to the value's width:
      Spark hands a task its rows as an Arrow IPC stream, aligned to 8 bytes, and bucket or truncate
      over a ``decimal128`` buffer at an address not a multiple of 16 panics.
    - A binary column that a ``truncate`` partition field reads is ``binary``, not the
      ``large_binary`` of pyiceberg's schema, which that transform does not take.
    """
    import pyarrow as pa

    truncated = {
        metadata.schema().find_column_name(f.source_id)
        for f in metadata.spec().fields
        if str(f.transform).startswith("truncate")
    }
    for i, column in enumerate(data.columns):
        name = data.field(i).name
        if pa.types.is_decimal(column.type):
            width = column.type.byte_width  # 16 for decimal128, 32 for decimal256
            if any(c.buffers()[1] is not None and c.buffers()[1].address % width for c in column.chunks):
                chunks = [pa.concat_arrays([c]) for c in column.chunks]
                data = data.set_column(i, data.field(i), pa.chunked_array(chunks, column.type))
        elif pa.types.is_large_binary(column.type) and name in truncated:
            data = data.set_column(i, data.field(i).with_type(pa.binary()), column.cast(pa.binary()))
    return data


class WrittenPaths(AccumulatorParam[list[str]]):
    """A Spark accumulator's arithmetic over data file paths: lists, joined."""

    def zero(self, value: list[str]) -> list[str]:
        """No path."""
        return []

    def addInPlace(self, value1: list[str], value2: list[str]) -> list[str]:
        """Both lists' paths, in ``value1``."""
        value1.extend(value2)
        return value1


def file_ledger(spark: SparkSession) -> Accumulator[list[str]] | None:
    """An accumulator of the paths the Arrow writer's tasks write (None without a SparkContext: Spark Connect).

    Spark adds a task's updates on the driver when the task succeeds, even in a job that then
    fails; a failed attempt's are dropped (:class:`AttemptFiles` deletes its files itself).
    """
    try:
        context = spark.sparkContext
    except Exception:  # Spark Connect has no SparkContext, and no accumulators
        return None
    return context.accumulator([], WrittenPaths())


def drained(ledger: Accumulator[list[str]] | None) -> list[str]:
    """The paths ``ledger`` holds on the driver, which it then forgets."""
    if ledger is None:
        return []
    paths = list(ledger.value)
    ledger.value = []
    return paths


class AttemptFiles:
    """The data files one task attempt writes: each told to the driver (``ledger``), all deleted if the attempt fails.

    ``with AttemptFiles(ledger, target) as written:`` around a task's body, ``data_files(..., written)``
    inside. A failed attempt's accumulator updates never reach the driver, so its files are its own to
    delete; a task whose process is killed deletes nothing (``maintain-tables`` removes such orphans).
    """

    def __init__(self, ledger: Accumulator[list[str]] | None, target: FileTarget):
        self.ledger, self.target, self.paths = ledger, target, list[str]()

    def add(self, path: str) -> None:
        """One more file written by this attempt."""
        self.paths.append(path)
        if self.ledger is not None:  # sent with the task's result, and only if the task succeeds
            self.ledger.add([path])

    def __enter__(self) -> AttemptFiles:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: Any) -> None:
        if kind is not None and self.paths:
            delete_files(self.paths, self.target)


def delete_files(paths: Sequence[str], target: FileTarget) -> None:
    """Delete ``paths`` through the table's FileIO; a file that cannot be is left, and logged."""
    left = []
    try:
        io = file_io(target.io_properties, json.loads(target.metadata_json)["location"])
    except Exception as exc:
        log.warning("could not delete the %d data file(s) of a failed task: %s", len(paths), exc)
        return
    for path in paths:
        try:
            io.delete(path)
        except Exception as exc:
            left.append(f"{path} ({exc})")
    if left:
        log.warning("could not delete data files of a failed task: %s", "; ".join(left))


def data_files(data: pa.Table, target: FileTarget, written: AttemptFiles | None = None) -> list[dict[str, Any]]:
    """Write ``data`` (the table's columns) as the table's data files; one dict per file (FILE_SCHEMA).

    ``written``: told each file as soon as it is written, so that one written before a failure
    of the next is known.
    """
    from pyiceberg.io.pyarrow import _dataframe_to_data_files
    from pyiceberg.table.metadata import TableMetadataUtil

    if not data.num_rows:
        return []
    _quiet_checksums()
    dictionaries.install()
    metadata = TableMetadataUtil.parse_raw(target.metadata_json)
    io = file_io(target.io_properties, metadata.location)
    data = _for_transforms(data.cast(metadata.schema().as_arrow()), metadata)
    # One write id per batch and task attempt keeps file names unique across tasks and retries.
    files = _dataframe_to_data_files(metadata, data, io, write_uuid=uuid.uuid4(), counter=itertools.count(0))
    with_metrics = metrics_as_java(metadata)
    out = []
    for f in files:
        if written is not None:
            written.add(f.file_path)
        out.append(
            {
                "path": f.file_path,
                "size": f.file_size_in_bytes,
                "records": f.record_count,
                "content": content_json(f, metadata, with_metrics),
            }
        )
    return out


def write_files(
    batches: Iterator[pa.RecordBatch], target: FileTarget, *, ledger: Accumulator[list[str]] | None = None
) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` function: the partition's rows as data files; one output row per file."""
    import pyarrow as pa

    with AttemptFiles(ledger, target) as written:
        tables = [pa.Table.from_batches([b]) for b in batches if b.num_rows]
        if tables:
            files = data_files(pa.concat_tables(tables), target, written)
            yield pa.RecordBatch.from_pylist(files, schema=_file_schema())


def write_sorted(
    batches: Iterator[pa.RecordBatch],
    target: FileTarget,
    labels: Labels,
    schema: pa.Schema,
    *,
    ledger: Accumulator[list[str]] | None = None,
) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` function of the single pass: the written files, the records leaving the table, the counts.

    One output row per data file (``kind`` ``file``), per record leaving the table (``error`` or
    ``quarantine``, in the error-row shape) and one with the task's counts (``stats``); ``schema``
    is SORTED_SCHEMA in Arrow.
    """
    import pyarrow as pa

    rows, stats = [], []
    out: list[dict[str, Any]] = []
    with AttemptFiles(ledger, target) as written:
        for batch in batches:
            if batch.num_rows:
                part = sort_batch(batch, labels)
                rows.append(part.rows)
                stats.append(part.stats)
                out += [{"kind": "error", **r} for r in part.errors]
                out += [{"kind": "quarantine", **r} for r in part.quarantined]
        if rows:
            out += [
                {"kind": "file", **{f"file_{k}": v for k, v in f.items()}}
                for f in data_files(pa.concat_tables(rows), target, written)
            ]
        out.append({"kind": "stats", "stats": json.dumps(merged_stats(stats, len(labels.rules)))})
        yield pa.RecordBatch.from_pylist(out, schema=schema)


# -- Spark side ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class WrittenFile:
    """One data file a task wrote."""

    path: str
    size: int
    records: int
    content: str  # the file as Iceberg's ContentFileParser JSON (:func:`content_json`)


def task_per_core(frame: DataFrame) -> DataFrame:
    """``frame`` read by at most one task per core, for the tasks that write files.

    A task writes a file per partition value it holds, so a batch's commit has at most partitions
    touched x cores files. A scan splits a replay file at its row groups, and Spark's Kafka source
    makes a task per topic partition: more tasks than cores would only make more, smaller files, as
    the cores run them in turns anyway. Coalescing reads neighbouring splits in one task (no shuffle);
    a frame already in fewer partitions is left as it is.
    """
    n = cores(frame.sparkSession)
    return frame if n is None else frame.coalesce(n)


def write_frame(
    rows: DataFrame, target: FileTarget, *, ledger: Accumulator[list[str]] | None = None
) -> list[WrittenFile]:
    """Write ``rows`` (already shaped like the table) as data files; one Spark job (``ledger``: :func:`file_ledger`)."""
    task = functools.partial(write_files, target=target, ledger=ledger)
    written = map_in_arrow(task_per_core(rows), task, FILE_SCHEMA).collect()
    return [WrittenFile(str(r["path"]), int(r["size"]), int(r["records"]), str(r["content"])) for r in written]


def driver_files(data: pa.Table, table: StructType, target: FileTarget) -> list[WrittenFile]:
    """``data``, rows already on the driver, written as data files by the driver itself: no Spark job.

    Its columns are taken by name in the table's order; a column of the table it lacks is null.
    """
    import pyarrow as pa

    names = [f.name for f in table.fields]
    columns = [data.column(n) if n in data.column_names else pa.nulls(data.num_rows) for n in names]
    return [WrittenFile(**f) for f in data_files(pa.table(columns, names=names), target)]


@functools.cache
def sorted_schema() -> tuple[StructType, pa.Schema]:
    """SORTED_SCHEMA in Spark's and in Arrow's terms: a single-pass task's output (parsed once: the JVM parses it)."""
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.types import StructType, _parse_datatype_string

    struct = _parse_datatype_string(SORTED_SCHEMA)
    assert isinstance(struct, StructType)
    return struct, to_arrow_schema(struct)


def written_files(rows: list[Row]) -> list[WrittenFile]:
    """The data files among a single-pass job's output rows (``kind`` ``file``)."""
    return [
        WrittenFile(str(r["file_path"]), int(r["file_size"]), int(r["file_records"]), str(r["file_content"]))
        for r in rows
        if r["kind"] == "file"
    ]


def leaving(rows: list[Any], kind: str) -> list[Row]:
    """The records of ``kind`` (``error``, ``quarantine``) among a single-pass job's output rows, as error rows."""
    from pyspark.sql import Row

    return [Row(**{c: r[c] for c in ERROR_COLUMNS}) for r in rows if r["kind"] == kind]


@dataclass(frozen=True)
class SortedBatch:
    """What the single pass's job brought back: files written (not committed), records leaving the table, counts."""

    files: list[WrittenFile]
    errors: list[Row]  # decode errors and write rejections, in the error-row shape (ERROR_COLUMNS)
    quarantined: list[Row]  # records failing a quarantine rule, the same
    stats: dict[str, Any]  # checks.labels.merged_stats


def sort_and_write(
    frame: DataFrame,
    target: FileTarget,
    labels: Labels,
    *,
    on_driver: bool = False,
    ledger: Accumulator[list[str]] | None = None,
) -> SortedBatch:
    """Run :func:`write_sorted` over ``frame`` (its row columns aligned to the table); one Spark job.

    ``ledger``: :func:`file_ledger`'s, told every file the tasks write.

    ``on_driver``: ``frame`` holds few rows (the records the Arrow decoder left to Spark's): Spark's
    job only computes them, brought back as Arrow, and :func:`write_sorted` runs here. A job of
    Python tasks costs 0.2-0.4 s whatever it carries (benchmarks/fixes.md, stop 55).
    """
    struct, arrow = sorted_schema()
    if on_driver:
        batches = write_sorted(iter(_arrow_batches(frame)), target, labels, arrow, ledger=ledger)
        out: list[Any] = [row for batch in batches for row in batch.to_pylist()]
    else:
        task = functools.partial(write_sorted, target=target, labels=labels, schema=arrow, ledger=ledger)
        out = map_in_arrow(task_per_core(frame), task, struct).collect()
    stats = merged_stats([json.loads(r["stats"]) for r in out if r["kind"] == "stats"], len(labels.rules))
    return SortedBatch(written_files(out), leaving(out, "error"), leaving(out, "quarantine"), stats)


def sort_on_driver(frame: DataFrame, labels: Labels) -> tuple[int, SortedBatch]:
    """``frame`` (few rows of :func:`~kafka_iceberg.checks.labels.check_columns`' output) sorted here, unwritten.

    One Spark job computes it and brings it back as Arrow. Returns how many rows the table takes
    (an upsert's MERGE reads them from ``frame``: :func:`~kafka_iceberg.checks.labels.written_rows`)
    and what leaves the table, with the counts; the batch has no files.
    """
    from pyspark.sql import Row

    parts = [sort_batch(batch, labels) for batch in _arrow_batches(frame) if batch.num_rows]
    kept = {
        kind: [Row(**{c: r[c] for c in ERROR_COLUMNS}) for p in parts for r in getattr(p, kind)]
        for kind in ("errors", "quarantined")
    }
    stats = merged_stats([p.stats for p in parts], len(labels.rules))
    return sum(p.rows.num_rows for p in parts), SortedBatch([], kept["errors"], kept["quarantined"], stats)


def _arrow_batches(frame: DataFrame) -> list[pa.RecordBatch]:
    """``frame`` collected as Arrow record batches, in the types ``mapInArrow`` hands its tasks."""
    to_arrow = getattr(frame, "toArrow", None)  # public from Spark 4.0
    if to_arrow is not None:
        return list(to_arrow().to_batches())
    return list(frame._collect_as_arrow())  # Spark 3.5's (toPandas' own path)


def append_files(spark: SparkSession, java_table: Any, files: list[WrittenFile], properties: Mapping[str, str]) -> None:
    """Append ``files`` to ``java_table`` in one commit whose snapshot summary holds ``properties``."""
    append = java_table.newAppend()
    _commit(append, append.appendFile, _java_data_files(spark, java_table, files), properties)


def replace_partitions(
    spark: SparkSession, java_table: Any, files: list[WrittenFile], properties: Mapping[str, str]
) -> None:
    """Replace the partitions ``files`` hold rows for by ``files``, in one commit (``commit_mode: overwrite``).

    Iceberg's ``ReplacePartitions`` is what Spark's ``overwritePartitions()`` commits: other
    partitions are untouched, and on an unpartitioned table the whole table is replaced. Spark
    commits nothing for no rows, so ``files`` must not be empty: :func:`append_files` then commits
    the batch's marker without touching a row.
    """
    if not files:
        raise ValueError("a dynamic overwrite of no files replaces nothing (Spark skips it): append the marker")
    replace = java_table.newReplacePartitions()
    _commit(replace, replace.addFile, _java_data_files(spark, java_table, files), properties)


def _commit(update: Any, add: Any, data_files: list[Any], properties: Mapping[str, str]) -> None:
    """Commit Iceberg's ``update`` with ``data_files`` (each given to ``add``) and ``properties`` in its summary."""
    for data_file in data_files:
        add(data_file)
    for key, value in properties.items():
        update.set(key, value)
    update.commit()


def _java_data_files(spark: SparkSession, java_table: Any, files: list[WrittenFile]) -> list[Any]:
    """``files`` as Iceberg ``DataFile``s of ``java_table``, parsed from the JSON the tasks wrote.

    The tasks' column metrics are pyiceberg's, read from the footer each task had just written,
    where the table's metrics config is one pyiceberg applies as Java does (:func:`metrics_as_java`);
    a file without them is a wide or nested table's, whose footers Iceberg reads here with the
    table's metrics config, concurrently: each is a round trip to the object store.
    """
    iceberg = spark._jvm.org.apache.iceberg  # type: ignore[union-attr]
    spec, mapper = java_table.spec(), iceberg.util.JsonUtil.mapper()
    parsed = [iceberg.ContentFileParser.fromJson(mapper.readTree(f.content), spec) for f in files]
    footers = [i for i, f in enumerate(parsed) if f.valueCounts() is None]
    if not footers:
        return parsed
    config, io = iceberg.MetricsConfig.forTable(java_table), java_table.io()

    def footer_metrics(i: int) -> Any:
        return iceberg.parquet.ParquetUtil.fileMetrics(io.newInputFile(files[i].path, files[i].size), config)

    every_metrics = (
        list(_footer_readers().map(footer_metrics, footers)) if len(footers) > 1 else [footer_metrics(footers[0])]
    )
    for i, metrics in zip(footers, every_metrics, strict=True):
        parsed[i] = iceberg.DataFiles.builder(spec).copy(parsed[i]).withMetrics(metrics).build()
    return parsed


_readers: list[ThreadPoolExecutor] = []
_readers_lock = threading.Lock()


def _footer_readers() -> ThreadPoolExecutor:
    """Threads reading footers, kept for the process: py4j pins a JVM thread and a connection to each."""
    with _readers_lock:
        if not _readers:
            _readers.append(ThreadPoolExecutor(max_workers=FOOTER_READERS, thread_name_prefix="footer-reader"))
        return _readers[0]
