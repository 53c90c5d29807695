"""The facts of one batch and of one maintenance action, as every observer receives them."""

from __future__ import annotations

import dataclasses
import datetime as dt
from dataclasses import dataclass, field
from typing import Any


@dataclass
class BatchReport:
    """Everything that happened to one micro-batch of one table."""

    pipeline: str
    table: str
    batch_id: int
    stream: str
    event_time: dt.datetime = field(default_factory=lambda: dt.datetime.now(dt.timezone.utc))
    records_in: int = 0
    records_written: int = 0
    records_failed: int = 0  # bad records of every stage (decode, schema, write, quarantine expectations)
    records_quarantined: int = 0
    records_published: int = 0  # sent to the error topic
    records_skipped: int = 0  # dropped under skip_error
    records_dropped: int = 0  # dropped by expectations
    # Gone from Kafka before the job read them, skipped under ``kafka.fail_on_data_loss: false`` (the
    # direct reader; Spark's Kafka source does not say how many): range (``orders[0] 4-7``) → records.
    records_lost: dict[str, int] = field(default_factory=dict)
    expectations_passed: dict[str, int] = field(default_factory=dict)
    expectations_failed: dict[str, int] = field(default_factory=dict)
    bytes_written: int = 0
    files_created: int = 0
    committed: bool = False  # False for an already-committed (replayed) batch or a failure
    snapshot_id: int | None = None
    commit_retries: int = 0
    commit_latency_s: float = 0.0
    write_latency_s: float = 0.0
    batch_latency_s: float = 0.0
    lag: int | None = None
    error: str | None = None

    @property
    def records_lost_total(self) -> int:
        """Records of every range in :attr:`records_lost`."""
        return sum(self.records_lost.values())

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (one line of the JSON-lines metrics file)."""
        out = dataclasses.asdict(self)
        out["event_time"] = self.event_time.isoformat()
        out["kind"] = "batch"
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> BatchReport:
        """Inverse of :meth:`to_json`."""
        values = {k: v for k, v in data.items() if k in {f.name for f in dataclasses.fields(cls)}}
        values["event_time"] = dt.datetime.fromisoformat(data["event_time"])
        return cls(**values)


@dataclass
class MaintenanceReport:
    """What one maintenance action changed on one table."""

    pipeline: str
    table: str
    action: str  # rewrite_data_files, expire_snapshots, remove_orphan_files, rewrite_manifests
    event_time: dt.datetime = field(default_factory=lambda: dt.datetime.now(dt.timezone.utc))
    details: dict[str, Any] = field(default_factory=dict)
    snapshot_id: int | None = None
    duration_s: float = 0.0
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        out = dataclasses.asdict(self)
        out["event_time"] = self.event_time.isoformat()
        out["kind"] = "maintenance"
        return out
