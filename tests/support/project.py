"""Running pipelines the way jobs do: console entry points in subprocesses, or in-process."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def entry_point(
    name: str, *args: str, stack_dir: str, timeout: float = 600, extra_env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run a console script of the package (``ingest-json``...) against the test session's stack.

    It runs in a session of its own, so a crash it injects (``KAFKA_ICEBERG_FAULT``) takes its JVM too.
    """
    env = {**os.environ, "KAFKA_ICEBERG_RUN_DIR": stack_dir, "PYTHONPATH": str(REPO / "src"), **(extra_env or {})}
    return subprocess.run(
        [str(BIN / name), *args], capture_output=True, text=True, env=env, timeout=timeout, check=False, cwd=REPO,
        start_new_session=True,
    )  # fmt: skip


def project(tmp_path: Path, pipeline_yaml: str, *, extra_env: dict[str, str] | None = None) -> Path:
    """A throwaway project: ``pipelines/p.yml`` plus the repository's environments (and extra ones)."""
    shutil.copytree(REPO / "environments", tmp_path / "environments")
    for name, text in (extra_env or {}).items():
        (tmp_path / "environments" / f"{name}.yml").write_text(text)
    (tmp_path / "pipelines").mkdir()
    path = tmp_path / "pipelines" / "p.yml"
    path.write_text(pipeline_yaml)
    return path
