"""``kafka-iceberg capture``: record a live topic into replay files (Parquet or JSON lines)."""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kafka_iceberg.source.direct import to_arrow
from kafka_iceberg.source.replay import ReplayFormat

RECORDS_PER_FILE = 50_000
ROW_GROUP_RECORDS = 10_000
"""Parquet row group of a replay file: Spark splits a file only at row groups, so a file written as
one group is read (and decoded) by a single task however many cores there are."""


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode()


def _jsonl_row(msg: Any) -> str:
    b64 = _b64
    ts = msg.timestamp()[1]
    return json.dumps(
        {
            "key": b64(msg.key()),
            "value": b64(msg.value()),
            "topic": msg.topic(),
            "partition": msg.partition(),
            "offset": msg.offset(),
            "timestamp": None if ts < 0 else _iso(ts),
            "headers": [{"key": k, "value": b64(v)} for k, v in msg.headers() or []] or None,
        }
    )


def _iso(ms: int) -> str:
    import datetime as dt

    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.timezone.utc).isoformat().replace("+00:00", "Z")


def capture(
    config: Mapping[str, str],
    topic: str,
    out: Path,
    *,
    fmt: ReplayFormat = "parquet",
    records_per_file: int = RECORDS_PER_FILE,
) -> int:
    """Copy every record of ``topic`` present now (up to the high watermarks) into files under ``out``.

    Args:
        config: resolved confluent-kafka consumer settings.
        topic: the topic to record.
        out: directory receiving ``capture-<topic>-NNNN.parquet`` or ``.jsonl`` files.
        fmt: ``parquet`` (binary kept as is) or ``jsonl`` (base64 key/value/header values).
        records_per_file: records per file; each file is one micro-batch on replay.

    Returns:
        How many records were written.
    """
    import pyarrow.parquet as pq
    from confluent_kafka import Consumer, TopicPartition

    out.mkdir(parents=True, exist_ok=True)
    consumer = Consumer(
        {**config, "group.id": f"kafka-iceberg-capture-{uuid.uuid4().hex}", "enable.auto.commit": "false"}
    )
    total, index = 0, 0
    try:
        meta = consumer.list_topics(topic, timeout=10).topics.get(topic)
        if meta is None or meta.error is not None:
            return 0
        ends, assignment = {}, []
        for p in sorted(meta.partitions):
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            if high > low:
                ends[p] = high
                assignment.append(TopicPartition(topic, p, low))
        consumer.assign(assignment)
        pending: list[Any] = []

        def flush() -> None:
            nonlocal index, total
            if not pending:
                return
            stem = out / f"capture-{topic}-{index:04d}"
            if fmt == "parquet":
                pq.write_table(to_arrow(pending), stem.with_suffix(".parquet"), row_group_size=ROW_GROUP_RECORDS)
            else:
                stem.with_suffix(".jsonl").write_text("".join(_jsonl_row(m) + "\n" for m in pending))
            index += 1
            total += len(pending)
            pending.clear()

        remaining = set(ends)
        while remaining:
            batch = consumer.consume(num_messages=min(10_000, records_per_file), timeout=5.0)
            if not batch:
                break
            for msg in batch:
                offset = int(msg.offset() or 0)
                if msg.error() or msg.partition() not in remaining or offset >= ends[msg.partition()]:
                    continue
                pending.append(msg)
                if offset + 1 >= ends[msg.partition()]:
                    remaining.discard(msg.partition())
                if len(pending) >= records_per_file:
                    flush()
        flush()
    finally:
        consumer.close()
    return total
