"""The quarantine table of a target table, appended exactly once per source record.

It holds the records that decoded but failed an expectation, with their original bytes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from kafka_iceberg.source.offsets import batch_offsets, merge_offsets
from kafka_iceberg.spec.model import TableSpec
from kafka_iceberg.write.marker import CommitMarker
from kafka_iceberg.write.writer import TableWriter

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

QUARANTINE_STREAM = "quarantine"


@dataclass
class QuarantineTable:
    """The quarantine table of one target table; appends exactly once per source record.

    Rows are filtered against the offsets recorded by the quarantine table's own last commit, so
    a batch replayed after a crash — even with different boundaries — adds only what is missing.
    """

    spark: SparkSession
    catalog: str
    spec: TableSpec
    pipeline: str

    def _writer(self) -> TableWriter:
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
                # A batch's few bad records: Spark's writer, with nothing to gain from the Arrow one's pass.
                "write": {"engine": "spark"},
            }
        )
        return TableWriter(self.spark, self.catalog, qspec, pipeline_id=self.pipeline)

    def append(self, errors: DataFrame, batch_id: int) -> int:
        """Append the error rows not already quarantined; return how many were added."""
        from pyspark.sql import functions as F

        writer = self._writer()
        last = writer.last_commit(QUARANTINE_STREAM) if writer.exists() else None
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
            if count == 0:
                return 0
            offsets = merge_offsets(last.offsets if last else None, batch_offsets(frame))
            writer.apply(writer.plan(frame.schema))
            marker = CommitMarker(
                stream=QUARANTINE_STREAM, batch_id=(last.batch_id + 1) if last else 0, offsets=offsets
            )
            writer.commit(frame, marker)
            return count
        finally:
            frame.unpersist()
