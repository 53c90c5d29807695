"""Fixtures of the write stage: table specs, batches, markers and an independent pyiceberg reader."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest

from kafka_iceberg.spec.model import TableSpec
from kafka_iceberg.write import CommitMarker, TableWriter
from kafka_iceberg.write.jvm import IcebergTable

BASE_SCHEMA = "id BIGINT, name STRING, pt STRING, offset BIGINT"


def make_spec(namespace: str | None = None, name: str | None = None, **overrides: Any) -> TableSpec:
    """A valid table spec for a JSON-ish topic; keyword overrides replace its keys."""
    data: dict[str, Any] = {
        "name": name or f"t_{uuid.uuid4().hex[:8]}",
        "namespace": namespace or f"ns_{uuid.uuid4().hex[:8]}",
        "source": {"topics": ["orders"], "format": "json"},
        "partition_window": "none",
    }
    data.update(overrides)
    return TableSpec.model_validate(data)


def marker(batch_id: int, stream: str = "orders", **offsets: int) -> CommitMarker:
    """A marker of ``stream`` whose offsets are ``{topic: {0: next}}`` (default: ``orders`` → batch_id + 1)."""
    offs = {t: {0: o} for t, o in offsets.items()} or {"orders": {0: batch_id + 1}}
    return CommitMarker(stream=stream, batch_id=batch_id, offsets=offs)


@pytest.fixture
def new_writer(spark: Any, files_catalog: str) -> Callable[..., TableWriter]:
    """Build a writer on the Hadoop catalog on local disk (fast)."""

    def build(spec: TableSpec | None = None, *, pipeline: str = "shop", **overrides: Any) -> TableWriter:
        return TableWriter(spark, files_catalog, spec or make_spec(**overrides), pipeline_id=pipeline)

    return build


def files_table(writer: TableWriter) -> Any:
    """The writer's table read through pyiceberg from its metadata file (no Spark, no catalog)."""
    from pyiceberg.table import StaticTable

    location = IcebergTable(writer.spark, writer.table).refresh().metadata_location()
    return StaticTable.from_metadata(location)


def rows(table: Any, key: str = "id") -> list[dict[str, Any]]:
    """All rows of a pyiceberg table, sorted by ``key``."""
    return sorted(table.scan().to_arrow().to_pylist(), key=lambda r: (r[key] is None, r[key]))


def summaries(table: Any) -> list[dict[str, str]]:
    """Snapshot summaries of a pyiceberg table, oldest first."""
    return [dict(s.summary.additional_properties, operation=s.summary.operation.value) for s in table.snapshots()]


def column_encodings(parquet: Any) -> dict[str, set[str]]:
    """The Parquet encodings of each column of a file's first row group, by the column's path."""
    import pyarrow.parquet as pq

    chunks = pq.ParquetFile(parquet).metadata.row_group(0)
    return {chunks.column(i).path_in_schema: set(chunks.column(i).encodings) for i in range(chunks.num_columns)}
