"""The write stage: rows → one Iceberg commit per batch, carrying an idempotency marker.

:class:`TableWriter` creates and evolves the table (:class:`TablePlan`) and commits batches in the
table spec's ``commit_mode``; :class:`CommitMarker` and :class:`CommitResult` travel in and out.
"""

from __future__ import annotations

from kafka_iceberg.write.marker import CommitMarker, CommitResult
from kafka_iceberg.write.plan import TablePlan
from kafka_iceberg.write.writer import TableWriter

__all__ = ["CommitMarker", "CommitResult", "TablePlan", "TableWriter"]
