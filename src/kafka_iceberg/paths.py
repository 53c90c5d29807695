"""Where kafka-iceberg keeps files on this machine, each overridable by an environment variable."""

from __future__ import annotations

import os
from pathlib import Path

CACHE_DIR_ENV = "KAFKA_ICEBERG_CACHE_DIR"
RUN_DIR_ENV = "KAFKA_ICEBERG_RUN_DIR"


def cache_dir() -> Path:
    """Downloads and resolved jars (``$KAFKA_ICEBERG_CACHE_DIR``, else ``~/.cache/kafka-iceberg``)."""
    configured = os.environ.get(CACHE_DIR_ENV)
    if configured:
        return Path(configured).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "kafka-iceberg"


def run_dir() -> Path:
    """State of the local stack: PIDs, logs, data, checkpoints.

    ``$KAFKA_ICEBERG_RUN_DIR``, else ``~/.local/state/kafka-iceberg``.
    """
    configured = os.environ.get(RUN_DIR_ENV)
    if configured:
        return Path(configured).expanduser()
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "kafka-iceberg"
