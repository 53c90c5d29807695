"""Every value a run reads from its environment, resolved once.

:func:`resolve` is the only place a run resolves ``${env:}``, ``${secret:}`` and ``${local:}``
references, in one pass: it gathers every setting the run reads (references unresolved) into one
tree, resolves the tree (every failing reference reported with its file and key), and returns the
frozen :class:`Settings` the rest of the run reads, with the tables' schema registries resolved.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

from kafka_iceberg.catalogs import RenderedCatalog, catalog_properties, render
from kafka_iceberg.config import key_path
from kafka_iceberg.environment import Environment, local_resolver, needed_values, used_catalogs
from kafka_iceberg.errors import ConfigError, Problem
from kafka_iceberg.refs import Ref, mask_mapping
from kafka_iceberg.run.jobs import TableJob
from kafka_iceberg.run.outages import Endpoint, endpoints_from
from kafka_iceberg.session import on_databricks
from kafka_iceberg.source.kafka import ClientKind, client_config, spark_source_options

Location = tuple[str | int, ...]
CLIENTS: tuple[ClientKind, ...] = ("consumer", "producer", "admin")


@dataclass(frozen=True)
class Settings:
    """Every value a run reads from its environment, resolved once by :func:`resolve`.

    Each ``${env:}``, ``${secret:}`` and ``${local:}`` reference is resolved there; the rest of the
    run reads these and never a resolver. Credentials were registered for log redaction as they
    were resolved, and ``repr`` masks them.
    """

    spark_conf: Mapping[str, str]
    catalogs: Mapping[str, Mapping[str, str]]  # catalog name → its Spark settings
    kafka: Mapping[str, Mapping[str, str]]  # consumer, producer, admin → confluent-kafka settings
    spark_sources: Mapping[str, Mapping[str, str]]  # TableJob.key → Spark's Kafka source options
    checkpoint_root: str
    checkpoints: Mapping[str, str]  # TableJob.key → its Spark checkpoint under the root
    metrics_dir: str | None
    replay_path: str | None
    endpoints: tuple[Endpoint, ...]

    def __repr__(self) -> str:
        masked = {
            "spark_conf": mask_mapping(self.spark_conf),
            "catalogs": {n: mask_mapping(c) for n, c in self.catalogs.items()},
            "kafka": {n: mask_mapping(c) for n, c in self.kafka.items()},
            "spark_sources": {n: mask_mapping(c) for n, c in self.spark_sources.items()},
            "checkpoint_root": self.checkpoint_root,
        }
        return f"Settings({masked})"


@dataclass(frozen=True)
class Resolved:
    """What :func:`resolve` returns: the jobs with their registries resolved, and what the run reads."""

    jobs: list[TableJob]
    rendered: dict[str, RenderedCatalog]  # the catalogs the run writes to, references kept (plan prints them)
    sources: dict[str, dict[str, str]]  # TableJob.key → its reader's settings, references kept (plan prints them)
    settings: Settings


def resolve(env: Environment, jobs: list[TableJob], environ: Mapping[str, str] | None = None) -> Resolved:
    """Gather every setting ``jobs`` read, resolve them in one pass, and return them.

    Only what the run uses is gathered: the catalogs it writes to, the schema registry only when a
    table reads it (a job needs only what it uses: ``ingest-<format> --check``).

    Raises:
        ConfigError: one ``UNRESOLVED_REFERENCE`` problem, naming its file and key, per reference
            that does not resolve.
    """
    sources = {j.key: source_options(env, j) for j in jobs}
    kafka = env.kafka
    clients = {kind: client_config(kafka, kind) for kind in CLIENTS}
    names = used_catalogs(env, {j.catalog for j in jobs})
    reads_env_registry = any(j.spec.source.schema_registry is env.schema_registry is not None for j in jobs)
    # Everything the run needs resolves before it starts, even what only a later step reads.
    environment = needed_values(env, names, registry=reads_env_registry)
    resolver = local_resolver(environ)  # the local stack is asked only when a ${local:} is met
    registries = {j.key: j.spec.source.schema_registry for j in jobs if j.spec.source.schema_registry is not None}
    rendered = {n: render(n, env.catalogs[n]) for n in sorted(names)}
    values, failures = resolver.resolve_all(
        {
            "environment": environment,  # first: a failure is reported where the file holds it
            "registries": {key: registry.unresolved_values() for key, registry in registries.items()},
            "spark_conf": dict(env.spark_conf),
            "catalogs": {n: r.conf for n, r in rendered.items()},
            "kafka": clients,
            "spark_sources": sources if kafka.reader == "spark" else {},
            "paths": {
                "checkpoint_root": env.checkpoint_root,
                "metrics_dir": env.metrics_dir,
                "replay_path": kafka.replay_path,
            },
            # Inside the Spark source's JAAS line too: registered by itself as well, for redaction.
            "secrets": {"sasl_password": kafka.sasl_password},
        }
    )
    if failures:
        raise ConfigError(_problems(env, jobs, failures))
    root = values["paths"]["checkpoint_root"].rstrip("/")
    bootstrap = values["kafka"]["consumer"]["bootstrap.servers"] if kafka.reader != "replay" else None
    props = [(name, catalog_properties(name, conf)) for name, conf in values["catalogs"].items()]
    settings = Settings(
        spark_conf=values["spark_conf"],
        catalogs=values["catalogs"],
        kafka=values["kafka"],
        spark_sources=values["spark_sources"],
        checkpoint_root=root,
        checkpoints={j.key: f"{root}/{j.pipeline.pipeline}/{j.spec.identifier}" for j in jobs},
        metrics_dir=values["paths"]["metrics_dir"],
        replay_path=values["paths"]["replay_path"],
        endpoints=tuple(endpoints_from(props, bootstrap)),
    )
    resolved = {key: registry.resolved(values["registries"][key]) for key, registry in registries.items()}
    jobs = [
        dataclasses.replace(j, spec=j.spec.with_registry(resolved[j.key])) if j.key in resolved else j for j in jobs
    ]
    return Resolved(jobs, rendered, sources, settings)


def _problems(env: Environment, jobs: list[TableJob], failures: list[tuple[Location, Ref, str]]) -> list[Problem]:
    """One problem per place a file holds a failing reference (the resolved tree's own layout says where)."""
    own = {j.key: j for j in jobs if j.spec.source.schema_registry is not env.schema_registry}
    problems, reported = [], set()
    for loc, ref, why in failures:
        if loc[0] == "environment":
            file, path = env.source_file, key_path(loc[1:])
        elif loc[0] == "registries" and loc[1] in own:  # a table's own registry: its pipeline file's
            job = own[str(loc[1])]
            i = next(i for i, t in enumerate(job.pipeline.tables) if t.identifier == job.spec.identifier)
            file, path = job.pipeline.source_file, key_path(("tables", i, "source", "schema_registry", *loc[2:]))
        elif ref.text in reported:
            continue  # a setting made from a value the file holds: reported there
        else:
            file, path = env.source_file, ""  # made from no key a file holds as such (a topic name, say)
        reported.add(ref.text)
        problems.append(Problem(file, path, ref.text, f"a reference that resolves ({why})", "UNRESOLVED_REFERENCE"))
    return problems


def source_options(env: Environment, job: TableJob) -> dict[str, str]:
    """The settings ``job``'s reader runs with, references unresolved (``plan`` shows these, masked)."""
    kafka = env.kafka
    if kafka.reader == "spark":
        return spark_source_options(job.spec.source, kafka, shaded=on_databricks())
    if kafka.reader == "replay":
        return {"reader": "replay", "path": kafka.replay_path or "", "format": kafka.replay_format}
    return client_config(kafka, "consumer") | {"reader": kafka.reader}
