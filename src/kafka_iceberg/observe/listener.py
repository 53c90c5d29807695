"""Spark streaming progress into the metrics (Spark's Kafka source and replay streams)."""

from __future__ import annotations

from typing import Any

from kafka_iceberg.observe.metrics import Metrics


def record_progress(metrics: Metrics, target: tuple[str, str], progress: dict[str, Any]) -> None:
    """Input rate and Kafka lag of one progress (``StreamingQueryProgress.json`` as a dict)."""
    lag = None
    for source in progress.get("sources") or []:
        behind = (source.get("metrics") or {}).get("maxOffsetsBehindLatest")
        if behind is not None:
            lag = (lag or 0) + int(float(behind))
    metrics.record_progress(
        *target,
        batch_id=int(progress.get("batchId", -1)),
        rows_per_second=float(progress.get("processedRowsPerSecond") or 0.0),
        lag=lag,
    )


def progress_listener(metrics: Metrics, tables: dict[str, tuple[str, str]]) -> Any:
    """A StreamingQueryListener feeding input rate and Kafka lag of named queries into ``metrics``.

    Events arrive asynchronously: the run also records each query's last progress itself when the
    query ends (:func:`record_progress`), so the metrics a run leaves behind do not race the bus.

    Args:
        metrics: the process's metrics.
        tables: query name → (pipeline, table).
    """
    import json

    from pyspark.sql.streaming.listener import StreamingQueryListener

    class _Listener(StreamingQueryListener):
        def onQueryStarted(self, event: Any) -> None:
            pass

        def onQueryIdle(self, event: Any) -> None:
            pass

        def onQueryTerminated(self, event: Any) -> None:
            pass

        def onQueryProgress(self, event: Any) -> None:
            target = tables.get(event.progress.name or "")
            if target is not None:
                record_progress(metrics, target, json.loads(event.progress.json))

    return _Listener()
