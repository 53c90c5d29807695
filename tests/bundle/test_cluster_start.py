"""A deployed job starts with exactly what its cluster gives it (issue 18).

Every ``python_wheel_task`` of ``resources/*.yml`` is started, for every target, in a subprocess
whose environment holds only the job cluster's ``spark_env_vars`` (resolved from the bundle's
variables and the target's overrides), ``PATH`` and ``HOME``, the package (as the installed wheel
would be), and a stand-in secret scope holding the secrets of what the task uses. Jobs and
clusters are discovered, not named, so the tests follow however ``resources/`` is organised.
"""

from __future__ import annotations

import glob
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import tomllib
import yaml

import kafka_iceberg
from kafka_iceberg.refs import find_refs, iter_strings, secret_env_name

REPO = Path(__file__).resolve().parents[2]
# The package under test, importable the way the job cluster's installed wheel makes it: alone.
PACKAGE_DIR = Path(kafka_iceberg.__file__).resolve().parents[1]
SCRIPTS = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
VAR = re.compile(r"\$\{var\.([A-Za-z0-9_]+)\}")


def _bundle_documents() -> list[dict[str, Any]]:
    root = yaml.safe_load((REPO / "databricks.yml").read_text())
    docs = [root]
    for pattern in root.get("include") or []:
        docs += [yaml.safe_load(Path(p).read_text()) or {} for p in sorted(glob.glob(str(REPO / pattern)))]
    return docs


DOCS = _bundle_documents()
BUNDLE = DOCS[0]
TARGETS = list(BUNDLE["targets"])


def _merge(base: Any, override: Any) -> Any:
    """Databricks' target override: mappings merge; job clusters and tasks merge by their key."""
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


def _variables(target: str) -> dict[str, Any]:
    values = {name: decl.get("default") for name, decl in (BUNDLE.get("variables") or {}).items()}
    for doc in DOCS:
        for name, value in (((doc.get("targets") or {}).get(target) or {}).get("variables") or {}).items():
            is_complex = (BUNDLE["variables"].get(name) or {}).get("type") == "complex"
            values[name] = value["default"] if is_complex and isinstance(value, dict) and "default" in value else value
    return values


def _interpolate(value: Any, target: str, variables: dict[str, Any]) -> Any:
    """Bundle interpolation, with ``${workspace.file_path}`` the repository (the synced bundle files)."""
    if isinstance(value, dict):
        return {k: _interpolate(v, target, variables) for k, v in value.items()}
    if isinstance(value, list):
        return [_interpolate(v, target, variables) for v in value]
    if not isinstance(value, str):
        return value
    whole = VAR.fullmatch(value)
    if whole:  # a complex variable keeps its structure
        return _interpolate(variables[whole[1]], target, variables)
    value = VAR.sub(lambda m: str(_interpolate(variables[m[1]], target, variables)), value)
    return (
        value.replace("${workspace.file_path}", str(REPO))
        .replace("${bundle.target}", target)
        .replace("${bundle.name}", BUNDLE["bundle"]["name"])
    )


def _jobs(target: str) -> dict[str, Any]:
    jobs: dict[str, Any] = {}
    for doc in DOCS:
        jobs.update((doc.get("resources") or {}).get("jobs") or {})
    for doc in DOCS:
        overrides = ((((doc.get("targets") or {}).get(target) or {}).get("resources") or {}).get("jobs")) or {}
        for key, job in overrides.items():
            jobs[key] = _merge(jobs.get(key, {}), job)
    return jobs


@dataclass(frozen=True)
class Task:
    target: str
    job: str
    task: str
    entry_point: str
    parameters: tuple[str, ...]
    env_vars: tuple[tuple[str, str], ...]

    @property
    def id(self) -> str:
        return f"{self.target}-{self.job}-{self.task}"

    def option(self, name: str) -> str | None:
        args = list(self.parameters)
        return args[args.index(name) + 1] if name in args else None


def _cluster(job: dict[str, Any], task: dict[str, Any]) -> dict[str, Any]:
    if "new_cluster" in task:
        return dict(task["new_cluster"])
    for cluster in job.get("job_clusters") or []:
        if cluster.get("job_cluster_key") == task.get("job_cluster_key"):
            return dict(cluster["new_cluster"])
    raise AssertionError(f"task {task.get('task_key')} runs on no job cluster of its job: extend this test")


def _tasks() -> list[Task]:
    out = []
    for target in TARGETS:
        variables = _variables(target)
        for key, raw_job in _jobs(target).items():
            job = _interpolate(raw_job, target, variables)
            for task in job.get("tasks") or []:
                wheel = task.get("python_wheel_task")
                if not wheel or wheel.get("package_name") != "kafka_iceberg":
                    continue
                env_vars = _cluster(job, task).get("spark_env_vars") or {}
                out.append(
                    Task(
                        target,
                        key,
                        task["task_key"],
                        wheel["entry_point"],
                        tuple(str(p) for p in wheel.get("parameters") or []),
                        tuple(sorted((k, str(v)) for k, v in env_vars.items())),
                    )
                )
    return out


TASKS = _tasks()


def _used_secrets(task: Task) -> set[str]:
    """``scope/key`` of each secret of what the task uses: everything outside ``catalogs:`` of its
    environment, its ``--catalog`` (every catalog without one) and the event log's catalog."""
    env_name, catalog = task.option("--env"), task.option("--catalog")
    data = yaml.safe_load((REPO / "environments" / f"{env_name}.yml").read_text())
    used = {catalog, (data.get("event_log") or {}).get("catalog")} if catalog else set(data.get("catalogs") or {})
    return {
        ref.name
        for loc, raw in iter_strings(data)
        if not (loc[0] == "catalogs" and loc[1] not in used)
        for ref in find_refs(raw)
        if ref.kind == "secret"
    }


def _standin_secrets(task: Task) -> dict[str, str]:
    """A stand-in secret scope holding fake values of the task's secrets, nothing more, served
    through the local secret mechanism (``$KAFKA_ICEBERG_SECRET__SCOPE__KEY``, refs.py)."""
    return {secret_env_name(*name.split("/", 1)): f"standin-{name}" for name in _used_secrets(task)}


def _run(argv: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    # -P: nothing but PYTHONPATH (the package) is importable; not the current directory, not the project.
    return subprocess.run(
        [sys.executable, "-P", *argv], capture_output=True, text=True, env=env, cwd=cwd, timeout=120, check=False
    )


def _cluster_environment(task: Task, *, secrets: bool) -> dict[str, str]:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(Path.home()), "PYTHONPATH": str(PACKAGE_DIR), **dict(task.env_vars)}
    return {**env, **_standin_secrets(task)} if secrets else env


def test_every_target_has_tasks_to_check():
    assert {t.target for t in TASKS} == set(TARGETS)
    assert all(t.entry_point in SCRIPTS for t in TASKS)


VALIDATIONS = list(
    {(t.target, t.option("--pipeline"), t.option("--env"), t.option("--catalog")): t for t in TASKS}.values()
)


@pytest.mark.parametrize(
    "task", VALIDATIONS, ids=lambda t: f"{t.target}-{Path(t.option('--pipeline') or '').name}-{t.option('--catalog')}"
)
def test_task_validates_with_only_its_cluster_environment(task, tmp_path):
    """The issue's reproduction: ``kafka-iceberg validate`` with the task's options and the cluster's variables."""
    argv = ["--pipeline", task.option("--pipeline"), "--env", task.option("--env")]
    if task.option("--catalog"):
        argv += ["--catalog", task.option("--catalog")]
    result = _run(
        ["-m", "kafka_iceberg.cli.main", "validate", *argv], _cluster_environment(task, secrets=False), tmp_path
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("task", TASKS, ids=lambda t: t.id)
def test_task_starts_with_only_its_cluster_environment(task, tmp_path):
    """The task's own entry point and parameters, with ``--check``: validation plus resolving every
    variable and secret the run uses, started outside the project as on a cluster."""
    module, function = SCRIPTS[task.entry_point].split(":")
    code = f"import sys; from {module} import {function} as main; sys.argv[0] = {task.entry_point!r}; main()"
    result = _run(["-c", code, *task.parameters, "--check"], _cluster_environment(task, secrets=True), tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "ready:" in result.stdout


def test_a_task_still_needs_the_secrets_it_uses(tmp_path):
    task = next(t for t in TASKS if t.entry_point.startswith("ingest-") and _used_secrets(t))
    module, function = SCRIPTS[task.entry_point].split(":")
    code = f"import sys; from {module} import {function} as main; main()"
    result = _run(["-c", code, *task.parameters, "--check"], _cluster_environment(task, secrets=False), tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    # Each problem line shows the reference that did not resolve: exactly the used secrets.
    assert set(re.findall(r"'\$\{secret:([^}]+)\}'", result.stderr)) == _used_secrets(task)
