"""Kafka offsets of a batch: ``{topic: {partition: next offset}}``, the unit every commit marker records."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame

Offsets = dict[str, dict[int, int]]


def merge_offsets(*parts: Mapping[str, Mapping[int, int]] | None) -> Offsets:
    """Per-partition maximum of several ``{topic: {partition: next offset}}`` maps."""
    out: Offsets = {}
    for part in parts:
        for topic, partitions in (part or {}).items():
            for partition, offset in partitions.items():
                current = out.setdefault(topic, {}).get(partition)
                out[topic][partition] = offset if current is None else max(current, offset)
    return out


def batch_offsets(raw: DataFrame) -> Offsets:
    """Next offset after each partition's last record in ``raw``."""
    from pyspark.sql import functions as F

    rows = raw.groupBy("topic", "partition").agg(F.max("offset").alias("last")).collect()
    out: Offsets = {}
    for r in rows:
        out.setdefault(r["topic"], {})[int(r["partition"])] = int(r["last"]) + 1
    return out


def arrow_offsets(batch: pa.RecordBatch) -> Offsets:
    """:func:`batch_offsets` of an Arrow batch, inside a Spark task."""
    import pyarrow as pa

    if not batch.num_rows:
        return {}
    table = pa.Table.from_batches([batch]).select(["topic", "partition", "offset"])
    last = table.group_by(["topic", "partition"]).aggregate([("offset", "max")]).to_pylist()
    out: Offsets = {}
    for r in last:
        out.setdefault(r["topic"], {})[int(r["partition"])] = int(r["offset_max"]) + 1
    return out
