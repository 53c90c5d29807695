"""The shape every format decoder fills in, and its assembly into rows and error rows.

A decoder adds columns in *stages* (one ``select`` each, so a later stage can name an earlier
column in ``try_cast``) and then states, as SQL over those columns, each payload column's typed
value, the :class:`~kafka_iceberg.decode.sql.Checks` that make a record an error, and whether it
is a tombstone.

Assembly passes the per-record outcome through ``inline(array(struct(...)))`` before splitting
rows from errors. Without that barrier Spark pushes the filter below the projection and
evaluates the whole decode (``from_json`` included) twice per record. Error messages are built
after the split, for error rows only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kafka_iceberg.decode.sql import Checks, ident, lit
from kafka_iceberg.records import HEADERS_TYPE as HEADERS_ARRAY_TYPE
from kafka_iceberg.records import TOMBSTONE_COLUMN
from kafka_iceberg.spec.columns import HEADERS_COLUMN, KAFKA_COLUMNS, PT_COLUMN

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from kafka_iceberg.spec.model import TableSpec

KEY = "_ki_key"
VALUE = "_ki_value"
HEADERS = "_ki_headers"
FAILED = "_ki_failed"
FIELDS = "_ki_fields"
TOMB = "_ki_tomb"

ERROR_STAGE = "decode"
# Columns of :func:`single_frame` beside a row's: the decode error's message and readable fields.
ERROR_TEXT = "_ki_e_error"
ERROR_FIELDS = "_ki_e_decoded"
_REQUIRED_INPUT = ("key", "value", "topic", "partition", "offset", "timestamp")

# Kafka allows repeated header keys; a map keeps the last one (what Kafka clients' lastHeader returns).
HEADERS_MAP = (
    f"map_from_entries(filter({HEADERS}, (h, i) -> h.key IS NOT NULL AND "
    f"NOT exists(slice({HEADERS}, i + 2, size({HEADERS})), x -> x.key = h.key)))"
)


@dataclass
class Plan:
    """A format decoder's output: staged helper columns plus SQL for fields, checks and tombstone."""

    payload: dict[str, str]
    fields: dict[str, str] = field(default_factory=dict)
    checks: Checks = field(default_factory=Checks)
    tombstone: str = "false"
    stages: list[list[tuple[str, str]]] = field(default_factory=list)
    late: list[tuple[str, str]] = field(default_factory=list)
    _count: int = 0

    def add(self, stage: int, hint: str, sql: str) -> str:
        """Add a helper column computed in ``stage`` (0-based); returns its quoted name."""
        self._count += 1
        name = f"_ki_{hint}{self._count}"
        while len(self.stages) <= stage:
            self.stages.append([])
        self.stages[stage].append((name, sql))
        return ident(name)

    def add_late(self, hint: str, sql: str) -> str:
        """Add a helper column computed for error rows only, for their messages."""
        self._count += 1
        name = f"_ki_{hint}{self._count}"
        self.late.append((name, sql))
        return ident(name)


def payload_part(spec: TableSpec) -> tuple[str, str]:
    """(part, frame column) a structured format decodes: ``value``, or ``key`` under mode key."""
    return ("key", KEY) if spec.source.effective_mode == "key" else ("value", VALUE)


def kafka_frame(df: DataFrame) -> DataFrame:
    """The input with the contract's types, its key/value/headers renamed out of the payload's way.

    Raises:
        ValueError: a column of the Kafka shape is missing.
    """
    missing = [c for c in _REQUIRED_INPUT if c not in df.columns]
    if missing:
        raise ValueError(
            f"decode needs a Kafka-shaped DataFrame ({', '.join(_REQUIRED_INPUT)}, headers); missing {missing}"
        )
    headers = ident("headers") if "headers" in df.columns else "NULL"
    return df.selectExpr(  # SQL text: one py4j call per column where Columns take several
        *[f"CAST({ident(name)} AS {col_type}) AS {ident(name)}" for name, col_type in KAFKA_COLUMNS.items()],
        f"CAST({ident('key')} AS BINARY) AS {ident(KEY)}",
        f"CAST({ident('value')} AS BINARY) AS {ident(VALUE)}",
        f"CAST({headers} AS {HEADERS_ARRAY_TYPE}) AS {ident(HEADERS)}",
    )


def _as(sql: str, name: str) -> str:
    return f"{sql} AS {ident(name)}"


# The decode's columns are SQL text handed to ``selectExpr``: one py4j call per ``select`` where
# building Column objects took several per column (about 800 per flatten batch of 20 columns, a
# fixed cost of ~0.1 s per batch).
def apply_stages(frame: DataFrame, plan: Plan) -> DataFrame:
    """``frame`` with the plan's helper columns added, one ``select`` per stage."""
    for stage in plan.stages:
        if stage:
            frame = frame.selectExpr("*", *[_as(sql, name) for name, sql in stage])
    return frame


def outcome_of(frame: DataFrame, plan: Plan) -> DataFrame:
    """Each record of ``frame`` with its typed fields (``_ki_fields``), error flag and tombstone flag."""
    frame = apply_stages(frame, plan)
    fields = _fields_struct(plan)
    if plan.checks.rules or plan.checks.problems:
        bundle = (
            f"named_struct({lit(FAILED)}, coalesce({plan.checks.fails()}, false), {lit(FIELDS)}, {fields}, "
            f"{lit(TOMB)}, coalesce({plan.tombstone}, false))"
        )
        # Every column passes through the Generate: the error messages need the helper columns.
        return frame.selectExpr("*", f"inline(array({bundle}))")
    # binary: nothing can fail, and a literal false filter prunes the errors plan to nothing
    return frame.selectExpr("*", _as(fields, FIELDS), _as(plan.tombstone, TOMB), _as("false", FAILED))


def _fields_struct(plan: Plan) -> str:
    """SQL of the ``_ki_fields`` struct: each payload column's SQL."""
    if plan.fields:
        return "named_struct(" + ", ".join(f"{lit(name)}, {sql}" for name, sql in plan.fields.items()) + ")"
    return "named_struct('_ki_none', CAST(NULL AS STRING))"  # a flatten batch with no column at all


def split(staged: DataFrame, plan: Plan, *, pt: str | None, include_headers: bool) -> tuple[DataFrame, DataFrame]:
    """(rows, error rows) of an outcome from :func:`outcome_of`."""
    rows = staged.where(f"NOT {ident(FAILED)}").selectExpr(*_row_columns(plan, pt=pt, include_headers=include_headers))

    failed = staged.where(ident(FAILED))
    if plan.late:
        failed = failed.selectExpr("*", *[_as(sql, name) for name, sql in plan.late])
    errors = failed.selectExpr(
        *[ident(c) for c in KAFKA_COLUMNS],
        _as(ident(KEY), "key"),
        _as(ident(VALUE), "value"),
        _as(ident(HEADERS), "headers"),
        _as(f"CAST({plan.checks.reason()} AS STRING)", "_error"),
        _as(lit(ERROR_STAGE), "_error_stage"),
        _as(_readable_fields(), "_decoded"),
    )
    return rows, errors


def _readable_fields() -> str:
    return f"nullif(to_json({ident(FIELDS)}), '{{}}')"


def single_frame(
    staged: DataFrame, plan: Plan, *, pt: str | None, include_headers: bool
) -> tuple[DataFrame, list[str]]:
    """Rows and error rows of an outcome in one frame, for one pass over the batch; and the row's columns.

    Each record has the columns :func:`split` gives a row, plus ``_ki_failed``, its original key,
    value and headers (``_ki_key``, ``_ki_value``, ``_ki_headers``) and, for a failed record only,
    its error message and readable fields (``_ki_e_error``, ``_ki_e_decoded``). The messages are
    built for failed records only: on the others the CASE skips them.
    """
    failed = ident(FAILED)
    if plan.late:
        staged = staged.selectExpr("*", *[_as(f"CASE WHEN {failed} THEN {sql} END", name) for name, sql in plan.late])
    row = _row_columns(plan, pt=pt, include_headers=include_headers)
    frame = staged.selectExpr(
        *row,
        failed,
        ident(KEY),
        ident(VALUE),
        ident(HEADERS),
        _as(f"CASE WHEN {failed} THEN CAST({plan.checks.reason()} AS STRING) END", ERROR_TEXT),
        _as(f"CASE WHEN {failed} THEN {_readable_fields()} END", ERROR_FIELDS),
    )
    return frame, frame.columns[: len(row)]


def _row_columns(plan: Plan, *, pt: str | None, include_headers: bool) -> list[str]:
    """SQL of a row's columns in table order, then its tombstone flag."""
    out = [ident(c) for c in KAFKA_COLUMNS]
    out += [_as(f"{ident(FIELDS)}.{ident(name)}", name) for name in plan.payload]
    if pt is not None:
        out.append(_as(lit(pt), PT_COLUMN))
    if include_headers:
        out.append(_as(HEADERS_MAP, HEADERS_COLUMN))
    out.append(_as(ident(TOMB), TOMBSTONE_COLUMN))
    return out
