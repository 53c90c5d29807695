"""Run a throwaway pipeline in the test session's Spark, against the session's local stack."""

from __future__ import annotations

import threading
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kafka_iceberg.observe.metrics import Metrics
from kafka_iceberg.observe.progress import Progress
from kafka_iceberg.observe.report import BatchReport
from kafka_iceberg.run import Observers, open_session, prepare, run
from tests.support.project import project


@dataclass
class Ran:
    reports: list[BatchReport]
    metrics: Metrics
    namespace: str
    topic: str
    error: BaseException | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


def run_pipeline(
    tmp_path: Path,
    yaml_text: str,
    *,
    event_log: Any = None,
    expect_error: bool = False,
    env_name: str = "local",
    extra_env: dict[str, str] | None = None,
) -> Ran:
    """Prepare and run ``yaml_text`` in-process, in a throwaway project under ``tmp_path``."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = project(tmp_path, yaml_text, extra_env=extra_env)
    prepared = prepare(path, env_name=env_name)
    spark = open_session(prepared)
    metrics = Metrics()
    observers = Observers(metrics, Progress(enabled=False), None, event_log)
    reports: list[BatchReport] = []
    error = None
    try:
        reports = run(prepared, spark, stop=threading.Event(), observers=observers)
    except BaseException as exc:
        if not expect_error:
            raise
        error = exc
    return Ran(reports, metrics, "", "", error)
