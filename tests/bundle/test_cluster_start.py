"""A deployed job starts with exactly what its cluster gives it (issue 18).

Every ``python_wheel_task`` of ``resources/*.yml`` is started, for every target, in a subprocess
whose environment holds only the job cluster's ``spark_env_vars`` (resolved from the bundle's
variables and the target's overrides), ``PATH`` and ``HOME``, the package (as the installed wheel
would be), and a stand-in secret scope holding the secrets of what the task uses. Jobs and
clusters are discovered, not named, so the tests follow however ``resources/`` is organised.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib
import yaml

import kafka_iceberg
from kafka_iceberg.refs import find_refs, iter_strings
from tests.support.bundle import LOCAL_TARGET, Bundle, WheelTask, resolve_secret_references
from tests.workspace.standin import Workspace

REPO = Path(__file__).resolve().parents[2]
# The package under test, importable the way the job cluster's installed wheel makes it: alone.
PACKAGE_DIR = Path(kafka_iceberg.__file__).resolve().parents[1]
SCRIPTS = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
BUNDLE = Bundle(REPO)
# The workspace targets; `local` runs against the local stack (tests/bundle/test_deployed_jobs.py).
TARGETS = [t for t in BUNDLE.targets if t != LOCAL_TARGET]
TASKS = [t for target in TARGETS for t in BUNDLE.render(target).wheel_tasks() if t.package_name == "kafka_iceberg"]


def _used_secrets(task: WheelTask) -> set[str]:
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


def _standin_scope(task: WheelTask) -> Workspace:
    """A stand-in workspace whose secret scopes hold fake values of the task's secrets, nothing more."""
    workspace = Workspace()
    for name in _used_secrets(task):
        scope, key = name.split("/", 1)
        workspace.secrets.setdefault(scope, {})[key] = f"standin-{name}"
    return workspace


def _run(argv: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    # -P: nothing but PYTHONPATH (the package) is importable; not the current directory, not the project.
    return subprocess.run(
        [sys.executable, "-P", *argv], capture_output=True, text=True, env=env, cwd=cwd, timeout=120, check=False
    )


def _cluster_environment(task: WheelTask, workspace: Workspace) -> tuple[dict[str, str], list[str]]:
    """The cluster's ``spark_env_vars`` with its ``{{secrets/...}}`` read from ``workspace``, and the
    secrets it lacks (with which Databricks would not start the cluster)."""
    lookup = resolve_secret_references(task.spark_env_vars, workspace.secret)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(Path.home()), "PYTHONPATH": str(PACKAGE_DIR), **lookup.env}
    return env, lookup.missing


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
    env, _ = _cluster_environment(task, Workspace())  # `validate` reads no secret
    result = _run(["-m", "kafka_iceberg.cli.main", "validate", *argv], env, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("task", TASKS, ids=lambda t: t.id)
def test_task_starts_with_only_its_cluster_environment(task, tmp_path):
    """The task's own entry point and parameters, with ``--check``: validation plus resolving every
    variable and secret the run uses, started outside the project as on a cluster."""
    module, function = SCRIPTS[task.entry_point].split(":")
    code = f"import sys; from {module} import {function} as main; sys.argv[0] = {task.entry_point!r}; main()"
    env, missing = _cluster_environment(task, _standin_scope(task))
    assert not missing, f"the cluster refers to secrets the task does not use: {missing}"
    result = _run(["-c", code, *task.parameters, "--check"], env, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "ready:" in result.stdout


def test_a_task_still_needs_the_secrets_it_uses(tmp_path):
    task = next(t for t in TASKS if t.entry_point.startswith("ingest-") and _used_secrets(t))
    module, function = SCRIPTS[task.entry_point].split(":")
    code = f"import sys; from {module} import {function} as main; main()"
    # An empty scope: Databricks would not start the cluster; started anyway, the job says what is missing.
    env, missing = _cluster_environment(task, Workspace())
    assert set(missing) == _used_secrets(task)
    result = _run(["-c", code, *task.parameters, "--check"], env, tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    # Each problem line shows the reference that did not resolve: exactly the used secrets.
    assert set(re.findall(r"'\$\{secret:([^}]+)\}'", result.stderr)) == _used_secrets(task)
