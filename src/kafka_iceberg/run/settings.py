"""Every value a run reads from its environment, resolved once.

:func:`resolve` is the only place a run resolves ``${env:}``, ``${secret:}`` and ``${local:}``
references: it renders the catalogs the run writes to, checks that every reference the run
needs resolves (one problem per failure), and returns the frozen :class:`Settings` the rest of
the run reads, with the tables' schema registries resolved in their specs.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kafka_iceberg.catalogs import RenderedCatalog, render
from kafka_iceberg.environment import Environment, local_resolver, references, used_catalogs
from kafka_iceberg.errors import ConfigError, KafkaIcebergError, Problem
from kafka_iceberg.refs import Resolver, find_refs, iter_strings, mask_mapping
from kafka_iceberg.run.jobs import TableJob
from kafka_iceberg.run.outages import Endpoint, endpoints_from
from kafka_iceberg.session import on_databricks
from kafka_iceberg.source.kafka import client_config, spark_source_options
from kafka_iceberg.spec.model import TableSpec


@dataclass(frozen=True)
class Settings:
    """Every value a run reads from its environment, resolved once by :func:`prepare`.

    Each ``${env:}``, ``${secret:}`` and ``${local:}`` reference is resolved there; the rest of the
    run reads these and never a resolver. Credentials were registered for log redaction as they
    were resolved, and ``repr`` masks them.
    """

    spark_conf: Mapping[str, str]
    catalogs: Mapping[str, Mapping[str, str]]  # catalog name → its Spark settings
    kafka: Mapping[str, Mapping[str, str]]  # consumer, producer, admin → confluent-kafka settings
    spark_sources: Mapping[str, Mapping[str, str]]  # TableJob.key → Spark's Kafka source options
    checkpoint_root: str
    metrics_dir: str | None
    replay_path: str | None
    endpoints: tuple[Endpoint, ...]

    def checkpoint(self, job: TableJob) -> str:
        """The table's Spark checkpoint location under the environment's checkpoint root."""
        return f"{self.checkpoint_root}/{job.pipeline.pipeline}/{job.spec.identifier}"

    def catalog_properties(self, name: str) -> dict[str, str]:
        """Catalog ``name``'s properties (``uri``, ``warehouse``, ...) without ``spark.sql.catalog.<name>.``."""
        prefix = f"spark.sql.catalog.{name}."
        return {k[len(prefix) :]: v for k, v in self.catalogs[name].items() if k.startswith(prefix)}

    def __repr__(self) -> str:
        masked = {
            "spark_conf": mask_mapping(self.spark_conf),
            "catalogs": {n: mask_mapping(c) for n, c in self.catalogs.items()},
            "kafka": {n: mask_mapping(c) for n, c in self.kafka.items()},
            "spark_sources": {n: mask_mapping(c) for n, c in self.spark_sources.items()},
            "checkpoint_root": self.checkpoint_root,
        }
        return f"Settings({masked})"


def resolve(env: Environment, jobs: list[TableJob]) -> tuple[list[TableJob], dict[str, RenderedCatalog], Settings]:
    """Render the catalogs ``jobs`` write to and resolve everything the run reads.

    Returns:
        the jobs (schema registries resolved), the rendered catalogs, the settings.

    Raises:
        ConfigError: one ``UNRESOLVED_REFERENCE`` problem per reference that does not resolve.
    """
    # Only what the run writes to is rendered, so only its references are ever resolved.
    names = used_catalogs(env, {j.catalog for j in jobs})
    rendered = {n: render(n, env.catalogs[n]) for n in sorted(names)}
    resolver = resolver_for(env, also=jobs)
    problems = unresolved_references(env, rendered, jobs, resolver)
    if problems:
        raise ConfigError(problems)
    jobs = [dataclasses.replace(j, spec=resolved_registry(j.spec, resolver)) for j in jobs]
    return jobs, rendered, resolve_settings(env, rendered, jobs, resolver)


def resolver_for(env: Environment, environ: Mapping[str, str] | None = None, also: Iterable[TableJob] = ()) -> Resolver:
    """A resolver for ``env`` and the tables' own registries; one reading the local stack when they refer to it."""
    raws = [raw for _loc, raw in iter_strings(env.model_dump(mode="json"))]
    raws += [
        raw
        for j in also
        if j.spec.source.schema_registry
        for _l, raw in iter_strings(j.spec.source.schema_registry.model_dump(mode="json"))
    ]
    uses_local = any(ref.kind == "local" for raw in raws for ref in find_refs(raw))
    if uses_local:
        return local_resolver(environ)
    return Resolver(env=environ if environ is not None else os.environ)


def unresolved_references(
    env: Environment, rendered: Mapping[str, RenderedCatalog], jobs: list[TableJob], resolver: Resolver
) -> list[Problem]:
    """Resolve every reference the run uses (variables, secrets, the local stack); one problem per failure.

    The references of catalogs the run does not write to, and of a schema registry no table of
    the run reads, are left alone: a job needs only what it uses (``ingest-<format> --check``).
    """
    registry = env.schema_registry is not None and any(
        j.spec.source.schema_registry is env.schema_registry for j in jobs
    )
    needed = [(env.source_file, path, ref) for path, ref in references(env, set(rendered), registry=registry)]
    for job in jobs:  # a table's own registry is the pipeline file's
        own = job.spec.source.schema_registry
        if own is None or own is env.schema_registry:
            continue
        i = next(i for i, t in enumerate(job.pipeline.tables) if t.identifier == job.spec.identifier)
        for loc, raw in iter_strings(own.model_dump(mode="json")):
            path = ".".join([f"tables[{i}].source.schema_registry", *map(str, loc)])
            needed += [(job.pipeline.source_file, path, ref) for ref in find_refs(raw)]
    problems = []
    for file, path, ref in needed:
        try:
            resolver.value(ref.text)
        except KafkaIcebergError as exc:  # an unset variable, an unreadable secret, no local stack
            problems.append(Problem(file, path, ref.text, f"a reference that resolves ({exc})", "UNRESOLVED_REFERENCE"))
    return problems


def resolved_registry(spec: TableSpec, resolver: Resolver) -> TableSpec:
    """``spec`` with its schema registry's URL and credentials resolved (credentials registered for redaction)."""
    registry = spec.source.schema_registry
    if registry is None:
        return spec
    update: dict[str, Any] = {"url": resolver.value(registry.url)}
    if registry.auth is not None:
        auth = registry.auth.model_dump()
        update["auth"] = registry.auth.model_copy(
            update={k: resolver.setting(k, v) for k, v in auth.items() if isinstance(v, str)}
        )
    source = spec.source.model_copy(update={"schema_registry": registry.model_copy(update=update)})
    return spec.model_copy(update={"source": source})


def resolve_settings(
    env: Environment, rendered: Mapping[str, RenderedCatalog], jobs: list[TableJob], resolver: Resolver
) -> Settings:
    """The run's :class:`Settings` (every reference they hold resolves: :func:`unresolved_references`)."""
    kafka = env.kafka
    if kafka.sasl_password:  # inside the JAAS line of the Spark source: registered by itself too, for redaction
        resolver.setting("sasl_password", kafka.sasl_password)
    sources = {j.key: resolver.settings(source_options(env, j)) for j in jobs} if kafka.reader == "spark" else {}
    catalogs = {name: resolver.settings(r.conf) for name, r in rendered.items()}
    settings = Settings(
        spark_conf=resolver.resolve_tree(dict(env.spark_conf)),
        catalogs=catalogs,
        kafka={kind: resolver.settings(client_config(kafka, kind)) for kind in ("consumer", "producer", "admin")},
        spark_sources=sources,
        checkpoint_root=resolver.value(env.checkpoint_root).rstrip("/"),
        metrics_dir=resolver.value(env.metrics_dir) if env.metrics_dir else None,
        replay_path=resolver.value(kafka.replay_path) if kafka.replay_path else None,
        endpoints=(),
    )
    bootstrap = settings.kafka["consumer"]["bootstrap.servers"] if kafka.reader != "replay" else None
    props = [(name, settings.catalog_properties(name)) for name in rendered]
    return dataclasses.replace(settings, endpoints=tuple(endpoints_from(props, bootstrap)))


def source_options(env: Environment, job: TableJob) -> dict[str, str]:
    """The settings ``job``'s reader runs with, references unresolved (``plan`` shows these, masked)."""
    kafka = env.kafka
    if kafka.reader == "spark":
        return spark_source_options(job.spec.source, kafka, shaded=on_databricks())
    if kafka.reader == "replay":
        return {"reader": "replay", "path": kafka.replay_path or "", "format": kafka.replay_format}
    return client_config(kafka, "consumer") | {"reader": kafka.reader}
