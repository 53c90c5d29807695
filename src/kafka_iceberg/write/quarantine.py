"""The quarantine table of a target table, appended exactly once per source record.

It holds the records that decoded but failed an expectation, with their original bytes.
"""

from __future__ import annotations

import datetime as dt
import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kafka_iceberg.records import ERROR_COLUMNS, ERROR_SCHEMA_DDL
from kafka_iceberg.source.offsets import Offsets, batch_offsets, merge_offsets
from kafka_iceberg.spec.model import TableSpec
from kafka_iceberg.write.marker import CommitMarker
from kafka_iceberg.write.writer import TableWriter

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, Row, SparkSession

    from kafka_iceberg.write.arrow_files import WrittenFile

QUARANTINE_STREAM = "quarantine"


@dataclass
class QuarantineTable:
    """The quarantine table of one target table; appends exactly once per source record.

    Rows are filtered against the offsets recorded by the quarantine table's own last commit, so
    a batch replayed after a crash — even with different boundaries — adds only what is missing.
    One instance serves all of a target table's batches: its writer keeps the table loaded and what
    was read of it, and each append reads it once from the catalog (and once more to commit).
    """

    spark: SparkSession
    catalog: str
    spec: TableSpec
    pipeline: str

    @functools.cached_property
    def writer(self) -> TableWriter:
        """The quarantine table's writer, made once (one made per batch loaded it four times before its commit)."""
        assert self.spec.errors.quarantine_table is not None
        namespace, name = self.spec.errors.quarantine_table.split(".")
        qspec = TableSpec.model_validate(
            {
                "name": name,
                "namespace": namespace,
                "source": self.spec.source.model_dump(exclude_none=True),
                "partition_window": "none",
                "commit_mode": "append",
                "schema_evolution": "add_columns",
                "maintenance": self.spec.maintenance.model_dump(),
                # A frame of quarantined rows is written by Spark; rows on the driver are written there (_append_rows).
                "write": {"engine": "spark"},
            }
        )
        return TableWriter(self.spark, self.catalog, qspec, pipeline_id=self.pipeline)

    def append(self, errors: DataFrame | list[Row], batch_id: int) -> int:
        """Append the error rows not already quarantined; return how many were added.

        ``errors`` may be rows already on the driver (the single pass's): filtered, counted and
        given their offsets there, so only the table's own write runs in Spark.
        """
        with self.writer.batch():  # the marker lookup's load serves the plan and the data files' target
            return self._append(errors, batch_id)

    def _append(self, errors: DataFrame | list[Row], batch_id: int) -> int:
        last = self.writer.last_commit(QUARANTINE_STREAM)
        if isinstance(errors, list):
            return self._append_rows(last, errors, batch_id)
        from pyspark.sql import functions as F

        frame = errors.select(
            *errors.columns,
            F.lit(self.pipeline).alias("_pipeline"),
            F.lit(self.spec.identifier).alias("_table"),
            F.lit(batch_id).cast("bigint").alias("_batch_id"),
            F.current_timestamp().alias("_quarantined_at"),
        )
        if last is not None and last.offsets:
            done = F.lit(False)
            for topic, parts in last.offsets.items():
                for partition, next_offset in parts.items():
                    done = done | (
                        (F.col("topic") == topic) & (F.col("partition") == partition) & (F.col("offset") < next_offset)
                    )
            frame = frame.where(~done)
        frame = frame.persist()
        try:
            count = frame.count()
            if count:
                self._commit(last, frame, batch_offsets(frame))
            return count
        finally:
            frame.unpersist()

    def _append_rows(self, last: CommitMarker | None, errors: list[Row], batch_id: int) -> int:
        import pyarrow as pa
        from pyspark.sql.pandas.types import to_arrow_schema
        from pyspark.sql.types import (
            LongType,
            StringType,
            StructField,
            StructType,
            TimestampType,
            _parse_datatype_string,
        )

        done = last.offsets if last is not None else {}
        rows = [r for r in errors if r["offset"] >= done.get(r["topic"], {}).get(r["partition"], -1)]
        if not rows:
            return 0
        seen: Offsets = {}
        for r in rows:
            parts = seen.setdefault(r["topic"], {})
            parts[r["partition"]] = max(parts.get(r["partition"], 0), r["offset"] + 1)
        # The same columns, types and nullability as the DataFrame path's literals.
        extra = [("_pipeline", StringType()), ("_table", StringType()), ("_batch_id", LongType()),
                 ("_quarantined_at", TimestampType())]  # fmt: skip
        error_fields = _parse_datatype_string(ERROR_SCHEMA_DDL)
        assert isinstance(error_fields, StructType)
        schema = StructType([*error_fields.fields, *(StructField(n, t, nullable=False) for n, t in extra)])
        now = dt.datetime.now(dt.timezone.utc)
        # Spark's collect gives timestamps as naive datetimes in this process's local time, which
        # pyarrow would read as UTC: made aware first (off by the local offset on any machine not in UTC).
        values = [
            (*(_aware(r[c]) for c in ERROR_COLUMNS), self.pipeline, self.spec.identifier, batch_id, now) for r in rows
        ]
        # A batch's few quarantined rows are written here, with pyarrow, and committed through the
        # Java API: a Spark job for them cost 0.4-0.5 s a batch (benchmarks/fixes.md, stop 50).
        data = pa.Table.from_pylist([dict(zip(schema.names, v, strict=True)) for v in values],
                                    schema=to_arrow_schema(schema))  # fmt: skip
        self.writer.prepare(schema)
        self._commit(last, None, seen, written=self.writer.write_driver_rows(data))
        return len(rows)

    def _commit(
        self,
        last: CommitMarker | None,
        frame: DataFrame | None,
        seen: Offsets,
        written: list[WrittenFile] | None = None,
    ) -> None:
        offsets = merge_offsets(last.offsets if last else None, seen)
        marker = CommitMarker(stream=QUARANTINE_STREAM, batch_id=(last.batch_id + 1) if last else 0, offsets=offsets)
        # a frame: the writer creates or evolves the table first when it needs it
        self.writer.commit(frame, marker, written=written)


def _aware(value: object) -> object:
    """A naive datetime (local time, as Spark's collect gives it) as an aware one; anything else as it is."""
    if isinstance(value, dt.datetime) and value.tzinfo is None:
        return value.astimezone()
    return value
