"""What a run does to its tables before it reads a record, planned once: ``plan`` prints it, ``run`` does it.

:func:`plan_tables` is the first step of every run attempt (:mod:`kafka_iceberg.run.loop`):
each :class:`TableRun` holds the table's writer, the changes it needs before its first batch,
the reader settings and the checkpoint the run then uses. ``plan`` is the same call, described
instead of applied, so what it prints is what ``run`` would do.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kafka_iceberg.refs import mask_mapping
from kafka_iceberg.run.jobs import TableJob
from kafka_iceberg.run.prepared import Prepared
from kafka_iceberg.spec.columns import payload_columns, table_columns, table_ddl
from kafka_iceberg.spec.model import TableSpec
from kafka_iceberg.write import TablePlan, TableWriter

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@dataclass(frozen=True)
class TableRun:
    """One table of a run, planned: what happens to it before and while its records are read."""

    job: TableJob
    writer: TableWriter
    changes: TablePlan | None  # what the table needs for its declared columns; None: they come from the data
    source: dict[str, str]  # the reader's settings as the environment states them (references unresolved)
    checkpoint: str | None  # Spark's checkpoint; None for the direct reader (offsets live in the markers)

    def _first_batch(self) -> str:
        exists = self.writer.exists()
        action = "evolved" if exists else "created"
        return f"table {self.job.catalog}.{self.job.spec.identifier}\n  {action} by its first batch"

    def describe(self) -> dict[str, Any]:
        """What ``kafka-iceberg plan`` prints for this table (secrets masked)."""
        spec = self.job.spec
        return {
            "table": f"{self.job.catalog}.{spec.identifier}",
            "format": spec.source.format,
            "mode": spec.source.effective_mode,
            "commit_mode": spec.commit_mode,
            "writer": self.writer.engine,
            "schema_evolution": spec.schema_evolution,
            "inferred_columns": self.changes is None,
            "changes": self.changes.describe() if self.changes is not None else self._first_batch(),
            "source": mask_mapping(self.source),
            "checkpoint": self.checkpoint or "(offsets in the table's snapshot summary)",
        }


def expected_schema(spark: SparkSession, job: TableJob) -> Any:
    """The StructType a table's rows will have (before any user transform)."""
    columns = table_columns(job.spec, payload_columns(job.spec, job.base_dir))
    return spark.createDataFrame([], table_ddl(columns)).schema


def plan_tables(prepared: Prepared, spark: SparkSession) -> list[TableRun]:
    """Each table's plan: read from the catalog, nothing changed."""
    out = []
    direct = prepared.env.kafka.reader == "direct"
    for job in prepared.jobs:
        writer = TableWriter(spark, job.catalog, job.spec, pipeline_id=job.pipeline.pipeline)
        declared = payload_columns(job.spec, job.base_dir) is not None
        out.append(
            TableRun(
                job=job,
                writer=writer,
                changes=writer.plan(expected_schema(spark, job)) if declared else None,
                source=dict(prepared.sources[job.key]),
                checkpoint=None if direct else prepared.settings.checkpoints[job.key],
            )
        )
    return out


def plan(prepared: Prepared, spark: SparkSession) -> list[dict[str, Any]]:
    """Dry run: the run's own plan of each table, described; nothing read, nothing changed."""
    return [table.describe() for table in plan_tables(prepared, spark)]


def ensure_tables(tables: list[TableRun]) -> None:
    """Create or evolve every table whose columns are declared, before any record is read.

    Flatten tables without a declared schema are created by their first batch instead.
    """
    for table in tables:
        if table.changes is not None and table.changes.changes:
            table.writer.apply(table.changes)


def maintenance_targets(prepared: Prepared, spark: SparkSession) -> list[tuple[str, str, TableSpec]]:
    """Existing tables to maintain: each target table, its quarantine table, the event log."""

    def exists(name: str) -> bool:
        try:
            return bool(spark.catalog.tableExists(name))
        except Exception:  # an unreachable namespace is not a table to maintain
            return False

    out = []
    for job in prepared.jobs:
        pid = job.pipeline.pipeline
        if exists(f"{job.catalog}.{job.spec.identifier}"):
            out.append((pid, job.catalog, job.spec))
        quarantine = job.spec.errors.quarantine_table
        if quarantine and exists(f"{job.catalog}.{quarantine}"):
            namespace, name = quarantine.split(".")
            out.append((pid, job.catalog, job.spec.model_copy(update={"name": name, "namespace": namespace})))
    log_settings = prepared.env.event_log
    if log_settings.enabled and log_settings.catalog and exists(f"{log_settings.catalog}.{log_settings.table}"):
        namespace, name = log_settings.table.rsplit(".", 1)
        template = prepared.jobs[0].spec
        out.append(
            ("kafka_iceberg", log_settings.catalog, template.model_copy(update={"name": name, "namespace": namespace}))
        )
    return out
