"""Write rejections: rows the table would refuse (NOT NULL columns, upsert keys).

They are separated before the commit so one bad row cannot fail a batch whose errors are routed.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from kafka_iceberg.records import COORDINATES, TOMBSTONE_COLUMN, with_original_bytes

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


def write_rejections(
    rows: DataFrame, raw: DataFrame, *, required: Iterable[str], keys: Iterable[str], payload_columns: list[str]
) -> tuple[DataFrame, DataFrame | None]:
    """Split ``rows`` into writable rows and error rows (stage ``write``).

    Args:
        rows: the rows about to be written.
        raw: the Kafka-shaped batch, for the rejected records' original bytes.
        required: columns the table declares NOT NULL.
        keys: upsert key columns (a NULL key can neither match nor delete).
        payload_columns: columns serialised into ``_decoded``.
    """
    from pyspark.sql import functions as F

    is_tombstone = F.col(TOMBSTONE_COLUMN) if TOMBSTONE_COLUMN in rows.columns else F.lit(False)
    checks = [
        (c, f"column {c} is required (NOT NULL) but is null", ~is_tombstone) for c in required if c in rows.columns
    ]
    checks += [(c, f"upsert key {c} is null", F.lit(True)) for c in keys if c in rows.columns]
    if not checks:
        return rows, None
    bad = F.lit(False)
    reason_parts = []
    for column, reason, applies in checks:
        failing = applies & F.col(column).isNull()
        bad = bad | failing
        reason_parts.append(F.when(failing, F.lit(reason)))
    ok = rows.where(~bad)
    present = [c for c in payload_columns if c in rows.columns]
    failures = rows.where(bad).select(
        *COORDINATES,
        F.concat_ws("; ", *reason_parts).alias("_error"),
        F.lit("write").alias("_error_stage"),
        F.to_json(F.struct(*present)).alias("_decoded"),
    )
    return ok, with_original_bytes(failures, raw)
