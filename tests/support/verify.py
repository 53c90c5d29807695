"""``kafka-iceberg verify`` at the end of end-to-end tests: every committed offset in one place."""

from __future__ import annotations

from pathlib import Path

from kafka_iceberg.observe.verify import TableResult, render_text, verify_pipeline
from kafka_iceberg.run import prepare


def assert_verified(pipeline: Path, env: str = "local") -> list[TableResult]:
    """Run verify on every table of ``pipeline`` and fail with its report on any gap or duplicate."""
    results = verify_pipeline(prepare(pipeline, env_name=env))
    assert all(r.ok for r in results), render_text(results)
    return results
