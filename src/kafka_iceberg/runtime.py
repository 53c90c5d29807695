"""Turn a pipeline file and an environment into running (or planned) tables.

``plan`` and ``run`` share :func:`prepare` and :func:`open_session`; ``plan`` stops before any
Kafka read or Iceberg change (``dry_run``), which is the only difference between the two.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kafka_iceberg.catalogs import RenderedCatalog, render
from kafka_iceberg.checks.error_topic import ErrorTopicPublisher
from kafka_iceberg.environment import (
    Environment,
    checkpoint_dir,
    load_environment,
    local_resolver,
    references,
    used_catalogs,
)
from kafka_iceberg.errors import ConfigError, KafkaIcebergError, Problem
from kafka_iceberg.kafka import client_config, resolved_client_config, spark_source_options
from kafka_iceberg.observe.eventlog import EventLog
from kafka_iceberg.observe.metrics import JsonLines, Metrics
from kafka_iceberg.observe.progress import Progress
from kafka_iceberg.observe.report import BatchReport, MaintenanceReport
from kafka_iceberg.outages import Endpoint, OutagePolicy, classify, endpoints_from, unavailable
from kafka_iceberg.project import effective_catalog, validate_project
from kafka_iceberg.refs import Resolver, find_refs, iter_strings, mask_mapping
from kafka_iceberg.runner import BatchProcessor
from kafka_iceberg.session import attach_catalogs, get_spark
from kafka_iceberg.spec.columns import payload_columns, table_columns, table_ddl
from kafka_iceberg.spec.model import Pipeline, TableSpec

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TableJob:
    """One table with everything resolved around it."""

    pipeline: Pipeline
    spec: TableSpec
    catalog: str
    base_dir: Path


@dataclass
class Prepared:
    """A validated pipeline in a loaded environment."""

    env: Environment
    resolver: Resolver
    jobs: list[TableJob]
    rendered: dict[str, RenderedCatalog] = field(default_factory=dict)


def resolver_for(env: Environment, environ: Mapping[str, str] | None = None) -> Resolver:
    """A resolver for ``env``: one reading the local stack when the environment refers to it."""
    uses_local = any(
        ref.kind == "local" for _loc, raw in iter_strings(env.model_dump(mode="json")) for ref in find_refs(raw)
    )
    if uses_local:
        return local_resolver(environ)
    return Resolver(env=environ if environ is not None else os.environ)


def prepare(
    pipeline_path: Path, *, env_name: str, catalog: str | None = None, formats: set[str] | None = None
) -> Prepared:
    """Validate everything, load the environment and pick the tables to run.

    Raises:
        ConfigError: every problem of the pipeline, environment or the selection.
    """
    report = validate_project(pipeline_path, env_name=env_name, catalog=catalog, check_bundle=False, formats=formats)
    if report.problems:
        raise ConfigError(report.problems)
    anchor = pipeline_path if pipeline_path.is_dir() else pipeline_path.parent
    env = load_environment(env_name, anchor)
    jobs = []
    for pipeline in report.pipelines:
        base_dir = Path(pipeline.source_file).parent
        for spec in pipeline.tables:
            if formats is None or spec.source.format in formats:
                name = catalog or effective_catalog(spec, pipeline, env)
                assert name is not None  # validate_project reported it otherwise
                jobs.append(TableJob(pipeline, with_registry(spec, env), name, base_dir))
    if not jobs:
        wanted = ", ".join(sorted(formats)) if formats else "any"
        raise ConfigError.one(str(pipeline_path), "tables", [], f"at least one table of format {wanted}", "NO_TABLES")
    prepared = Prepared(env, resolver_for(env), jobs)
    # Only what the run writes to is rendered, so only its references are ever resolved.
    names = used_catalogs(env, {j.catalog for j in jobs})
    prepared.rendered = {n: render(n, env.catalogs[n]) for n in sorted(names)}
    return prepared


def with_registry(spec: TableSpec, env: Environment) -> TableSpec:
    """``spec`` reading the environment's schema registry when it is a registry format without its own."""
    if not spec.source.reads_env_registry:
        return spec
    assert env.schema_registry is not None  # validate_project reported it otherwise
    return spec.model_copy(update={"source": spec.source.model_copy(update={"schema_registry": env.schema_registry})})


def unresolved_references(prepared: Prepared) -> list[Problem]:
    """Resolve every reference the run uses (variables, secrets, the local stack); one problem per failure.

    The references of catalogs the run does not write to are left alone: a job needs only what
    it uses (``ingest-<format> --check``).
    """
    env = prepared.env
    problems = []
    registry = env.schema_registry is not None and any(
        j.spec.source.schema_registry is env.schema_registry for j in prepared.jobs
    )
    for path, ref in references(env, set(prepared.rendered), registry=registry):
        try:
            prepared.resolver.value(ref.text)
        except KafkaIcebergError as exc:  # an unset variable, an unreadable secret, no local stack
            problems.append(
                Problem(env.source_file, path, ref.text, f"a reference that resolves ({exc})", "UNRESOLVED_REFERENCE")
            )
    return problems


def open_session(prepared: Prepared) -> SparkSession:
    """The Spark session with every catalog the tables use attached."""
    jvm_options = sorted({o for r in prepared.rendered.values() for o in r.jvm_options})
    conf = prepared.resolver.resolve_tree(dict(prepared.env.spark_conf))  # ${env:...} and friends, as elsewhere
    spark = get_spark(app_name="kafka-iceberg", conf=conf, jvm_options=jvm_options)
    attach_catalogs(spark, prepared.rendered.values(), prepared.resolver)
    return spark


# -- plan ----------------------------------------------------------------------------------------
def expected_schema(spark: SparkSession, job: TableJob) -> Any:
    """The StructType a table's rows will have (before any user transform)."""
    columns = table_columns(job.spec, payload_columns(job.spec, job.base_dir))
    return spark.createDataFrame([], table_ddl(columns)).schema


def plan(prepared: Prepared, spark: SparkSession) -> list[dict[str, Any]]:
    """Dry run: what each table's run would create or change, and the settings it would use."""
    from kafka_iceberg.write import TableWriter

    out = []
    for job in prepared.jobs:
        writer = TableWriter(spark, job.catalog, job.spec, pipeline_id=job.pipeline.pipeline)
        table_plan = writer.plan(expected_schema(spark, job))
        kafka = prepared.env.kafka
        source = (
            spark_source_options(job.spec.source, kafka)
            if kafka.reader == "spark"
            else client_config(kafka, "consumer") | {"reader": kafka.reader}
        )
        out.append(
            {
                "table": f"{job.catalog}.{job.spec.identifier}",
                "format": job.spec.source.format,
                "mode": job.spec.source.effective_mode,
                "commit_mode": job.spec.commit_mode,
                "writer": writer.engine,
                "schema_evolution": job.spec.schema_evolution,
                "inferred_columns": payload_columns(job.spec, job.base_dir) is None,
                "changes": table_plan.describe(),
                "source": mask_mapping(source),
                "checkpoint": checkpoint_dir(
                    prepared.env, prepared.resolver, job.pipeline.pipeline, job.spec.identifier
                )
                if kafka.reader != "direct"
                else "(offsets in the table's snapshot summary)",
            }
        )
    return out


def catalog_settings(prepared: Prepared) -> dict[str, dict[str, str]]:
    """Rendered Spark settings of each catalog, secrets masked."""
    return {name: mask_mapping(r.conf) for name, r in prepared.rendered.items()}


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


# -- run -----------------------------------------------------------------------------------------
@dataclass
class Observers:
    """Where batch reports go: metrics, JSON lines, the event log, the progress line."""

    metrics: Metrics
    progress: Progress
    jsonl: JsonLines | None = None
    event_log: EventLog | None = None

    def __call__(self, report: BatchReport) -> None:
        """Hand one batch report to every observer."""
        self.metrics.record(report)
        if self.jsonl is not None:
            self.jsonl.write(report.to_json())
        if self.event_log is not None:
            self.event_log.on_batch(report)
        self.progress.update(report)

    def on_maintenance(self, report: MaintenanceReport) -> None:
        """Record one maintenance action (JSON lines and the event log)."""
        if self.jsonl is not None:
            self.jsonl.write(report.to_json())
        if self.event_log is not None:
            self.event_log.on_maintenance(report)

    def close(self) -> None:
        """Flush what is buffered."""
        if self.event_log is not None:
            self.event_log.flush()


def observers_for(prepared: Prepared, spark: SparkSession, pipeline: str, progress: Progress) -> Observers:
    """Observers configured by the environment."""
    env = prepared.env
    jsonl = JsonLines(Path(prepared.resolver.value(env.metrics_dir)), pipeline) if env.metrics_dir else None
    event_log = None
    if env.event_log.enabled:
        catalog = env.event_log.catalog or next(iter(prepared.rendered))
        event_log = EventLog(spark, catalog, env.event_log.table)
    return Observers(Metrics(), progress, jsonl, event_log)


def _publisher(prepared: Prepared, job: TableJob) -> ErrorTopicPublisher | None:
    topic = job.spec.errors.error_topic
    if not topic:
        return None
    kafka = prepared.env.kafka
    return ErrorTopicPublisher(
        topic=topic,
        producer_config=resolved_client_config(kafka, "producer", prepared.resolver),
        consumer_config=resolved_client_config(kafka, "admin", prepared.resolver),
        pipeline=job.pipeline.pipeline,
        table=job.spec.identifier,
    )


@contextmanager
def stop_on_signals() -> Iterator[threading.Event]:
    """Stop cleanly on SIGTERM/SIGINT.

    The first signal sets the returned event: the current batch finishes, then the run stops. A
    second one interrupts at once; the batch is abandoned (Iceberg commits are atomic).
    """
    stop = threading.Event()
    previous: dict[signal.Signals, Any] = {}

    def handler(signum: int, _frame: Any) -> None:
        if stop.is_set():
            raise KeyboardInterrupt
        log.warning("signal %d: stopping after the current batch", signum)
        stop.set()

    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGINT):
            previous[sig] = signal.signal(sig, handler)
    try:
        yield stop
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def ensure_tables(prepared: Prepared, spark: SparkSession) -> None:
    """Create or evolve every table whose columns are declared, before any record is read.

    Flatten tables without a declared schema are created by their first batch instead.
    """
    from kafka_iceberg.write import TableWriter

    for job in prepared.jobs:
        if payload_columns(job.spec, job.base_dir) is None:
            continue
        writer = TableWriter(spark, job.catalog, job.spec, pipeline_id=job.pipeline.pipeline)
        table_plan = writer.plan(expected_schema(spark, job))
        if table_plan.changes:
            writer.apply(table_plan)


def outage_policy(prepared: Prepared) -> OutagePolicy:
    """The environment's ``outage_retry`` settings."""
    settings = prepared.env.outage_retry
    return OutagePolicy(
        settings.num_retries, settings.min_wait_ms, settings.max_wait_ms, source=prepared.env.source_file
    )


def service_endpoints(prepared: Prepared) -> list[Endpoint]:
    """The catalog, object store and broker endpoints of a run, resolved (unresolvable ones left out)."""

    def value(raw: str) -> str:
        try:
            return prepared.resolver.value(raw)
        except Exception:  # an endpoint behind an unset reference only loses its name in messages
            return ""

    catalogs = [(name, {k: value(v) for k, v in r.properties().items()}) for name, r in prepared.rendered.items()]
    kafka = prepared.env.kafka
    return endpoints_from(catalogs, value(kafka.bootstrap_servers) if kafka.reader != "replay" else None)


def run(
    prepared: Prepared,
    spark: SparkSession,
    *,
    stop: threading.Event,
    observers: Observers,
) -> list[BatchReport]:
    """Create the declared tables, then run them with the environment's reader until drained or stopped.

    An outage of the catalog, the object store or the broker is retried from the last commit with
    backoff (:mod:`kafka_iceberg.outages`).

    Raises:
        ServiceUnavailableError: a service stayed unreachable through every retry.
    """
    reports: list[BatchReport] = []
    policy = outage_policy(prepared)
    endpoints = service_endpoints(prepared)
    listener = None
    if prepared.env.kafka.reader != "direct":
        from kafka_iceberg.observe.listener import progress_listener

        names = {f"{j.pipeline.pipeline}.{j.spec.identifier}": (j.pipeline.pipeline, j.spec.identifier)
                 for j in prepared.jobs}  # fmt: skip
        listener = progress_listener(observers.metrics, names)
        spark.streams.addListener(listener)
    failures = 0
    try:
        while True:
            committed = sum(1 for r in reports if r.committed)
            try:
                _run_once(prepared, spark, stop, observers, reports)
                break
            except Exception as exc:
                outage = classify(exc, endpoints)
                if outage is None:
                    raise
                if sum(1 for r in reports if r.committed) > committed:
                    failures = 0  # the service answered for a while: a new outage, a fresh budget
                if failures >= policy.num_retries or stop.is_set():
                    raise unavailable(outage, policy, failures) from exc
                wait = policy.wait_seconds(failures)
                failures += 1
                log.warning(
                    "%s unreachable: %s; outage retry %d/%d in %.1fs, from the last commit",
                    outage.describe(), outage.reason, failures, policy.num_retries, wait,
                )  # fmt: skip
                if stop.wait(wait):
                    raise unavailable(outage, policy, failures - 1) from exc
    except BaseException:
        _close_quietly(observers)
        raise
    finally:
        if listener is not None:
            spark.streams.removeListener(listener)
    observers.close()
    return reports


def _close_quietly(observers: Observers) -> None:
    # The run already failed (often because a service is down): flushing the event log must not
    # replace that error with its own.
    try:
        observers.close()
    except Exception as exc:
        log.warning("event log not flushed: %s", exc.__class__.__name__)


def _run_once(
    prepared: Prepared,
    spark: SparkSession,
    stop: threading.Event,
    observers: Observers,
    reports: list[BatchReport],
) -> None:
    """One attempt: create or evolve the tables, then read from each table's last commit."""
    ensure_tables(prepared, spark)
    processors = [
        BatchProcessor(
            spark,
            job.pipeline.pipeline,
            job.spec,
            job.catalog,
            publisher=_publisher(prepared, job),
            base_dir=job.base_dir,
            observers=[observers, reports.append],
        )
        for job in prepared.jobs
    ]
    try:
        if prepared.env.kafka.reader == "direct":
            _run_direct(prepared, spark, processors, stop)
        else:
            _run_streaming(prepared, spark, processors, stop, observers.metrics)
    finally:
        for processor in processors:
            if processor.publisher is not None:
                processor.publisher.close()


def _run_direct(
    prepared: Prepared, spark: SparkSession, processors: list[BatchProcessor], stop: threading.Event
) -> None:
    from kafka_iceberg.source.direct import DirectReader
    from kafka_iceberg.source.direct_loop import DirectTable, run_available_now, run_processing_time

    kafka = prepared.env.kafka
    consumer = resolved_client_config(kafka, "consumer", prepared.resolver)
    staging = Path(prepared.resolver.value(prepared.env.checkpoint_root)) / "staging"
    tables = [
        DirectTable(
            p,
            DirectReader(spark, p.spec.source, consumer, f"kafka-iceberg.{p.pipeline}.{p.spec.identifier}", staging),
        )
        for p in processors
    ]
    continuous = [t for t in tables if t.processor.spec.trigger.processing_time]
    for table in tables:
        if table not in continuous and not stop.is_set():
            run_available_now(table, stop)
    if continuous:
        interval = min(t.processor.spec.trigger.interval_seconds or 60.0 for t in continuous)
        run_processing_time(continuous, interval, stop)


def _run_streaming(
    prepared: Prepared,
    spark: SparkSession,
    processors: list[BatchProcessor],
    stop: threading.Event,
    metrics: Metrics,
) -> None:
    from kafka_iceberg.observe.listener import record_progress
    from kafka_iceberg.source.replay import replay_stream
    from kafka_iceberg.source.spark_kafka import kafka_stream
    from kafka_iceberg.source.streaming import start_query

    kafka = prepared.env.kafka
    queries = []
    for p in processors:
        if kafka.reader == "replay":
            assert kafka.replay_path is not None
            frame = replay_stream(spark, prepared.resolver.value(kafka.replay_path), p.spec.source, kafka.replay_format)
        else:
            frame = kafka_stream(spark, p.spec.source, kafka, prepared.resolver)
        checkpoint = checkpoint_dir(prepared.env, prepared.resolver, p.pipeline, p.spec.identifier)
        queries.append(
            start_query(
                frame,
                p,
                checkpoint=checkpoint,
                trigger=p.spec.trigger,
                name=f"{p.pipeline}.{p.spec.identifier}",
                attach=lambda session: attach_catalogs(session, prepared.rendered.values(), prepared.resolver),
            )
        )
    try:
        for p, running in zip(processors, queries, strict=True):
            while running.query.isActive and not stop.is_set():
                try:
                    running.query.awaitTermination(1)
                except Exception:  # ended by an error: raised below as the batch raised it
                    break
            error = running.error()
            if error is not None:
                raise error
            if running.query.lastProgress:  # the listener's copy of it may still be on its way
                record_progress(metrics, (p.pipeline, p.spec.identifier), running.query.lastProgress)
    finally:
        for running in queries:
            if running.query.isActive:
                running.query.stop()
