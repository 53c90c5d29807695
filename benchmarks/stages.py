"""Where a micro-batch spends its time: exclusive wall time and Spark jobs per stage of ``BatchProcessor``.

The stages of ``kafka_iceberg.run.batch`` are wrapped (monkeypatched for the duration of a ``with``
block). Spark is lazy, so a stage's time is the time of the actions it *triggers*: decoding shows
up in whichever stage first counts or writes the decoded rows. Each stage also runs under its own
Spark job group, so ``statusTracker`` tells how many Spark jobs (passes over data) it started.
Times are exclusive: a nested stage's time is not counted again in its parent.
"""

from __future__ import annotations

import contextlib
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

# (object holding the attribute, attribute, stage label); resolved lazily so importing is cheap.
BATCH = "batch (rest: raw count, schema lookup)"
_TARGETS = (
    ("kafka_iceberg.run.batch", "BatchProcessor._process", BATCH),
    ("kafka_iceberg.run.batch", "decode", "decode (plan)"),
    ("kafka_iceberg.run.batch", "apply_expectations", "expectations"),
    ("kafka_iceberg.run.batch", "write_rejections", "write rejections"),
    ("kafka_iceberg.checks.routing", "ErrorRouter.route", "error routing"),
    ("kafka_iceberg.write.quarantine", "QuarantineTable.append", "quarantine append"),
    ("kafka_iceberg.write.writer", "TableWriter.plan", "table plan (catalog)"),
    ("kafka_iceberg.write.writer", "TableWriter.apply", "table apply (catalog)"),
    ("kafka_iceberg.write.writer", "TableWriter.current_schema", "table schema (catalog)"),
    ("kafka_iceberg.write.writer", "TableWriter.last_commit", "marker lookup (catalog)"),
    ("kafka_iceberg.write.writer", "TableWriter.commit", "commit (write + catalog)"),
    ("kafka_iceberg.write.writer", "TableWriter.write_sorted", "single pass (decode, checks, data files)"),
    # Records written where the Arrow decoder parses them (json under decoder auto): the same stage.
    ("kafka_iceberg.write.writer", "TableWriter.write_where_parsed", "single pass (decode, checks, data files)"),
    ("kafka_iceberg.run.batch", "batch_offsets", "batch offsets"),
    # An upsert's rows made where the Arrow decoder parses them, before Spark's decoder and the MERGE.
    ("kafka_iceberg.run.batch", "rows_where_parsed", "upsert rows made where parsed (decode, checks)"),
    # The few records those tasks left, decoded by Spark and sorted on the driver (one Spark job).
    ("kafka_iceberg.run.batch", "sort_on_driver", "upsert records left, sorted on the driver"),
)
UNGROUPED = "(no job group: Spark write inside the commit callback)"


@dataclass
class StageProfile:
    """Accumulated exclusive seconds, calls and Spark jobs per stage."""

    seconds: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    calls: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    jobs: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    batches: int = 0
    total_seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        order = sorted(self.seconds, key=lambda k: -self.seconds[k])
        return {
            "batches": self.batches,
            "batch_seconds_total": round(self.total_seconds, 3),
            "stages": [
                {
                    "stage": k,
                    "seconds": round(self.seconds[k], 3),
                    "share": round(self.seconds[k] / self.total_seconds, 3) if self.total_seconds else None,
                    "calls": self.calls[k],
                    "spark_jobs": self.jobs.get(k, 0),
                }
                for k in order
            ],
            "ungrouped_spark_jobs": self.jobs.get(UNGROUPED, 0),
        }


def _resolve(module: str, dotted: str) -> tuple[Any, str]:
    import importlib

    obj: Any = importlib.import_module(module)
    *path, attr = dotted.split(".")
    for part in path:
        obj = getattr(obj, part)
    return obj, attr


@contextlib.contextmanager
def profiled(spark: Any) -> Iterator[StageProfile]:
    """Wrap the runner's stages while the block runs; yields the profile being filled."""
    profile = StageProfile()
    sc = spark.sparkContext
    stack: list[list[Any]] = []  # [label, started, child seconds]
    groups: list[str] = []
    originals: list[tuple[Any, str, Any]] = []
    tag = f"kib{int(time.time() * 1000) % 10**9}"

    def wrap(label: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        group = f"{tag}:{label}"

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            stack.append([label, time.monotonic(), 0.0])
            previous = sc.getLocalProperty("spark.jobGroup.id")
            sc.setLocalProperty("spark.jobGroup.id", group)
            groups.append(group)
            try:
                return fn(*args, **kwargs)
            finally:
                sc.setLocalProperty("spark.jobGroup.id", previous)
                name, started, children = stack.pop()
                elapsed = time.monotonic() - started
                profile.seconds[name] += elapsed - children
                profile.calls[name] += 1
                if stack:
                    stack[-1][2] += elapsed
                else:
                    profile.total_seconds += elapsed
                profile.batches += name == BATCH

        return wrapper

    ungrouped_before = set(sc.statusTracker().getJobIdsForGroup(None))
    for module, dotted, label in _TARGETS:
        owner, attr = _resolve(module, dotted)
        original = owner.__dict__[attr] if isinstance(owner, type) else getattr(owner, attr)
        originals.append((owner, attr, original))
        setattr(owner, attr, wrap(label, original))
    try:
        yield profile
    finally:
        for owner, attr, original in reversed(originals):
            setattr(owner, attr, original)
        tracker = sc.statusTracker()
        for group in set(groups):
            profile.jobs[group.split(":", 1)[1]] += len(tracker.getJobIdsForGroup(group))
        profile.jobs[UNGROUPED] = len(set(tracker.getJobIdsForGroup(None)) - ungrouped_before)
