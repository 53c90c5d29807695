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
from typing import TYPE_CHECKING, Any

from kafka_iceberg.decode.sql import Checks, ident
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
    from pyspark.sql import functions as F

    missing = [c for c in _REQUIRED_INPUT if c not in df.columns]
    if missing:
        raise ValueError(
            f"decode needs a Kafka-shaped DataFrame ({', '.join(_REQUIRED_INPUT)}, headers); missing {missing}"
        )
    headers = F.col("headers") if "headers" in df.columns else F.lit(None)
    return df.select(
        *[F.col(name).cast(col_type).alias(name) for name, col_type in KAFKA_COLUMNS.items()],
        F.col("key").cast("binary").alias(KEY),
        F.col("value").cast("binary").alias(VALUE),
        headers.cast(HEADERS_ARRAY_TYPE).alias(HEADERS),
    )


def apply_stages(frame: DataFrame, plan: Plan) -> DataFrame:
    """``frame`` with the plan's helper columns added, one ``select`` per stage."""
    from pyspark.sql import functions as F

    for stage in plan.stages:
        if stage:
            frame = frame.select("*", *[F.expr(sql).alias(name) for name, sql in stage])
    return frame


def assemble(
    frame: DataFrame, plan: Plan, *, pt: str | None, include_headers: bool
) -> tuple[DataFrame, DataFrame, DataFrame]:
    """Split the staged frame into (rows in table order + tombstone flag, error rows, the outcome).

    The outcome is the one frame both rows and error rows are filtered from: each record's typed
    fields and error. Persisting it before using either decodes the batch once instead of twice.
    """
    staged = outcome_of(frame, plan)
    rows, errors = split(staged, plan, pt=pt, include_headers=include_headers)
    return rows, errors, staged


def outcome_of(frame: DataFrame, plan: Plan) -> DataFrame:
    """Each record of ``frame`` with its typed fields (``_ki_fields``), error flag and tombstone flag."""
    from pyspark.sql import functions as F

    frame = apply_stages(frame, plan)
    fields = _fields_struct(plan)
    bundle = F.struct(
        F.coalesce(F.expr(plan.checks.fails()), F.lit(False)).alias(FAILED),
        fields.alias(FIELDS),
        F.coalesce(F.expr(plan.tombstone), F.lit(False)).alias(TOMB),
    )
    if plan.checks.rules or plan.checks.problems:
        # Every column passes through the Generate: the error messages need the helper columns.
        return frame.select("*", F.inline(F.array(bundle)))
    # binary: nothing can fail, and a literal false filter prunes the errors plan to nothing
    return frame.select("*", fields.alias(FIELDS), F.expr(plan.tombstone).alias(TOMB), F.lit(False).alias(FAILED))


def _fields_struct(plan: Plan) -> Any:
    """The ``_ki_fields`` struct: each payload column's SQL."""
    from pyspark.sql import functions as F

    if plan.fields:
        return F.struct(*[F.expr(sql).alias(name) for name, sql in plan.fields.items()])
    return F.struct(F.lit(None).cast("string").alias("_ki_none"))  # a flatten batch with no column at all


def split(staged: DataFrame, plan: Plan, *, pt: str | None, include_headers: bool) -> tuple[DataFrame, DataFrame]:
    """(rows, error rows) of an outcome from :func:`outcome_of`."""
    from pyspark.sql import functions as F

    rows = staged.where(~F.col(FAILED)).select(*_row_columns(plan, pt=pt, include_headers=include_headers))

    failed = staged.where(F.col(FAILED))
    if plan.late:
        failed = failed.select("*", *[F.expr(sql).alias(name) for name, sql in plan.late])
    errors = failed.select(
        *[F.col(c) for c in KAFKA_COLUMNS],
        F.col(KEY).alias("key"),
        F.col(VALUE).alias("value"),
        F.col(HEADERS).alias("headers"),
        F.expr(plan.checks.reason()).cast("string").alias("_error"),
        F.lit(ERROR_STAGE).alias("_error_stage"),
        F.expr(f"nullif(to_json({FIELDS}), '{{}}')").alias("_decoded"),
    )
    return rows, errors


def single_frame(
    staged: DataFrame, plan: Plan, *, pt: str | None, include_headers: bool
) -> tuple[DataFrame, list[str]]:
    """Rows and error rows of an outcome in one frame, for one pass over the batch; and the row's columns.

    Each record has the columns :func:`split` gives a row, plus ``_ki_failed``, its original key,
    value and headers (``_ki_key``, ``_ki_value``, ``_ki_headers``) and, for a failed record only,
    its error message and readable fields (``_ki_e_error``, ``_ki_e_decoded``). The messages are
    built for failed records only: on the others the CASE skips them.
    """
    from pyspark.sql import functions as F

    failed = F.col(FAILED)
    if plan.late:
        staged = staged.select("*", *[F.when(failed, F.expr(sql)).alias(name) for name, sql in plan.late])
    row = _row_columns(plan, pt=pt, include_headers=include_headers)
    frame = staged.select(
        *row,
        failed.alias(FAILED),
        F.col(KEY),
        F.col(VALUE),
        F.col(HEADERS),
        F.when(failed, F.expr(plan.checks.reason()).cast("string")).alias(ERROR_TEXT),
        F.when(failed, F.expr(f"nullif(to_json({FIELDS}), '{{}}')")).alias(ERROR_FIELDS),
    )
    return frame, frame.columns[: len(row)]


def _row_columns(plan: Plan, *, pt: str | None, include_headers: bool) -> list[Any]:
    """A row's columns in table order, then its tombstone flag."""
    from pyspark.sql import functions as F

    out: list[Any] = [F.col(c) for c in KAFKA_COLUMNS]
    out += [F.col(FIELDS).getField(name).alias(name) for name in plan.payload]
    if pt is not None:
        out.append(F.lit(pt).alias(PT_COLUMN))
    if include_headers:
        out.append(F.expr(HEADERS_MAP).alias(HEADERS_COLUMN))
    out.append(F.col(TOMB).alias(TOMBSTONE_COLUMN))
    return out
