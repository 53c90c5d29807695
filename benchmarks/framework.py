"""The framework under test: one pipeline per dataset and commit mode, run through the replay reader.

Each run is a throwaway project (``pipelines/p.yml`` plus the repository's environments and a
``bench`` environment: ``local.yml`` with ``reader: replay`` and ``replay_path`` set to the
dataset's files), prepared and run in-process with :func:`kafka_iceberg.run.run`, exactly as
``ingest-<format>`` does, minus the event log and the progress line.
"""

from __future__ import annotations

import re
import shutil
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.datagen import CSV_COLUMNS, FLATTEN_COLUMNS, Dataset

REPO = Path(__file__).resolve().parents[1]
NAMESPACE = "bench"
FLATTEN_EXPECTATION = "amt >= 0"


def table_spec(ds: Dataset, name: str, mode: str, decoder: str = "auto", writer: str = "auto") -> dict[str, Any]:
    """The table spec (as YAML would give it) for ``ds`` under commit ``mode``."""
    source = {"topics": [ds.topic], "format": ds.fmt, "max_records_per_batch": ds.records_per_file}
    spec: dict[str, Any] = {
        "name": name,
        "namespace": NAMESPACE,
        "source": {**source, "decoder": decoder},
        "commit_mode": mode,
        "errors": {"skip_error": True},
        "write": {"engine": writer},
    }
    if ds.fmt in ("text", "binary"):
        spec["source"]["mode"] = "value"
    if ds.fmt == "flatten":
        spec["schema"] = {"columns": dict(FLATTEN_COLUMNS)}
        spec["schema_evolution"] = "strict"
        spec["expectations"] = {"amount_not_negative": {"expr": FLATTEN_EXPECTATION, "on_violation": "quarantine"}}
        spec["errors"] = {"skip_error": True, "quarantine_table": f"{NAMESPACE}.{name}_quarantine"}
    if ds.fmt == "csv":
        spec["schema"] = {"columns": dict(CSV_COLUMNS)}
        spec["source"]["csv"] = {"columns": list(CSV_COLUMNS)}
    if mode == "overwrite":
        spec["partitioning"] = ["pt"]
    if mode == "upsert":
        spec["key_fields"] = ["uid"] if ds.fmt == "flatten" else ["key"]
    return spec


def pipeline_yaml(ds: Dataset, name: str, mode: str, pipeline: str, decoder: str = "auto", writer: str = "auto") -> str:
    import yaml

    tables = [table_spec(ds, name, mode, decoder, writer)]
    return yaml.safe_dump({"pipeline": pipeline, "catalog": "lake", "tables": tables})


BENCH_ENV = "bench"


def bench_environment(project: Path, reader: str) -> None:
    """The repository's environments copied into ``project``, and ``bench``: ``local.yml`` with ``reader``.

    ``reader``: the lines that replace ``kafka.reader`` (``reader: direct``, or ``reader: replay`` and
    its ``replay_path``). Found in the project's copy whatever the current directory's project is.
    """
    shutil.copytree(REPO / "environments", project / "environments")
    local = (REPO / "environments" / "local.yml").read_text()
    assert re.search(r"(?m)^  reader: ", local), "environments/local.yml no longer sets kafka.reader"
    (project / "environments" / f"{BENCH_ENV}.yml").write_text(re.sub(r"(?m)^  reader: .*$", f"  {reader}", local))


def make_project(
    work: Path,
    ds: Dataset,
    replay_dir: Path | None,
    name: str,
    mode: str,
    decoder: str = "auto",
    writer: str = "auto",
) -> Path:
    """A throwaway project whose ``bench`` environment replays ``replay_dir``; returns the pipeline file.

    ``replay_dir`` None: the ``bench`` environment is ``local.yml`` as it is, Spark's Kafka source on
    the stack's broker (``benchmarks/broker.py``).
    """
    project = work / f"project_{name}"
    shutil.rmtree(project, ignore_errors=True)
    reader = "reader: spark" if replay_dir is None else f"reader: replay\n  replay_path: {replay_dir}"
    bench_environment(project, reader)
    (project / "pipelines").mkdir()
    path = project / "pipelines" / "p.yml"
    path.write_text(pipeline_yaml(ds, name, mode, pipeline=f"p_{name}", decoder=decoder, writer=writer))
    return path


@dataclass
class FrameworkRun:
    """One framework run: wall time and the batch reports."""

    seconds: float
    reports: list[Any] = field(default_factory=list)

    @property
    def records_in(self) -> int:
        return sum(r.records_in for r in self.reports)

    @property
    def records_written(self) -> int:
        return sum(r.records_written for r in self.reports)

    def summary(self) -> dict[str, Any]:
        r = self.reports
        return {
            "batches": len(r),
            "records_in": self.records_in,
            "records_written": self.records_written,
            "records_failed": sum(x.records_failed for x in r),
            "records_skipped": sum(x.records_skipped for x in r),
            "records_quarantined": sum(x.records_quarantined for x in r),
            "files_created": sum(x.files_created for x in r),
            "bytes_written": sum(x.bytes_written for x in r),
            "commit_retries": sum(x.commit_retries for x in r),
        }


def run_framework(pipeline_file: Path) -> FrameworkRun:
    """Prepare and run the pipeline to the end of its replay files (``available_now``)."""
    from kafka_iceberg.observe.metrics import Metrics
    from kafka_iceberg.observe.progress import Progress
    from kafka_iceberg.run import Observers, open_session, prepare, run

    started = time.monotonic()
    prepared = prepare(pipeline_file, env_name=BENCH_ENV)
    spark = open_session(prepared)
    observers = Observers(Metrics(), Progress(enabled=False))
    reports = run(prepared, spark, stop=threading.Event(), observers=observers)
    return FrameworkRun(seconds=time.monotonic() - started, reports=reports)
