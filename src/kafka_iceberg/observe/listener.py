"""Spark streaming progress into the metrics (Spark's Kafka source and replay streams)."""

from __future__ import annotations

from typing import Any

from kafka_iceberg.observe.metrics import Metrics


def progress_listener(metrics: Metrics, tables: dict[str, tuple[str, str]]) -> Any:
    """A StreamingQueryListener feeding input rate and Kafka lag of named queries into ``metrics``.

    Args:
        metrics: the process's metrics.
        tables: query name → (pipeline, table).
    """
    from pyspark.sql.streaming.listener import StreamingQueryListener

    class _Listener(StreamingQueryListener):
        def onQueryStarted(self, event: Any) -> None:
            pass

        def onQueryIdle(self, event: Any) -> None:
            pass

        def onQueryTerminated(self, event: Any) -> None:
            pass

        def onQueryProgress(self, event: Any) -> None:
            progress = event.progress
            target = tables.get(progress.name or "")
            if target is None:
                return
            lag = None
            for source in progress.sources:
                behind = (source.metrics or {}).get("maxOffsetsBehindLatest")
                if behind is not None:
                    lag = (lag or 0) + int(float(behind))
            metrics.record_progress(*target, rows_per_second=float(progress.processedRowsPerSecond or 0.0), lag=lag)

    return _Listener()
