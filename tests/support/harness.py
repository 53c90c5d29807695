"""The deployed-job harness: a bundle task run the way a Databricks job cluster runs it.

The wheel is built with the artifact's own build command (or ``pip wheel`` when the bundle declares
none, as the deploy docs do), installed — not editable — into a fresh virtualenv holding only its
declared dependencies plus the pyspark a cluster provides, and each ``python_wheel_task`` runs as
the venv's console script, outside the repository, with nothing in its environment but the job
cluster's ``spark_env_vars`` (secrets resolved from a stand-in scope), ``PATH``, ``HOME`` and
``JAVA_HOME``.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from tests.support.bundle import Bundle, WheelTask, resolve_secret_references

REPO = Path(__file__).resolve().parents[2]


def pinned(package: str, requirements: Path = REPO / "requirements-dev.txt") -> str:
    """``package==<version>`` as pinned in ``requirements``."""
    for line in requirements.read_text().splitlines():
        if re.match(rf"^{re.escape(package)}==", line.strip(), re.I):
            return line.split("#")[0].strip()
    raise LookupError(f"{package} is not pinned in {requirements}")


def build_wheel(bundle: Bundle, out: Path) -> Path:
    """The wheel the jobs install, built as the bundle says (``artifacts.*.build``), else as the
    deploy docs do (``python -m pip wheel --no-deps``)."""
    builds = bundle.artifact_builds()
    if builds:
        for command in builds.values():
            subprocess.run(shlex.split(command), cwd=bundle.root, check=True, capture_output=True, text=True)
        wheels = sorted((bundle.root / "dist").glob("*.whl"), key=lambda p: p.stat().st_mtime)
    else:
        subprocess.run(
            [sys.executable, "-m", "pip", "wheel", "--no-deps", "--wheel-dir", str(out), str(bundle.root)],
            check=True,
            capture_output=True,
            text=True,
        )
        wheels = sorted(out.glob("*.whl"))
    if not wheels:
        raise FileNotFoundError(f"the build left no wheel ({builds or 'pip wheel'})")
    return wheels[-1]


@dataclass(frozen=True)
class ClusterVenv:
    """A fresh virtualenv holding the wheel, its declared dependencies and the cluster's pyspark."""

    path: Path
    wheel: Path
    build_seconds: float

    @property
    def bin(self) -> Path:
        return self.path / "bin"

    @classmethod
    def create(cls, wheel: Path, path: Path, extras: Sequence[str] = ()) -> ClusterVenv:
        """Install ``wheel`` (with its optional dependency groups ``extras``) and the pinned pyspark."""
        started = time.monotonic()
        requirement = f"{wheel}[{','.join(extras)}]" if extras else str(wheel)
        subprocess.run([sys.executable, "-m", "venv", str(path)], check=True, capture_output=True, text=True)
        subprocess.run(
            [str(path / "bin" / "python"), "-m", "pip", "install", "--quiet", requirement, pinned("pyspark")],
            check=True,
            capture_output=True,
            text=True,
        )
        return cls(path, wheel, time.monotonic() - started)

    def run(
        self, task: WheelTask, env: dict[str, str], cwd: Path, *extra: str, timeout: float = 600
    ) -> subprocess.CompletedProcess[str]:
        """The task's entry point with its parameters (plus ``extra``), as the cluster starts it."""
        script = self.bin / task.entry_point
        if not script.exists():
            raise FileNotFoundError(f"{task.id}: the wheel installs no console script {task.entry_point}")
        return subprocess.run(
            [str(script), *task.parameters, *extra],
            capture_output=True,
            text=True,
            env=env,
            cwd=cwd,
            timeout=timeout,
            check=False,
        )


@dataclass(frozen=True)
class ClusterEnvironment:
    """The environment of a task's process, and the secrets its cluster could not have resolved."""

    env: dict[str, str]
    missing_secrets: list[str]


def cluster_environment(task: WheelTask, secret: Callable[[str, str], str | None]) -> ClusterEnvironment:
    """Only the cluster's ``spark_env_vars`` (``{{secrets/...}}`` read from ``secret``), plus ``PATH``
    (for ``java`` and the shell tools Spark's launcher uses), ``HOME`` and ``JAVA_HOME`` if set."""
    lookup = resolve_secret_references(task.spark_env_vars, secret)
    java = shutil.which("java")
    path = [str(Path(java).parent)] if java else []
    base = {"PATH": os.pathsep.join([*path, "/usr/bin", "/bin"]), "HOME": str(Path.home())}
    if os.environ.get("JAVA_HOME"):
        base["JAVA_HOME"] = os.environ["JAVA_HOME"]
    return ClusterEnvironment({**base, **lookup.env}, lookup.missing)


def describe(result: subprocess.CompletedProcess[str], limit: int = 4000) -> str:
    """A failed run's output for an assertion message (its end: where the reason is)."""
    return f"exit {result.returncode}\n--- stdout\n{result.stdout[-limit:]}\n--- stderr\n{result.stderr[-limit:]}"


def tasks_of(bundle: Bundle, targets: Sequence[str], package: str) -> list[WheelTask]:
    """Every ``python_wheel_task`` of ``package`` in the rendered ``targets``."""
    return [t for target in targets for t in bundle.render(target).wheel_tasks() if t.package_name == package]
