from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.workspace.standin import TOKEN, Workspace, serve, staging_jobs

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def workspace(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Workspace]:
    """The stand-in with the staging jobs, and the DATABRICKS_* variables pointing the SDK at it."""
    ws = Workspace(jobs=staging_jobs())
    with serve(ws) as url:
        monkeypatch.setenv("DATABRICKS_HOST", url)
        monkeypatch.setenv("DATABRICKS_TOKEN", TOKEN)
        monkeypatch.setenv("DATABRICKS_CONFIG_FILE", str(tmp_path / "no.databrickscfg"))
        monkeypatch.chdir(REPO)
        yield ws
