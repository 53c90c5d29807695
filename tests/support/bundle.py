"""The bundle as the Databricks CLI renders it for one target, for tests that run its jobs.

``render(target)`` reads ``databricks.yml`` and its ``include`` globs, merges the target's
overrides (from every file), gives every declared variable its value (``--var`` overrides, the
target's value, the default: the CLI refuses a target leaving one unset, and so does this),
applies the bundle's Python mutators (``python.mutators``) and substitutes ``${var.*}`` (complex
variables keep their structure), ``${bundle.*}`` and ``${workspace.*}``. ``${workspace.file_path}``
is the repository: it stands in for the bundle files the CLI syncs to the workspace.

Jobs, tasks and their clusters come out generically: nothing here names a job.
``{{secrets/<scope>/<key>}}`` values of a cluster's ``spark_env_vars`` are left for
:func:`cluster_environment`, which resolves them from a stand-in secret scope, as a cluster does
when it starts.
"""

from __future__ import annotations

import glob
import importlib
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import yaml

REPO = Path(__file__).resolve().parents[2]
# The CLI's interpolation syntax: ${a.b_c.d}; anything with a colon (${local:...}, ${env:...}) is not its.
REFERENCE = re.compile(r"\$\{([A-Za-z][A-Za-z0-9_-]*(?:\.[A-Za-z][A-Za-z0-9_-]*)*)\}")
SECRET_REFERENCE = re.compile(r"^\{\{secrets/([^/{}]+)/([^/{}]+)\}\}$")
# workspace.current_user of the stand-in workspace (dev's name prefix and root path use it).
STANDIN_USER = "harness@example.com"
# The target whose jobs run against the local stack (databricks.yml); the others are workspaces.
LOCAL_TARGET = "local"


class BundleError(Exception):
    """The bundle does not render for a target (what ``databricks bundle validate`` would refuse)."""


@dataclass(frozen=True)
class WheelTask:
    """One ``python_wheel_task`` of a rendered job, with the cluster it runs on."""

    target: str
    job: str
    task: str
    package_name: str
    entry_point: str
    parameters: tuple[str, ...]
    cluster: Mapping[str, Any]
    libraries: tuple[Mapping[str, Any], ...]

    @property
    def id(self) -> str:
        return f"{self.target}-{self.job}-{self.task}"

    @property
    def spark_env_vars(self) -> dict[str, str]:
        return {k: str(v) for k, v in (self.cluster.get("spark_env_vars") or {}).items()}

    def option(self, name: str) -> str | None:
        args = list(self.parameters)
        return args[args.index(name) + 1] if name in args[:-1] else None


@dataclass(frozen=True)
class Rendered:
    """A bundle rendered for one target."""

    target: str
    variables: Mapping[str, Any]
    jobs: Mapping[str, Any]

    def wheel_tasks(self) -> list[WheelTask]:
        out = []
        for key, job in self.jobs.items():
            for task in job.get("tasks") or []:
                wheel = task.get("python_wheel_task")
                if not wheel:
                    continue
                out.append(
                    WheelTask(
                        target=self.target,
                        job=key,
                        task=task["task_key"],
                        package_name=wheel["package_name"],
                        entry_point=wheel["entry_point"],
                        parameters=tuple(str(p) for p in wheel.get("parameters") or []),
                        cluster=_cluster(key, job, task),
                        libraries=tuple(task.get("libraries") or []),
                    )
                )
        return out


@dataclass
class Bundle:
    """``databricks.yml`` and the files it includes."""

    root: Path = REPO
    documents: list[dict[str, Any]] = field(init=False)

    def __post_init__(self) -> None:
        main = yaml.safe_load((self.root / "databricks.yml").read_text())
        self.documents = [main]
        for pattern in main.get("include") or []:
            for path in sorted(glob.glob(str(self.root / pattern))):
                self.documents.append(yaml.safe_load(Path(path).read_text()) or {})

    @property
    def main(self) -> dict[str, Any]:
        return self.documents[0]

    @property
    def name(self) -> str:
        return str(self.main["bundle"]["name"])

    @property
    def targets(self) -> list[str]:
        return list(self.main.get("targets") or {})

    def artifact_builds(self) -> dict[str, str]:
        """``artifacts.<name>.build`` commands the bundle declares (the CLI runs them before a deploy)."""
        artifacts = self.main.get("artifacts") or {}
        return {name: spec["build"] for name, spec in artifacts.items() if spec.get("build")}

    def _target_blocks(self, target: str) -> list[dict[str, Any]]:
        if target not in self.targets:
            raise BundleError(f"no target {target!r}; the bundle has {self.targets}")
        return [((doc.get("targets") or {}).get(target) or {}) for doc in self.documents]

    def variables(self, target: str, overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Every declared variable's value for ``target``: ``overrides`` (``--var``), the target, the default.

        Raises:
            BundleError: a variable that is not declared, or one left without a value.
        """
        declared: dict[str, Any] = self.main.get("variables") or {}
        values = {name: decl["default"] for name, decl in declared.items() if "default" in decl}
        given = [block.get("variables") or {} for block in self._target_blocks(target)] + [dict(overrides or {})]
        for block in given:
            for name, value in block.items():
                if name not in declared:
                    raise BundleError(f"target {target}: variable {name} has not been defined")
                is_complex = declared[name].get("type") == "complex"
                values[name] = (
                    value["default"] if is_complex and isinstance(value, dict) and "default" in value else value
                )
        missing = sorted(set(declared) - set(values))
        if missing:
            raise BundleError(f"target {target}: no value assigned to required variable(s) {', '.join(missing)}")
        return values

    def _jobs(self, target: str) -> dict[str, Any]:
        jobs: dict[str, Any] = {}
        for doc in self.documents:
            jobs.update((doc.get("resources") or {}).get("jobs") or {})
        for block in self._target_blocks(target):
            for key, job in ((block.get("resources") or {}).get("jobs") or {}).items():
                jobs[key] = _merge(jobs.get(key, {}), job)
        return jobs

    def render(self, target: str, overrides: Mapping[str, Any] | None = None) -> Rendered:
        """The target's jobs after overrides, mutators and interpolation.

        Raises:
            BundleError: an unset variable, or a reference left unresolved in a job.
        """
        variables = self.variables(target, overrides)
        context = {
            "bundle.name": self.name,
            "bundle.target": target,
            "workspace.file_path": str(self.root),
            "workspace.current_user.userName": STANDIN_USER,
            "workspace.current_user.short_name": STANDIN_USER.partition("@")[0],
        }
        mutated = {key: self._mutate(job, target, variables) for key, job in self._jobs(target).items()}
        jobs = {key: _interpolate(job, variables, context) for key, job in mutated.items()}
        leftovers = sorted({m for job in jobs.values() for m in REFERENCE.findall(yaml.safe_dump(job))})
        if leftovers:
            raise BundleError(f"target {target}: references the harness cannot resolve: {leftovers}")
        return Rendered(target, variables, jobs)

    def _mutate(self, job: dict[str, Any], target: str, variables: Mapping[str, Any]) -> dict[str, Any]:
        """``python.mutators``: each job through the bundle's own ``@job_mutator`` functions."""
        from databricks.bundles.core import Bundle as MutatorBundle
        from databricks.bundles.jobs import Job

        mutators = (self.main.get("python") or {}).get("mutators") or []
        if not mutators:
            return job
        bundle = MutatorBundle(target=target, variables=dict(variables))
        model = Job.from_dict(cast(Any, job))
        for spec in mutators:
            module, name = spec.split(":")
            mutator = getattr(importlib.import_module(module), name)
            model = mutator.function(bundle, model) if hasattr(mutator, "function") else mutator(bundle, model)
        return dict(model.as_dict())


def _merge(base: Any, override: Any) -> Any:
    """The CLI's target override: mappings merge; job clusters and tasks merge by their key."""
    if isinstance(base, dict) and isinstance(override, dict):
        return {**base, **{k: _merge(base[k], v) if k in base else v for k, v in override.items()}}
    if isinstance(base, list) and isinstance(override, list):
        for key in ("job_cluster_key", "task_key"):
            if all(isinstance(i, dict) and key in i for i in [*base, *override]):
                merged = {i[key]: i for i in base}
                for item in override:
                    merged[item[key]] = _merge(merged.get(item[key], {}), item)
                return list(merged.values())
    return override


def _interpolate(value: Any, variables: Mapping[str, Any], context: Mapping[str, str]) -> Any:
    if isinstance(value, dict):
        return {k: _interpolate(v, variables, context) for k, v in value.items()}
    if isinstance(value, list):
        return [_interpolate(v, variables, context) for v in value]
    if not isinstance(value, str):
        return value

    def lookup(path: str) -> Any:
        if path.startswith("var.") and path[4:] in variables:
            return _interpolate(variables[path[4:]], variables, context)
        return context.get(path)

    whole = REFERENCE.fullmatch(value)
    if whole and lookup(whole[1]) is not None:  # keeps a number a number, a complex variable a mapping
        return lookup(whole[1])

    def sub(match: re.Match[str]) -> str:
        found = lookup(match[1])
        return match[0] if found is None else str(found)

    return REFERENCE.sub(sub, value)


def _cluster(job_key: str, job: dict[str, Any], task: dict[str, Any]) -> dict[str, Any]:
    if "new_cluster" in task:
        return dict(task["new_cluster"])
    for cluster in job.get("job_clusters") or []:
        if cluster.get("job_cluster_key") == task.get("job_cluster_key"):
            return dict(cluster["new_cluster"])
    raise BundleError(f"{job_key}.{task.get('task_key')}: runs on no job cluster of its job (serverless?)")


@dataclass
class SecretLookup:
    """What resolving a cluster's ``{{secrets/...}}`` variables gave: the values, and what was missing."""

    env: dict[str, str]
    missing: list[str]


def resolve_secret_references(env_vars: Mapping[str, str], secret: Callable[[str, str], str | None]) -> SecretLookup:
    """``spark_env_vars`` as the cluster's processes see them: each ``{{secrets/scope/key}}`` replaced
    by the secret. A missing secret is reported (Databricks would refuse to start the cluster) and its
    variable left out."""
    env: dict[str, str] = {}
    missing: list[str] = []
    for name, value in env_vars.items():
        match = SECRET_REFERENCE.match(value)
        if not match:
            env[name] = value
            continue
        found = secret(match[1], match[2])
        if found is None:
            missing.append(f"{match[1]}/{match[2]}")
        else:
            env[name] = found
    return SecretLookup(env, missing)


def secret_references(env_vars: Mapping[str, str]) -> set[str]:
    """``scope/key`` of every ``{{secrets/...}}`` value of ``env_vars``."""
    return {f"{m[1]}/{m[2]}" for v in env_vars.values() if (m := SECRET_REFERENCE.match(v))}
