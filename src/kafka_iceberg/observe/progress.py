"""One progress line per batch on a terminal: records, rate, lag, last commit. Silent otherwise."""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from typing import TextIO

from kafka_iceberg.observe.report import BatchReport


@dataclass
class Progress:
    """Prints progress for long runs when ``stream`` is a terminal (or when forced)."""

    stream: TextIO = field(default_factory=lambda: sys.stderr)
    enabled: bool | None = None
    _started: float = field(default_factory=time.monotonic)
    _totals: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.enabled is None:
            self.enabled = bool(getattr(self.stream, "isatty", lambda: False)())

    def line(self, report: BatchReport) -> str:
        """The progress line for ``report`` (cumulative per table)."""
        total = self._totals.get(report.table, 0) + report.records_written
        self._totals[report.table] = total
        elapsed = max(time.monotonic() - self._started, 1e-6)
        commit = f"snapshot {report.snapshot_id} at {report.event_time:%H:%M:%S}" if report.committed else "no commit"
        lag = "?" if report.lag is None else f"{report.lag:,}"
        lost = report.records_lost_total
        return (
            f"{report.table} batch {report.batch_id}: +{report.records_written:,} rows "
            f"({total:,} total, {total / elapsed:,.0f} rows/s), {report.records_failed:,} bad, "
            + (f"{lost:,} lost from Kafka, " if lost else "")
            + f"lag {lag}, {commit}"
        )

    def update(self, report: BatchReport) -> None:
        """Show one batch."""
        text = self.line(report)
        if self.enabled:
            print(text, file=self.stream, flush=True)
