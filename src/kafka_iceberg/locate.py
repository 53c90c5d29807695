"""Where a project is: its root, the directories its environments are read from, its modules.

A project is a directory holding ``databricks.yml`` or ``environments/``. It is found from the
current directory first, then from the pipeline's path, so a pipeline file anywhere runs against
the project a command is started in, and a bundle's job (started in some directory of the
cluster) finds the synced bundle files above its pipeline.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

BUNDLE_FILE = "databricks.yml"
ENVIRONMENTS_DIR = "environments"


def _upwards(start: Path) -> list[Path]:
    """``start`` (or its directory, for a file) and every parent, nearest first."""
    start = start.resolve()
    first = start if start.is_dir() else start.parent
    return [first, *first.parents]


def is_project_root(directory: Path) -> bool:
    """Whether ``directory`` holds a bundle or an ``environments/`` directory."""
    return (directory / BUNDLE_FILE).is_file() or (directory / ENVIRONMENTS_DIR).is_dir()


def find_project_root(start: Path) -> Path | None:
    """The nearest project root at or above ``start``."""
    return next((d for d in _upwards(start) if is_project_root(d)), None)


def project_roots(pipeline_path: Path, cwd: Path | None = None) -> list[Path]:
    """Project roots in precedence order: the current directory's, then the pipeline's.

    Args:
        pipeline_path: a pipeline file or a directory of them.
        cwd: the directory the command runs in (default: the process's current directory).
    """
    found = [find_project_root(Path.cwd() if cwd is None else cwd), find_project_root(pipeline_path)]
    return list(dict.fromkeys(r for r in found if r is not None))


def project_root(pipeline_path: Path, cwd: Path | None = None) -> Path | None:
    """The project a command on ``pipeline_path`` works in, or None outside any project."""
    roots = project_roots(pipeline_path, cwd)
    return roots[0] if roots else None


def environment_dirs(pipeline_path: Path, cwd: Path | None = None) -> list[Path]:
    """Every ``environments/`` directory searched, in order.

    The current directory's project comes first; then, as before, the pipeline's directory and
    each of its parents (a pipeline nested in another project still finds that project's files).
    """
    cwd_root = find_project_root(Path.cwd() if cwd is None else cwd)
    dirs = [cwd_root] if cwd_root is not None else []
    dirs += _upwards(pipeline_path)
    return list(dict.fromkeys(d / ENVIRONMENTS_DIR for d in dirs))


def make_importable(pipeline_path: Path, cwd: Path | None = None) -> None:
    """Let ``transform:`` and ``definitions`` modules import from the project roots, without PYTHONPATH.

    Roots are appended, so an installed package is never shadowed by a project directory.
    """
    added = False
    for root in project_roots(pipeline_path, cwd):
        if str(root) not in sys.path:
            sys.path.append(str(root))
            added = True
    if added:
        importlib.invalidate_caches()  # finders cached "not found" before the root was added


__all__ = [
    "BUNDLE_FILE",
    "ENVIRONMENTS_DIR",
    "environment_dirs",
    "find_project_root",
    "is_project_root",
    "make_importable",
    "project_root",
    "project_roots",
]
