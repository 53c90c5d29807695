"""Ingest jobs as subprocesses (their own JVM, like real jobs) and the table state they leave."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.support.project import BIN, REPO

PIPELINE_KEY, OFFSETS_KEY = "kafka-iceberg.pipeline", "kafka-iceberg.offsets"
BATCH_ID_KEY = "kafka-iceberg.batch-id"
COPIED_FROM_KEY = "kafka-iceberg.copied-from"


def id_pipeline(pipeline: str, ns: str, topic: str, *, batch: int) -> str:
    """A pipeline of one flatten table ``<ns>.events`` with one ``id`` column, read from ``topic`` every second."""
    return f"""
pipeline: {pipeline}
catalog: lake
tables:
  - name: events
    namespace: {ns}
    source: {{topics: [{topic}], format: flatten, max_records_per_batch: {batch}}}
    schema: {{columns: {{id: long}}}}
    schema_evolution: strict
    partition_window: none
    trigger: {{processing_time: PT1S}}
"""


class Job:
    """``ingest-<fmt> --pipeline PATH --env ENV`` against the stack in ``run_dir``; output kept in files."""

    def __init__(self, path: Path, run_dir: str, name: str, *args: str, fmt: str = "flatten", env_name: str = "local"):
        root = path.parents[1]
        self.out, self.err = root / f"{name}.out", root / f"{name}.err"
        env = {**os.environ, "KAFKA_ICEBERG_RUN_DIR": run_dir, "PYTHONPATH": f"{REPO / 'src'}:{REPO}"}
        with self.out.open("w") as out, self.err.open("w") as err:
            self.proc = subprocess.Popen(
                [str(BIN / f"ingest-{fmt}"), "--pipeline", str(path), "--env", env_name, *args],
                env=env, cwd=root, stdout=out, stderr=err, start_new_session=True,
            )  # fmt: skip

    def stderr(self) -> str:
        return self.err.read_text(errors="replace")

    def stop(self, timeout: float = 300) -> int:
        """SIGTERM (finish the current batch, then exit) and wait."""
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout)

    def kill(self) -> None:
        """SIGKILL the job's whole process group (python and its JVM), if still running."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(30)

    def wait_for(self, check: Callable[[], bool], what: str, timeout: float = 600) -> None:
        """Poll ``check`` while the job runs; fail with its stderr if it ends or times out first."""
        deadline = time.monotonic() + timeout
        while not check():
            assert self.proc.poll() is None, f"the job ended before {what}:\n{self.stderr()[-3000:]}"
            assert time.monotonic() < deadline, f"no {what} within {timeout}s:\n{self.stderr()[-3000:]}"
            time.sleep(0.3)


def snapshots(catalog: Any, table: str) -> list[Any]:
    """The table's snapshots from the current one back to the first (its ancestry), oldest first."""
    if not catalog.table_exists(table):
        return []
    metadata = catalog.load_table(table).metadata
    by_id = {s.snapshot_id: s for s in metadata.snapshots}
    out = []
    current = metadata.current_snapshot_id
    while current is not None and current in by_id:
        out.append(by_id[current])
        current = by_id[current].parent_snapshot_id
    return out[::-1]


def props(snapshot: Any) -> dict[str, str]:
    """A snapshot summary's properties (the commit marker among them)."""
    return dict(snapshot.summary.additional_properties) if snapshot.summary else {}


def committed(catalog: Any, table: str, pipeline: str | None = None) -> int:
    """Records covered by the markers (of ``pipeline``, when given) in the table's ancestry.

    Markers hold cumulative offsets, so the largest is the newest commit's, whatever maintenance
    copies sit above it.
    """
    totals = [0]
    for snap in snapshots(catalog, table):
        marker = props(snap)
        if OFFSETS_KEY in marker and (pipeline is None or marker.get(PIPELINE_KEY) == pipeline):
            totals.append(sum(sum(parts.values()) for parts in json.loads(marker[OFFSETS_KEY]).values()))
    return max(totals)


def coordinates(catalog: Any, table: str) -> list[tuple[str, int, int]]:
    """(topic, partition, offset) of every row, read with pyiceberg."""
    rows = catalog.load_table(table).scan(selected_fields=("topic", "partition", "offset")).to_arrow()
    return list(zip(*(rows.column(c).to_pylist() for c in ("topic", "partition", "offset")), strict=True))
