"""Every check of a batch as columns of one frame, and their reading inside the writing task.

The single pass (``write.engine: arrow``, docs/write.md) decodes, checks and writes a batch in one
Spark job without caching it. Spark evaluates each check as a column (an expectation's verdict, a
write rejection's reason); the Spark task that writes the data files reads them with
:class:`Labels` and sorts every record into exactly one outcome, with the precedence the
step-by-step path has (:func:`~kafka_iceberg.checks.expectations.apply_expectations`, then
:func:`~kafka_iceberg.checks.rejections.write_rejections`):

decode error → violated ``fail`` rule (the batch fails) → ``quarantine`` → ``drop`` → write
rejection → written. ``warn`` rules are only counted.

A record that leaves the table (error, quarantine, rejection) carries its original bytes and its
error columns back to the driver, which routes it before the commit; the rest carry nothing back.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kafka_iceberg.checks.rejections import rejection_sql
from kafka_iceberg.decode.plan import ERROR_FIELDS, ERROR_STAGE, ERROR_TEXT, FAILED, HEADERS, KEY, VALUE
from kafka_iceberg.decode.sql import ident
from kafka_iceberg.records import COORDINATES, ERROR_COLUMNS, INTERNAL_PREFIX, TOMBSTONE_COLUMN
from kafka_iceberg.source.offsets import arrow_offsets, merge_offsets
from kafka_iceberg.spec.model import Expectation

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame

REJECT = f"{INTERNAL_PREFIX}reject"  # a write rejection's reason, NULL when the row is writable
ROW_JSON = f"{INTERNAL_PREFIX}row_json"  # the row's payload as JSON, for a quarantined or rejected record


def _flag(i: int) -> str:
    return f"{INTERNAL_PREFIX}exp_{i}"


@dataclass(frozen=True)
class Labels:
    """What a writing task needs to sort records (pickled to Spark's Python workers)."""

    rules: tuple[tuple[str, str, str], ...] = ()  # (name, SQL, on_violation) in declaration order
    carry: tuple[str, ...] = field(default=())  # the row's columns that go to the table

    @classmethod
    def of(cls, expectations: Mapping[str, Expectation], carry: tuple[str, ...] = ()) -> Labels:
        """The labels of ``expectations``, in declaration order, for rows carrying ``carry``."""
        return cls(rules=tuple((n, e.expr, e.on_violation) for n, e in expectations.items()), carry=carry)

    @property
    def flags(self) -> list[str]:
        """The verdict column of each rule, true when the record met it."""
        return [_flag(i) for i in range(len(self.rules))]


def check_columns(
    frame: DataFrame,
    row_columns: list[str],
    expectations: Mapping[str, Expectation],
    *,
    required: Iterable[str],
    keys: Iterable[str],
    payload_columns: list[str],
) -> tuple[DataFrame, Labels]:
    """``frame`` (:func:`~kafka_iceberg.decode.plan.single_frame`) with every check as a column.

    Original bytes stay only on records that will leave the table, so the others carry no second
    copy of their message to the writing task.
    """
    # SQL text for one ``selectExpr``: Columns built with ``pyspark.sql.functions`` take several
    # py4j calls each, about 0.02 s of every batch's plan for these few columns.
    names = list(expectations)
    exempt = ident(TOMBSTONE_COLUMN) if TOMBSTONE_COLUMN in row_columns else "false"
    # Newlines around the rule keep a trailing ``--`` comment inside its parentheses.
    flags = [f"({exempt} OR coalesce((\n{expectations[n].expr}\n), false))" for n in names]
    reject = rejection_sql(row_columns, required=required, keys=keys) or "CAST(NULL AS STRING)"
    kept = [f for f, n in zip(flags, names, strict=True) if expectations[n].on_violation in ("quarantine", "drop")]
    leaves = f"({ident(FAILED)} OR NOT ({' AND '.join(kept) or 'true'}) OR ({reject}) IS NOT NULL)"
    present = ", ".join(ident(c) for c in payload_columns if c in row_columns)
    labelled = frame.selectExpr(
        *[ident(c) for c in row_columns],
        ident(FAILED),
        *[f"{flag} AS {ident(_flag(i))}" for i, flag in enumerate(flags)],
        f"{reject} AS {ident(REJECT)}",
        f"CASE WHEN NOT {ident(FAILED)} AND {leaves} THEN to_json(struct({present})) END AS {ident(ROW_JSON)}",
        *[f"CASE WHEN {leaves} THEN {ident(c)} END AS {ident(c)}" for c in (KEY, VALUE, HEADERS)],
        ident(ERROR_TEXT),
        ident(ERROR_FIELDS),
    )
    carry = tuple(c for c in row_columns if not c.startswith(INTERNAL_PREFIX))
    return labelled, Labels.of(expectations, carry)


def written_rows(labelled: DataFrame, labels: Labels) -> DataFrame:
    """The rows of ``labelled`` :func:`sort_batch` keeps for the table, as a Spark frame (and their tombstone flag).

    For an upsert's MERGE, whose source is a frame: the same precedence as :func:`sort_batch`
    (a violated ``fail`` rule fails the batch before anything is written).
    """
    from pyspark.sql import functions as F

    kept = ~F.coalesce(F.col(FAILED), F.lit(False)) & F.col(REJECT).isNull()
    for flag, (_name, _sql, action) in zip(labels.flags, labels.rules, strict=True):
        if action in ("quarantine", "drop"):
            kept = kept & F.coalesce(F.col(flag), F.lit(False))
    tombstone = [TOMBSTONE_COLUMN] if TOMBSTONE_COLUMN in labelled.columns else []
    return labelled.where(kept).select(*[F.col(c) for c in (*labels.carry, *tombstone)])


# -- Python side (runs in Spark's Python workers) --------------------------------------------------
@dataclass
class Sorted:
    """One Arrow batch sorted: the rows to write, the records leaving the table, the counts."""

    rows: pa.Table
    errors: list[dict[str, Any]]  # decode errors and write rejections (error-row shape)
    quarantined: list[dict[str, Any]]  # records failing a quarantine rule (error-row shape)
    stats: dict[str, Any]


def sort_batch(batch: pa.RecordBatch, labels: Labels) -> Sorted:
    """Sort one batch of :func:`check_columns`' frame (see the module docstring for the order)."""
    import numpy as np
    import pyarrow as pa

    def mask(name: str) -> Any:
        return batch.column(name).fill_null(False).to_numpy(zero_copy_only=False).astype(bool)

    n = batch.num_rows
    failed = mask(FAILED)
    decoded = ~failed
    verdicts = [mask(flag) for flag in labels.flags]
    violated = [decoded & ~ok for ok in verdicts]
    by_action = {action: np.zeros(n, dtype=bool) for action in ("fail", "quarantine", "drop")}
    first: list[list[Any] | None] = []
    for (_name, _sql, action), bad in zip(labels.rules, violated, strict=True):
        if action in by_action:
            by_action[action] |= bad
        first.append(_first_coordinates(batch, bad) if action == "fail" and bad.any() else None)
    quarantine = by_action["quarantine"]
    drop = by_action["drop"] & ~quarantine
    rejected = decoded & ~quarantine & ~drop & batch.column(REJECT).is_valid().to_numpy(zero_copy_only=False)
    write = decoded & ~quarantine & ~drop & ~rejected

    table = pa.Table.from_batches([batch]).select(list(labels.carry))
    errors = _error_rows(batch, failed, lambda i: (batch.column(ERROR_TEXT)[i].as_py(), ERROR_STAGE, ERROR_FIELDS))
    errors += _error_rows(batch, rejected, lambda i: (batch.column(REJECT)[i].as_py(), "write", ROW_JSON))

    def quarantine_reason(i: int) -> tuple[str, str, str]:
        hit = [(name, sql) for (name, sql, action), bad in zip(labels.rules, violated, strict=True)
               if action == "quarantine" and bad[i]]  # fmt: skip
        return *quarantined_by(hit), ROW_JSON

    stats = {
        "in": n,
        "offsets": arrow_offsets(batch),
        "decoded": int(decoded.sum()),
        "violations": [int(bad.sum()) for bad in violated],
        "first": first,
        "quarantined": int(quarantine.sum()),
        "dropped": int(drop.sum()),
    }
    return Sorted(table.filter(pa.array(write)), errors, _error_rows(batch, quarantine, quarantine_reason), stats)


def quarantined_by(hit: list[tuple[str, str]]) -> tuple[str, str]:
    """The reason and stage of a record the quarantine rules ``hit`` (name, SQL; in declaration order) took out."""
    return "; ".join(f"expectation {name} failed: {sql}" for name, sql in hit), f"expectation:{hit[0][0]}"


def _error_rows(batch: pa.RecordBatch, which: Any, reason: Any) -> list[dict[str, Any]]:
    """Error rows (:data:`~kafka_iceberg.records.ERROR_COLUMNS`) of the records ``which`` marks."""
    import numpy as np

    out = []
    for i in np.flatnonzero(which).tolist():
        text, stage, decoded_column = reason(i)
        row = {c: batch.column(c)[i].as_py() for c in ("topic", "partition", "offset", "timestamp")}
        row |= {"key": batch.column(KEY)[i].as_py(), "value": batch.column(VALUE)[i].as_py()}
        row |= {"headers": batch.column(HEADERS)[i].as_py(), "_error": text, "_error_stage": stage}
        row["_decoded"] = batch.column(decoded_column)[i].as_py()
        out.append({c: row[c] for c in ERROR_COLUMNS})
    return out


def _first_coordinates(batch: pa.RecordBatch, which: Any) -> list[Any]:
    """The smallest (topic, partition, offset) among the records ``which`` marks."""
    import numpy as np

    picked = np.flatnonzero(which).tolist()
    coords = [[batch.column(c)[i].as_py() for c in COORDINATES] for i in picked]
    return min(coords)


def merged_stats(parts: Iterable[dict[str, Any]], rules: int) -> dict[str, Any]:
    """Counts of several batches or tasks (:func:`sort_batch`'s ``stats``) added up."""
    total: dict[str, Any] = {"in": 0, "decoded": 0, "violations": [0] * rules, "first": [None] * rules}
    total |= {"quarantined": 0, "dropped": 0, "offsets": {}}
    for part in parts:
        # JSON keeps a partition number as a string key: read back as an int.
        seen = {t: {int(p): o for p, o in ps.items()} for t, ps in part.get("offsets", {}).items()}
        total["offsets"] = merge_offsets(total["offsets"], seen)
        for key in ("in", "decoded", "quarantined", "dropped"):
            total[key] += part[key]
        total["violations"] = [a + b for a, b in zip(total["violations"], part["violations"], strict=True)]
        total["first"] = [
            min((c for c in (a, b) if c is not None), default=None)
            for a, b in zip(total["first"], part["first"], strict=True)
        ]
    return total
