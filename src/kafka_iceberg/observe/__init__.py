"""Stage 6: what the pipeline is doing — per-batch reports, metrics, the event log, progress."""

from __future__ import annotations

from kafka_iceberg.observe.metrics import Metrics
from kafka_iceberg.observe.report import BatchReport, MaintenanceReport

__all__ = ["BatchReport", "MaintenanceReport", "Metrics"]
