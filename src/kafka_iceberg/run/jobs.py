"""A table of a run: its spec (with the environment's defaults applied), its catalog, its pipeline."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from kafka_iceberg.checks.error_topic import ErrorTopicPublisher
from kafka_iceberg.environment import Environment
from kafka_iceberg.errors import ConfigError
from kafka_iceberg.project import effective_catalog
from kafka_iceberg.spec.model import Pipeline, TableSpec, Trigger


@dataclass(frozen=True)
class TableJob:
    """One table with everything resolved around it."""

    pipeline: Pipeline
    spec: TableSpec
    catalog: str
    base_dir: Path

    @property
    def key(self) -> str:
        """``pipeline.namespace.table``: unique within a run."""
        return f"{self.pipeline.pipeline}.{self.spec.identifier}"

    def error_topic_publisher(self, kafka: Mapping[str, Mapping[str, str]]) -> ErrorTopicPublisher | None:
        """The publisher of the table's error topic (None without one), from the run's Kafka client settings."""
        topic = self.spec.errors.error_topic
        if not topic:
            return None
        return ErrorTopicPublisher(
            topic=topic,
            producer_config=dict(kafka["producer"]),
            consumer_config=dict(kafka["admin"]),
            pipeline=self.pipeline.pipeline,
            table=self.spec.identifier,
        )


def select_jobs(
    pipelines: list[Pipeline],
    env: Environment,
    *,
    catalog: str | None,
    formats: set[str] | None,
    available_now: bool,
    source: str,
) -> list[TableJob]:
    """The tables of ``pipelines`` a run takes, each with its catalog and the environment's schema registry.

    Raises:
        ConfigError: no table of the wanted formats (``NO_TABLES``, naming ``source``).
    """
    drain = Trigger(available_now=True)
    jobs = []
    for pipeline in pipelines:
        base_dir = Path(pipeline.source_file).parent
        for declared in pipeline.tables:
            if formats is not None and declared.source.format not in formats:
                continue
            name = catalog or effective_catalog(declared, pipeline, env)
            assert name is not None  # validate_project reported it otherwise
            spec = declared
            if spec.source.reads_env_registry:  # a registry format without a registry of its own
                registry = env.schema_registry
                assert registry is not None  # validate_project reported it otherwise
                spec = spec.with_registry(registry)
            if available_now:
                spec = spec.model_copy(update={"trigger": drain})
            jobs.append(TableJob(pipeline, spec, name, base_dir))
    if not jobs:
        wanted = ", ".join(sorted(formats)) if formats else "any"
        raise ConfigError.one(source, "tables", [], f"at least one table of format {wanted}", "NO_TABLES")
    return jobs
