"""A project is its pipeline files, its environments and its bundle, validated together.

:func:`validate_project` is the pure part of ``plan`` and ``run``: it reads files and reports
every problem at once, without a JVM, a broker or a catalog.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kafka_iceberg.config import read_yaml
from kafka_iceberg.environment import (
    Environment,
    available_environments,
    find_environment_file,
    load_environment,
    missing_env_vars,
    unknown_environment,
    used_catalogs,
)
from kafka_iceberg.errors import ConfigError, Problem
from kafka_iceberg.locate import BUNDLE_FILE, project_root
from kafka_iceberg.spec.load import find_pipeline_files, load_pipeline
from kafka_iceberg.spec.model import Pipeline, TableSpec

ENV_VAR = "KAFKA_ICEBERG_ENV"
_VAR_REF = re.compile(r"\$\{var\.([A-Za-z0-9_]+)")


def default_env_name() -> str:
    """``$KAFKA_ICEBERG_ENV``, else ``local`` (the embedded stack)."""
    return os.environ.get(ENV_VAR, "local")


def effective_catalog(table: TableSpec, pipeline: Pipeline, env: Environment) -> str | None:
    """The catalog profile a table writes to: its own, its pipeline's, or the environment's default."""
    name = table.catalog or pipeline.catalog or env.default_catalog
    if name is None and len(env.catalogs) == 1:
        name = next(iter(env.catalogs))
    return name


def catalog_problems(pipeline: Pipeline, env: Environment, override: str | None = None) -> list[Problem]:
    """Tables whose catalog profile does not exist in ``env``."""
    out = []
    known = ", ".join(env.catalogs) or "(none defined)"
    for i, table in enumerate(pipeline.tables):
        name = override or effective_catalog(table, pipeline, env)
        if name is None:
            out.append(
                Problem(
                    pipeline.source_file,
                    f"tables[{i}].catalog",
                    None,
                    f"a catalog profile (none set; {env.source_file} has {known})",
                    "NO_CATALOG",
                )
            )
        elif name not in env.catalogs:
            key = "--catalog" if override else (f"tables[{i}].catalog" if table.catalog else "catalog")
            out.append(
                Problem(
                    pipeline.source_file,
                    key,
                    name,
                    f"a catalog profile of {env.source_file}: {known}",
                    "UNKNOWN_CATALOG",
                )
            )
    return list({(p.key_path, str(p.value)): p for p in out}.values())


def run_catalogs(
    pipelines: list[Pipeline], env: Environment, override: str | None = None, formats: set[str] | None = None
) -> set[str]:
    """The catalogs a run of the ``formats`` tables of ``pipelines`` writes to, the event log's included."""
    names = {
        override or effective_catalog(table, pipeline, env)
        for pipeline in pipelines
        for table in pipeline.tables
        if formats is None or table.source.format in formats
    }
    return used_catalogs(env, {n for n in names if n})


def registry_problems(pipeline: Pipeline, env: Environment) -> list[Problem]:
    """Registry-format tables with no schema registry: neither their own nor ``env``'s."""
    if env.schema_registry is not None:
        return []
    return [
        Problem(
            pipeline.source_file,
            f"tables[{i}].source.schema_registry",
            None,
            f"a schema registry for format {table.source.format}: the table's source.schema_registry, or "
            f"schema_registry (url, auth, subject_strategy) in {env.source_file}"
            + (", or source.avro.schema_file for plain Avro" if table.source.format == "avro" else ""),
            "MISSING_KEY",
        )
        for i, table in enumerate(pipeline.tables)
        if table.source.reads_env_registry
    ]


def reads_env_registry(pipelines: list[Pipeline], formats: set[str] | None = None) -> bool:
    """Whether a run of the ``formats`` tables of ``pipelines`` reads the environment's schema registry."""
    return any(
        table.source.reads_env_registry
        for pipeline in pipelines
        for table in pipeline.tables
        if formats is None or table.source.format in formats
    )


@dataclass
class Report:
    """What ``validate`` checked.

    ``warnings`` never fail validation: references that cannot be resolved here but that no
    table of the checked pipelines uses (another catalog's variables).
    """

    pipelines: list[Pipeline] = field(default_factory=list)
    environments: list[Environment] = field(default_factory=list)
    bundle_files: list[Path] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    warnings: list[Problem] = field(default_factory=list)

    @property
    def tables(self) -> int:
        """Number of tables across all pipelines."""
        return sum(len(p.tables) for p in self.pipelines)

    def environment(self, name: str) -> Environment:
        """The loaded environment ``name`` (validation reported it when it is missing or broken)."""
        return next(env for env in self.environments if env.name == name)


def validate_project(
    pipeline_path: Path,
    *,
    env_name: str | None = None,
    catalog: str | None = None,
    environ: Mapping[str, str] | None = None,
    check_bundle: bool = True,
    formats: set[str] | None = None,
) -> Report:
    """Check pipelines, environments and bundle files together; never raises ConfigError.

    The project (environments, bundle) is found from the current directory first, then from the
    pipeline's path (:mod:`kafka_iceberg.locate`).

    Args:
        pipeline_path: a pipeline file, or a directory of them (``pipelines/``).
        env_name: the environment whose ``${env:...}`` variables must be set, for what the
            pipelines use (their catalogs, Kafka, checkpoints, the event log); those of the other
            catalogs are warnings. Every environment file is still parsed and checked against
            the pipelines' catalogs.
        catalog: a ``--catalog`` override to check instead of each table's own profile.
        environ: environment variables (default ``os.environ``).
        check_bundle: also check ``databricks.yml`` and ``resources/*.yml`` when present.
        formats: only tables of these formats run (``ingest-<format>``); None for all.
    """
    environ = os.environ if environ is None else environ
    report = Report()
    try:
        files = find_pipeline_files(pipeline_path)
    except ConfigError as exc:
        report.problems.extend(exc.problems)
        return report
    for file in files:
        try:
            report.pipelines.append(load_pipeline(file))
        except ConfigError as exc:
            report.problems.extend(exc.problems)
    anchor = pipeline_path if pipeline_path.is_dir() else pipeline_path.parent
    names = available_environments(anchor)
    if env_name and env_name not in names:
        report.problems.append(unknown_environment(env_name, anchor))
    for name in names:
        try:
            env = load_environment(name, anchor)
        except ConfigError as exc:
            report.problems.extend(exc.problems)
            continue
        report.environments.append(env)
        for pipeline in report.pipelines:
            report.problems.extend(catalog_problems(pipeline, env, catalog))
            report.problems.extend(registry_problems(pipeline, env))
        if name == env_name:
            used = run_catalogs(report.pipelines, env, catalog, formats)
            registry = reads_env_registry(report.pipelines, formats)
            report.problems.extend(missing_env_vars(env, environ, used, registry=registry))
            report.warnings.extend(_unused(missing_env_vars(env, environ, used, used=False, registry=registry)))
    root = project_root(anchor)
    if check_bundle and root is not None and (root / BUNDLE_FILE).is_file():
        report.bundle_files, bundle_problems = check_bundle_files(root)
        report.problems.extend(bundle_problems)
    return report


def _unused(problems: list[Problem]) -> list[Problem]:
    """Unset variables that no checked table needs, as warnings naming what does need them."""
    # Only catalog profiles and the schema registry can be unused: catalogs.<name>.… or schema_registry.….
    return [
        dataclasses.replace(
            p,
            hint="no table of this run reads a schema registry"
            if p.key_path.startswith("schema_registry")
            else f"catalog {p.key_path.split('.')[1]} is not used by these tables",
        )
        for p in problems
    ]


def _job_problems(path: Path, key: str, job: Any, root: Path, targets: list[str]) -> list[Problem]:
    from databricks.bundles.jobs import Job

    out: list[Problem] = []
    where = f"resources.jobs.{key}"
    try:
        Job.from_dict(job)
    except Exception as exc:  # databricks-bundles raises plain ValueError/TypeError/KeyError
        out.append(Problem(str(path), where, key, f"a valid Databricks job ({exc})", "INVALID_JOB"))
        return out
    scripts = _entry_points()
    for t, task in enumerate(job.get("tasks") or []):
        wheel = task.get("python_wheel_task")
        if not wheel or wheel.get("package_name") != "kafka_iceberg":
            continue
        tkey = f"{where}.tasks[{t}].python_wheel_task"
        if scripts and wheel.get("entry_point") not in scripts:
            out.append(
                Problem(
                    str(path),
                    f"{tkey}.entry_point",
                    wheel.get("entry_point"),
                    "one of " + ", ".join(sorted(scripts)),
                    "UNKNOWN_ENTRY_POINT",
                )
            )
        args = [str(a) for a in wheel.get("parameters") or []]
        opts = dict(zip(args[::2], args[1::2], strict=False))
        pipeline_arg = opts.get("--pipeline", "")
        local_path = root / pipeline_arg.replace("${workspace.file_path}/", "")
        if not pipeline_arg or not local_path.exists():
            out.append(
                Problem(
                    str(path),
                    f"{tkey}.parameters",
                    pipeline_arg,
                    "--pipeline ${workspace.file_path}/<a pipeline file of this bundle>",
                    "NO_SUCH_FILE",
                )
            )
            continue
        catalog = opts.get("--catalog")
        env_arg = opts.get("--env", "${bundle.target}")
        for target in targets if env_arg == "${bundle.target}" else [env_arg]:
            env_file = find_environment_file(target, local_path.parent, cwd=root)
            if env_file is None:
                out.append(
                    Problem(
                        str(path),
                        f"{tkey}.parameters",
                        target,
                        f"an environment file environments/{target}.yml for target {target}",
                        "UNKNOWN_ENVIRONMENT",
                    )
                )
                continue
            if catalog:
                try:
                    env = load_environment(target, local_path.parent, cwd=root)
                except ConfigError:
                    continue  # reported with the environments
                if catalog not in env.catalogs:
                    out.append(
                        Problem(
                            str(path),
                            f"{tkey}.parameters",
                            catalog,
                            f"a catalog profile of {env_file}: {', '.join(env.catalogs)}",
                            "UNKNOWN_CATALOG",
                        )
                    )
    return out


def _entry_points() -> set[str]:
    from importlib.metadata import entry_points

    return {ep.name for ep in entry_points(group="console_scripts") if ep.value.startswith("kafka_iceberg.")}


def _bundle_shape_problem(path: Path, doc: Any) -> Problem | None:
    """A bundle file whose top level (or ``resources``/``jobs``/``targets``/``variables``) is not a mapping."""
    if not isinstance(doc, Mapping):
        return Problem(str(path), "", doc, "a mapping of bundle keys (bundle, include, resources, ...)", "WRONG_TYPE")
    for key in ("resources", "targets", "variables"):
        if doc.get(key) is not None and not isinstance(doc[key], Mapping):
            return Problem(str(path), key, doc[key], "a mapping", "WRONG_TYPE")
    jobs = (doc.get("resources") or {}).get("jobs")
    if jobs is not None and not isinstance(jobs, Mapping):
        return Problem(str(path), "resources.jobs", jobs, "a mapping of job name to job", "WRONG_TYPE")
    return None


def check_bundle_files(root: Path) -> tuple[list[Path], list[Problem]]:
    """Check ``databricks.yml`` and ``resources/*.yml``: YAML, jobs, entry points, files, variables."""
    files = [root / BUNDLE_FILE, *sorted((root / "resources").glob("*.yml"))]
    problems: list[Problem] = []
    docs: dict[Path, Any] = {}
    for path in files:
        try:
            doc = read_yaml(path) or {}
        except ConfigError as exc:
            problems.extend(exc.problems)
            continue
        shape = _bundle_shape_problem(path, doc)
        if shape:
            problems.append(shape)
            continue
        docs[path] = doc
    main = docs.get(root / BUNDLE_FILE, {})
    targets = list((main.get("targets") or {}).keys())
    declared = set((main.get("variables") or {}).keys())
    for path, doc in docs.items():
        for key, job in ((doc.get("resources") or {}).get("jobs") or {}).items():
            problems.extend(_job_problems(path, key, job, root, targets))
        for name in sorted(set(_VAR_REF.findall(path.read_text())) - declared):
            problems.append(
                Problem(
                    str(path), f"${{var.{name}}}", name, f"a variable declared in {BUNDLE_FILE}", "UNDECLARED_VARIABLE"
                )
            )
    return files, problems
