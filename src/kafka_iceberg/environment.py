"""Environments: which catalogs, which Kafka cluster and where checkpoints live, per deployment.

An environment is ``environments/<name>.yml`` of the project (found from the current directory,
then from the pipeline's path: :mod:`kafka_iceberg.locate`). ``local`` points at the embedded
stack through ``${local:...}`` references and is built in (a packaged copy) for projects without
their own; ``dev``, ``staging`` and ``prod`` point at the workspace through ``${env:...}`` and
``${secret:...}`` references.

A run needs only the references of what it uses: its Kafka settings, checkpoints, metrics,
Spark settings, the catalogs its tables (and the event log) write to, and the schema registry
when it reads registry formats. References of the rest are still shape-checked, and reported by
``validate`` as warnings.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, model_validator

from kafka_iceberg.catalogs import CatalogProfile
from kafka_iceberg.config import Frozen, key_path, parse_model, read_yaml
from kafka_iceberg.errors import ConfigError, Problem
from kafka_iceberg.locate import environment_dirs
from kafka_iceberg.refs import Ref, Resolver, ref_problem, references_in
from kafka_iceberg.spec.model import SchemaRegistry

DEFAULT_ENV = "local"
# The embedded stack's environment, packaged: `--env local` works without environments/local.yml.
# A byte-identical copy of environments/local.yml (a test keeps them equal).
BUILTIN_LOCAL = Path(__file__).resolve().parent / "local" / "environment.yml"

KafkaReader = Literal["spark", "direct", "replay"]


class KafkaSettings(Frozen):
    """How jobs in this environment reach Kafka."""

    bootstrap_servers: str
    # spark: Spark's Kafka source (Databricks); direct: confluent-kafka reader (local, single node);
    # replay: Kafka-shaped record files under replay_path.
    reader: KafkaReader = "spark"
    replay_path: str | None = None
    replay_format: Literal["parquet", "jsonl"] = "parquet"
    security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = "PLAINTEXT"
    sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] | None = None
    sasl_username: str | None = None
    sasl_password: str | None = Field(default=None, repr=False)  # never in a traceback's locals
    ssl_ca_location: str | None = None
    consumer: dict[str, str | int | bool] = Field(default_factory=dict)
    producer: dict[str, str | int | bool] = Field(default_factory=dict)
    spark_options: dict[str, str] = Field(default_factory=dict)
    fail_on_data_loss: bool = True

    @model_validator(mode="after")
    def _replay_needs_path(self) -> KafkaSettings:
        if self.reader == "replay" and not self.replay_path:
            raise ValueError("replay_path when reader is 'replay'")
        if self.sasl_mechanism and not self.security_protocol.startswith("SASL"):
            raise ValueError("security_protocol SASL_SSL or SASL_PLAINTEXT when sasl_mechanism is set")
        return self


class EventLogSettings(Frozen):
    """Where per-batch and maintenance events are appended (an Iceberg table)."""

    catalog: str | None = None
    table: str = "kafka_iceberg.event_log"
    enabled: bool = True


OUTAGE_NUM_RETRIES_DEFAULT = 5
OUTAGE_MIN_WAIT_MS_DEFAULT = 2_000
OUTAGE_MAX_WAIT_MS_DEFAULT = 60_000


class OutageRetry(Frozen):
    """How a run rides out an outage of the catalog, the object store or the broker (docs/operations.md).

    After a connection-level failure the run waits ``min_wait_ms``, doubled per retry and capped at
    ``max_wait_ms``, then starts again from the last commit; after ``num_retries`` retries in a row
    without a committed batch it fails naming the service. The defaults wait 2+4+8+16+32 s.
    """

    num_retries: int = Field(OUTAGE_NUM_RETRIES_DEFAULT, ge=0)
    min_wait_ms: int = Field(OUTAGE_MIN_WAIT_MS_DEFAULT, ge=0)
    max_wait_ms: int = Field(OUTAGE_MAX_WAIT_MS_DEFAULT, ge=0)


class Environment(Frozen):
    """One deployment target, as read from ``environments/<name>.yml``."""

    name: str = Field("", exclude=True)
    kafka: KafkaSettings
    checkpoint_root: str
    default_catalog: str | None = None
    catalogs: dict[str, CatalogProfile] = Field(default_factory=dict)
    event_log: EventLogSettings = Field(default_factory=EventLogSettings)
    metrics_dir: str | None = None
    spark_conf: dict[str, str] = Field(default_factory=dict)
    outage_retry: OutageRetry = Field(default_factory=OutageRetry)
    # The registry of every avro/protobuf/json_schema table without its own source.schema_registry:
    # like Kafka's address it differs per deployment, not per table.
    schema_registry: SchemaRegistry | None = None
    source_file: str = Field("", exclude=True)

    def catalog_names(self) -> list[str]:
        """Profile names, in file order."""
        return list(self.catalogs)


def find_environment_file(name: str, start: Path, cwd: Path | None = None) -> Path | None:
    """The file of environment ``name``: the first ``environments/<name>.yml`` searched, else the built-in ``local``.

    Args:
        name: the environment (``--env``).
        start: the pipeline file or directory.
        cwd: the directory the command runs in (default: the current directory), searched first.
    """
    for directory in environment_dirs(start, cwd):
        for suffix in (".yml", ".yaml"):
            candidate = directory / f"{name}{suffix}"
            if candidate.is_file():
                return candidate
    return BUILTIN_LOCAL if name == DEFAULT_ENV else None


def available_environments(start: Path, cwd: Path | None = None) -> list[str]:
    """Names of every environment visible from ``start`` (and ``cwd``), ``local`` included."""
    names = {DEFAULT_ENV}
    for directory in environment_dirs(start, cwd):
        if directory.is_dir():
            names.update(p.stem for p in directory.glob("*.y*ml"))
    return sorted(names)


def unknown_environment(name: str, start: Path, cwd: Path | None = None) -> Problem:
    """The problem of an ``--env`` that no searched directory defines; it lists what was searched."""
    known = ", ".join(available_environments(start, cwd))
    searched = ", ".join(str(d / f"{name}.yml") for d in environment_dirs(start, cwd))
    return Problem(str(start), "--env", name, f"one of {known} (searched {searched})", "UNKNOWN_ENVIRONMENT")


def parse_environment(data: Any, *, file: str, name: str) -> Environment:
    """Pure step: dict → Environment, with every problem reported at once."""
    if not isinstance(data, Mapping):
        raise ConfigError.one(file, "", data, "a mapping with kafka, checkpoint_root and catalogs", "WRONG_TYPE")
    problems: list[Problem] = []
    for loc, ref in references_in(data):
        why = ref_problem(ref)
        if why:
            problems.append(Problem(file, key_path(loc), ref.text, why, "BAD_REFERENCE"))
    try:
        env = parse_model(Environment, {**data, "name": name, "source_file": file}, file=file)
    except ConfigError as exc:
        problems.extend(exc.problems)
        raise ConfigError(problems) from None
    if env.default_catalog and env.default_catalog not in env.catalogs:
        problems.append(
            Problem(
                file, "default_catalog", env.default_catalog, "one of " + ", ".join(env.catalogs), "UNKNOWN_CATALOG"
            )
        )
    if env.event_log.catalog and env.event_log.catalog not in env.catalogs:
        problems.append(
            Problem(
                file, "event_log.catalog", env.event_log.catalog, "one of " + ", ".join(env.catalogs), "UNKNOWN_CATALOG"
            )
        )
    if problems:
        raise ConfigError(problems)
    return env


def load_environment(name: str, start: Path, cwd: Path | None = None) -> Environment:
    """Find and parse the environment ``name`` visible from ``cwd`` and ``start`` (:func:`find_environment_file`).

    Raises:
        ConfigError: no such environment file, or it is invalid.
    """
    path = find_environment_file(name, start, cwd)
    if path is None:
        raise ConfigError([unknown_environment(name, start, cwd)])
    return parse_environment(read_yaml(path), file=str(path), name=name)


def used_catalogs(env: Environment, table_catalogs: Collection[str]) -> set[str]:
    """The catalogs a run writes to: its tables' (after ``--catalog``) and the event log's when enabled."""
    used = set(table_catalogs)
    if env.event_log.enabled and env.event_log.catalog:
        used.add(env.event_log.catalog)
    return used


def _read_by_run(loc: tuple[str | int, ...], catalogs: Collection[str] | None, registry: bool) -> bool:
    """Whether a run writing to ``catalogs`` (None: all) reads the environment's value at ``loc``."""
    if loc[0] == "catalogs":
        return catalogs is None or (len(loc) > 1 and loc[1] in catalogs)
    return registry or loc[0] != "schema_registry"


def needed_values(env: Environment, catalogs: Collection[str], *, registry: bool) -> dict[str, Any]:
    """The environment as its file holds it, less what a run writing to ``catalogs`` does not read.

    The catalog profiles it does not write to are left out, and ``schema_registry`` unless
    ``registry`` (a table of the run reads it); see :func:`references`.
    """
    data = env.model_dump(mode="json")
    data["catalogs"] = {n: p for n, p in data["catalogs"].items() if _read_by_run(("catalogs", n), catalogs, registry)}
    if not _read_by_run(("schema_registry",), catalogs, registry):
        data.pop("schema_registry", None)
    return data


def references(
    env: Environment, catalogs: Collection[str] | None = None, *, used: bool = True, registry: bool = True
) -> list[tuple[str, Ref]]:
    """``(key path, reference)`` of every reference a run writing to ``catalogs`` needs.

    Kafka, checkpoints, metrics and Spark settings are needed by every run; a catalog profile only
    by runs that write to it (``catalogs=None``: all of them), ``schema_registry`` only by runs
    whose tables read it (``registry``). ``used=False`` returns the references the run does not
    need instead.
    """
    out: list[tuple[str, Ref]] = []
    for loc, ref in references_in(env.model_dump(mode="json")):
        if _read_by_run(loc, catalogs, registry) == used:
            out.append((key_path(loc), ref))
    return out


def missing_env_vars(
    env: Environment,
    environ: Mapping[str, str],
    catalogs: Collection[str] | None = None,
    *,
    used: bool = True,
    registry: bool = True,
) -> list[Problem]:
    """``${env:VAR}`` references whose variable is unset, among those :func:`references` selects."""
    return [
        Problem(env.source_file, path, ref.text, f"environment variable {ref.name} to be set", "UNSET_ENV_VAR")
        for path, ref in references(env, catalogs, used=used, registry=registry)
        if ref.kind == "env" and ref.name not in environ
    ]


def local_resolver(environ: Mapping[str, str] | None = None, stack_dir: Path | None = None) -> Resolver:
    """A resolver whose ``${local:...}`` references read the local stack in ``stack_dir``.

    ``stack_dir`` defaults to :func:`kafka_iceberg.paths.run_dir`; the stack is asked once.
    """
    import functools
    import os

    from kafka_iceberg.local.stack import LocalStack
    from kafka_iceberg.paths import run_dir

    describe = functools.cache(lambda: LocalStack(stack_dir or run_dir()).status())
    return Resolver(env=environ if environ is not None else os.environ, local=describe)


__all__ = [
    "DEFAULT_ENV",
    "Environment",
    "EventLogSettings",
    "KafkaSettings",
    "OutageRetry",
    "available_environments",
    "find_environment_file",
    "load_environment",
    "local_resolver",
    "missing_env_vars",
    "needed_values",
    "parse_environment",
    "references",
    "unknown_environment",
    "used_catalogs",
]
