"""The one-line JSON summary an ingest run prints last.

Job runs on Databricks keep a task's stdout (``jobs/runs/get-output`` returns it as ``logs``) long
after the cluster is gone, so this line is how ``kafka-iceberg workspace`` learns, without Spark or
the catalog, how many records a run wrote and failed, when each table last committed and its lag.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from kafka_iceberg.observe.report import BatchReport

SUMMARY_PREFIX = "kafka-iceberg-summary: "


def summarize(reports: Iterable[BatchReport], tables: Iterable[str] = ()) -> dict[str, Any]:
    """Per-table and total counts of a run's batch reports; ``tables`` adds tables with no batch."""
    per_table: dict[str, dict[str, Any]] = {t: _empty() for t in tables}
    for r in reports:
        row = per_table.setdefault(r.table, _empty())
        row["batches"] += 1
        row["records_written"] += r.records_written
        row["records_failed"] += r.records_failed
        row["records_quarantined"] += r.records_quarantined
        row["records_published"] += r.records_published
        row["records_lost"] += r.records_lost_total
        if r.committed:
            row["last_commit"] = r.event_time.isoformat()
            row["snapshot_id"] = r.snapshot_id
        if r.lag is not None:
            row["lag"] = r.lag
    return {
        "records_written": sum(t["records_written"] for t in per_table.values()),
        "records_failed": sum(t["records_failed"] for t in per_table.values()),
        "records_lost": sum(t["records_lost"] for t in per_table.values()),
        "tables": per_table,
    }


def _empty() -> dict[str, Any]:
    return {
        "batches": 0,
        "records_written": 0,
        "records_failed": 0,
        "records_quarantined": 0,
        "records_published": 0,
        "records_lost": 0,
        "last_commit": None,
        "snapshot_id": None,
        "lag": None,
    }


def summary_line(summary: dict[str, Any]) -> str:
    """The summary as the single line an ingest run prints last."""
    return SUMMARY_PREFIX + json.dumps(summary, sort_keys=True, separators=(",", ":"))


def parse_summary(logs: str | None) -> dict[str, Any] | None:
    """The last summary line in a task's output, or None when there is none (or it is unreadable)."""
    for line in reversed((logs or "").splitlines()):
        start = line.find(SUMMARY_PREFIX)
        if start < 0:
            continue
        try:
            data = json.loads(line[start + len(SUMMARY_PREFIX) :])
        except ValueError:
            return None
        return data if isinstance(data, dict) else None
    return None
