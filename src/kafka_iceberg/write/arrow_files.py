"""The Arrow writer: Spark tasks write a batch's Parquet data files with pyarrow, the driver commits them.

``write.engine: arrow`` (append tables). Each Spark task receives its rows as Arrow batches
(``mapInArrow``) and writes them through pyiceberg's Parquet writer: the table's schema with its
field ids, its partition spec (identity, bucket, truncate and time transforms), codec and target
file size, to the table's location through a FileIO built from the *table's own* FileIO
properties (the catalog's settings plus any credentials it vended). Tasks return only each file's
path, size and record count. The driver then appends every file of the batch in **one** Iceberg
commit through the Java API of the Spark catalog's table (so every catalog type works), with the
column metrics read from each file's footer by Iceberg itself and the batch's exactly-once marker
in the snapshot summary.

A retried commit appends the same files again; files of a batch that never commits are orphans,
which ``maintain-tables`` removes like any other failed write's.
"""

from __future__ import annotations

import itertools
import json
import os
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kafka_iceberg.spec.model import TableSpec

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

FILE_SCHEMA = "path string, size long, records long, partition string"
# Java S3FileIO's path-style switch, as pyiceberg names it.
_PATH_STYLE = "s3.path-style-access"
_VIRTUAL = "s3.force-virtual-addressing"


def write_engine(spec: TableSpec) -> str:
    """The writer of ``spec``'s data files: ``write.engine``, with ``auto`` meaning Spark's for now.

    ``auto`` picks Spark's writer until the benchmarks show the Arrow writer faster end to end
    (docs/write.md, "Writers"); validation refuses ``arrow`` where it does not apply.
    """
    engine = spec.write.engine
    return "spark" if engine == "auto" else engine


@dataclass(frozen=True)
class FileTarget:
    """What a Spark task needs to write a table's data files (pickled to Spark's Python workers)."""

    metadata_json: str  # the table's current metadata: schema, spec, properties, location
    io_properties: Mapping[str, str] = field(repr=False)  # may hold (vended) storage credentials
    write_id: str = field(default_factory=lambda: uuid.uuid4().hex)


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
    return FileTarget(metadata, pyiceberg_io_properties(dict(java_table.io().properties())))


def _quiet_checksums() -> None:
    # AWS SDK 2.20+ defaults to chunked checksums, which S3-compatible stores (OSS, SeaweedFS) keep
    # verbatim; clusters pass -Daws.requestChecksumCalculation=when_required to the JVM for the same reason.
    os.environ.setdefault("AWS_REQUEST_CHECKSUM_CALCULATION", "when_required")


def partition_string(value: Any) -> str | None:
    """A partition value as Iceberg's Java ``Conversions.fromPartitionString`` parses it back.

    Transforms' results are their internal values (hours since the epoch, bucket numbers);
    identity values are the column's own. Timestamps and binary values have no such string form.
    """
    import datetime as dt
    import decimal

    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float | decimal.Decimal | uuid.UUID):
        return str(value)
    if isinstance(value, dt.date) and not isinstance(value, dt.datetime):
        return value.isoformat()
    raise TypeError(f"the arrow writer cannot pass a {type(value).__name__} partition value to Iceberg")


# -- Python side (runs in Spark's Python workers) --------------------------------------------------
def write_files(batches: Iterator[pa.RecordBatch], target: FileTarget) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` function: the partition's rows as data files; one output row per file."""
    import pyarrow as pa
    from pyiceberg.io import load_file_io
    from pyiceberg.io.pyarrow import _dataframe_to_data_files
    from pyiceberg.table.metadata import TableMetadataUtil

    out_schema = pa.schema(
        [("path", pa.string()), ("size", pa.int64()), ("records", pa.int64()), ("partition", pa.string())]
    )
    tables = [pa.Table.from_batches([b]) for b in batches if b.num_rows]
    if not tables:
        return
    _quiet_checksums()
    metadata = TableMetadataUtil.parse_raw(target.metadata_json)
    io = load_file_io(dict(target.io_properties), metadata.location)
    data = pa.concat_tables(tables).cast(metadata.schema().as_arrow())
    # One write id per batch and task attempt keeps file names unique across tasks and retries.
    files = _dataframe_to_data_files(metadata, data, io, write_uuid=uuid.uuid4(), counter=itertools.count(0))
    spec = metadata.spec()  # _dataframe_to_data_files writes with the table's default spec
    rows = [
        {
            "path": f.file_path,
            "size": f.file_size_in_bytes,
            "records": f.record_count,
            "partition": json.dumps([partition_string(f.partition[i]) for i in range(len(f.partition))])
            if spec.fields
            else "",
        }
        for f in files
    ]
    yield pa.RecordBatch.from_pylist(rows, schema=out_schema)


# -- Spark side ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class WrittenFile:
    """One data file a task wrote."""

    path: str
    size: int
    records: int
    partition: str  # JSON list of the partition's values (:func:`partition_string`), empty when unpartitioned


def write_frame(rows: DataFrame, target: FileTarget) -> list[WrittenFile]:
    """Write ``rows`` (already shaped like the table) as data files; one Spark job."""
    import functools

    written = rows.mapInArrow(functools.partial(write_files, target=target), FILE_SCHEMA).collect()
    return [WrittenFile(str(r["path"]), int(r["size"]), int(r["records"]), str(r["partition"])) for r in written]


def append_files(spark: SparkSession, java_table: Any, files: list[WrittenFile], properties: Mapping[str, str]) -> None:
    """Append ``files`` to ``java_table`` in one commit whose snapshot summary holds ``properties``.

    Column metrics come from each file's footer, read by Iceberg with the table's metrics config,
    so they are what Spark's writer would have recorded.
    """
    iceberg = spark._jvm.org.apache.iceberg  # type: ignore[union-attr]
    config = iceberg.MetricsConfig.forTable(java_table)
    spec = java_table.spec()
    append = java_table.newAppend()
    for f in files:
        metrics = iceberg.parquet.ParquetUtil.fileMetrics(java_table.io().newInputFile(f.path, f.size), config)
        builder = iceberg.DataFiles.builder(spec).withPath(f.path).withFileSizeInBytes(f.size)
        builder = builder.withFormat("PARQUET").withMetrics(metrics)
        if f.partition:
            builder = builder.withPartitionValues(json.loads(f.partition))
        append.appendFile(builder.build())
    for key, value in properties.items():
        append.set(key, value)
    append.commit()
