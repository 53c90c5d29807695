"""Expectations: SQL rules counted per batch and acted on (warn, drop, quarantine, fail).

A NULL result counts as a violation, like a false one: a rule that cannot be evaluated on a
record has not been met. Upsert tombstones carry only their keys and are exempt.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kafka_iceberg.errors import ExpectationFailedError
from kafka_iceberg.records import COORDINATES, INTERNAL_PREFIX, TOMBSTONE_COLUMN, with_original_bytes
from kafka_iceberg.spec.model import Expectation

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

Persist = Callable[["DataFrame"], "DataFrame"]


@dataclass(frozen=True)
class ExpectationReport:
    """Per-rule pass/fail counts of one batch and what the actions did."""

    passed: dict[str, int] = field(default_factory=dict)
    failed: dict[str, int] = field(default_factory=dict)
    dropped: int = 0
    quarantined: int = 0
    warned: int = 0


def _flag(i: int) -> str:
    return f"{INTERNAL_PREFIX}exp_{i}"


def apply_expectations(
    rows: DataFrame,
    raw: DataFrame,
    expectations: Mapping[str, Expectation],
    *,
    payload_columns: list[str],
    persist: Persist,
) -> tuple[DataFrame, DataFrame | None, ExpectationReport]:
    """Evaluate every rule on ``rows`` in one pass.

    Args:
        rows: decoded (and transformed) rows; must keep ``topic``, ``partition``, ``offset``.
        raw: the Kafka-shaped batch, to give quarantined records their original bytes.
        expectations: rule name → rule.
        payload_columns: columns serialised into ``_decoded`` for quarantined records.
        persist: caches a DataFrame for the rest of the batch (the batch processor releases it).

    Returns:
        The rows to write, the quarantined records as error rows (or None), and the counts.

    Raises:
        ExpectationFailedError: a rule with ``on_violation: fail`` was violated; nothing is written.
    """
    if not expectations:
        return rows, None, ExpectationReport()
    from pyspark.sql import functions as F

    names = list(expectations)
    exempt = F.col(TOMBSTONE_COLUMN) if TOMBSTONE_COLUMN in rows.columns else F.lit(False)
    flags = {_flag(i): exempt | F.coalesce(F.expr(expectations[n].expr), F.lit(False)) for i, n in enumerate(names)}

    def all_ok(action: str) -> Any:
        cond = F.lit(True)
        for i, name in enumerate(names):
            if expectations[name].on_violation == action:
                cond = cond & F.col(_flag(i))
        return cond

    quarantine_ok, drop_ok = all_ok("quarantine"), all_ok("drop")
    flagged = persist(rows.withColumns(flags))
    # One pass over the batch for every count.
    totals = flagged.agg(
        F.count(F.lit(1)).alias("_n"),
        F.sum(F.when(~quarantine_ok, 1).otherwise(0)).alias("_q"),
        F.sum(F.when(quarantine_ok & ~drop_ok, 1).otherwise(0)).alias("_d"),
        *[F.sum(F.when(F.col(f), 0).otherwise(1)).alias(f) for f in flags],
    ).first()
    assert totals is not None
    n = int(totals["_n"])
    failed = {name: int(totals[_flag(i)] or 0) for i, name in enumerate(names)}
    passed = {name: n - failed[name] for name in names}

    for i, name in enumerate(names):
        rule = expectations[name]
        if rule.on_violation == "fail" and failed[name]:
            first = flagged.where(~F.col(_flag(i))).orderBy(*COORDINATES).select(*COORDINATES).first()
            assert first is not None
            raise violation(name, rule.expr, failed[name], (first["topic"], first["partition"], first["offset"]))

    kept = flagged.where(quarantine_ok & drop_ok).drop(*flags)
    errors = None
    quarantine_rules = [(i, n) for i, n in enumerate(names) if expectations[n].on_violation == "quarantine"]
    if quarantine_rules:
        reason = F.concat_ws(
            "; ",
            *[
                F.when(~F.col(_flag(i)), F.lit(f"expectation {n} failed: {expectations[n].expr}"))
                for i, n in quarantine_rules
            ],
        )
        stage = F.coalesce(*[F.when(~F.col(_flag(i)), F.lit(f"expectation:{n}")) for i, n in quarantine_rules])
        present = [c for c in payload_columns if c in rows.columns]
        violations = flagged.where(~quarantine_ok).select(
            *COORDINATES,
            reason.alias("_error"),
            stage.alias("_error_stage"),
            F.to_json(F.struct(*present)).alias("_decoded"),
        )
        errors = with_original_bytes(violations, raw, count=int(totals["_q"] or 0))
    report = ExpectationReport(
        passed=passed,
        failed=failed,
        quarantined=int(totals["_q"] or 0),
        dropped=int(totals["_d"] or 0),
        warned=sum(failed[n] for n in names if expectations[n].on_violation == "warn"),
    )
    return kept, errors, report


def violation(name: str, expr: str, count: int, first: tuple[str, int, int]) -> ExpectationFailedError:
    """The error of a violated ``fail`` rule: how many records, and the first by source coordinates."""
    topic, partition, offset = first
    return ExpectationFailedError(
        f"expectation {name!r} ({expr}) failed for {count} record(s); first at "
        f"topic {topic} partition {partition} offset {offset}"
    )
