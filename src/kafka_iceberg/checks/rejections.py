"""Write rejections: rows the table would refuse (NOT NULL columns, upsert keys).

They are separated before the commit so one bad row cannot fail a batch whose errors are routed.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from kafka_iceberg.decode.sql import ident, lit
from kafka_iceberg.records import COORDINATES, TOMBSTONE_COLUMN, with_original_bytes

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame


def rejection_reason(columns: Iterable[str], *, required: Iterable[str], keys: Iterable[str]) -> Column | None:
    """Why the table would refuse a row (``"reason; reason"``), NULL for a writable row; None without checks.

    A tombstone (upsert delete) needs its key only. One rule for both writers' paths.
    """
    from pyspark.sql import functions as F

    sql = rejection_sql(columns, required=required, keys=keys)
    return None if sql is None else F.expr(sql)


def rejection_sql(columns: Iterable[str], *, required: Iterable[str], keys: Iterable[str]) -> str | None:
    """:func:`rejection_reason` as SQL text, for a ``selectExpr`` (one py4j call where Columns take several each)."""
    present = set(columns)
    exempt = ident(TOMBSTONE_COLUMN) if TOMBSTONE_COLUMN in present else "false"
    checks = [
        (f"NOT {exempt} AND {ident(c)} IS NULL", f"column {c} is required (NOT NULL) but is null")
        for c in required
        if c in present
    ]
    checks += [(f"{ident(c)} IS NULL", f"upsert key {c} is null") for c in keys if c in present]
    if not checks:
        return None
    reasons = ", ".join(f"CASE WHEN {bad} THEN {lit(reason)} END" for bad, reason in checks)
    return f"nullif(concat_ws('; ', {reasons}), '')"


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

    reason = rejection_reason(rows.columns, required=required, keys=keys)
    if reason is None:
        return rows, None
    bad = reason.isNotNull()
    ok = rows.where(~bad)
    present = [c for c in payload_columns if c in rows.columns]
    failures = rows.where(bad).select(
        *COORDINATES,
        reason.alias("_error"),
        F.lit("write").alias("_error_stage"),
        F.to_json(F.struct(*present)).alias("_decoded"),
    )
    return ok, with_original_bytes(failures, raw)
