"""A pipeline file and an environment, validated, loaded and resolved: the tables a run (or a plan) touches.

:func:`prepare` is the first step of ``run``, ``plan``, ``--check`` and ``maintain``: it validates
the project (:mod:`kafka_iceberg.project`), selects the tables (:mod:`.jobs`) and resolves what
they read (:mod:`.settings`); everything after it reads the :class:`Prepared` it returns.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from kafka_iceberg.catalogs import RenderedCatalog
from kafka_iceberg.environment import Environment
from kafka_iceberg.errors import ConfigError
from kafka_iceberg.project import validate_project
from kafka_iceberg.refs import mask_mapping
from kafka_iceberg.run.jobs import TableJob, select_jobs
from kafka_iceberg.run.settings import Settings, resolve
from kafka_iceberg.session import apply_run_defaults, attach_resolved, get_spark

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@dataclass(frozen=True)
class Prepared:
    """A validated pipeline in a loaded environment, with everything it reads resolved."""

    env: Environment
    jobs: tuple[TableJob, ...]
    rendered: Mapping[str, RenderedCatalog]  # the catalogs the run writes to, references unresolved
    sources: Mapping[str, Mapping[str, str]]  # TableJob.key → its reader's settings, references unresolved
    settings: Settings


def prepare(
    pipeline_path: Path,
    *,
    env_name: str,
    catalog: str | None = None,
    formats: set[str] | None = None,
    available_now: bool = False,
) -> Prepared:
    """Validate everything, load the environment, pick the tables to run and resolve what they read.

    Args:
        pipeline_path: a pipeline file or a directory of them.
        env_name: the environment (``environments/<name>.yml``).
        catalog: a catalog profile overriding the tables' own.
        formats: only the tables of these formats (an ``ingest-<format>`` entry point).
        available_now: drain what the topics hold and stop, whatever each table's trigger says.

    Raises:
        ConfigError: every problem of the pipeline, environment or the selection, and every
            reference the run needs that does not resolve (``UNRESOLVED_REFERENCE``).
    """
    report = validate_project(pipeline_path, env_name=env_name, catalog=catalog, check_bundle=False, formats=formats)
    if report.problems:
        raise ConfigError(report.problems)
    env = report.environment(env_name)
    jobs = select_jobs(
        report.pipelines, env, catalog=catalog, formats=formats, available_now=available_now, source=str(pipeline_path)
    )
    resolved = resolve(env, jobs)
    return Prepared(env, tuple(resolved.jobs), resolved.rendered, resolved.sources, resolved.settings)


def open_session(prepared: Prepared) -> SparkSession:
    """The Spark session with every catalog the tables use attached and the run's SQL defaults (``RUN_DEFAULTS``)."""
    jvm_options = sorted({o for r in prepared.rendered.values() for o in r.jvm_options})
    spark = get_spark(app_name="kafka-iceberg", conf=dict(prepared.settings.spark_conf), jvm_options=jvm_options)
    apply_run_defaults(spark)
    attach_resolved(spark, prepared.rendered.values(), prepared.settings.catalogs)
    return spark


def catalog_settings(prepared: Prepared) -> dict[str, dict[str, str]]:
    """Rendered Spark settings of each catalog, secrets masked."""
    return {name: mask_mapping(r.conf) for name, r in prepared.rendered.items()}
