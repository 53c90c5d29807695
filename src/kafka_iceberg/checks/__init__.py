"""Stage 4: data-quality expectations, write rejections and the routing of every bad record."""

from __future__ import annotations

from kafka_iceberg.checks.expectations import ExpectationReport, apply_expectations
from kafka_iceberg.checks.rejections import write_rejections
from kafka_iceberg.checks.routing import ErrorRouter, RoutingResult

__all__ = ["ErrorRouter", "ExpectationReport", "RoutingResult", "apply_expectations", "write_rejections"]
