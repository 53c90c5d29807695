"""How a batch becomes one Iceberg commit: the per-mode Spark action, and retries on conflicts.

- ``append``: ``writeTo(table).append()``.
- ``overwrite``: ``writeTo(table).overwritePartitions()`` — replaces exactly the partitions the batch
  holds rows for (Iceberg's dynamic overwrite); on an unpartitioned table that is the whole table.
- ``upsert``: the newest record per key (by the sequence field, then ``offset``) is kept, then
  ``MERGE INTO`` on the keys: a newer-or-equal sequence updates, an older one is ignored, a tombstone
  (``_ki_tombstone``) deletes and never inserts.
"""

from __future__ import annotations

import random
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from kafka_iceberg.errors import CommitConflictError
from kafka_iceberg.records import INTERNAL_PREFIX, TOMBSTONE_COLUMN
from kafka_iceberg.write.jvm import conflict_reason
from kafka_iceberg.write.schema import align, quote

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType

T = TypeVar("T")
OFFSET_COLUMN = "offset"
SEQUENCE_FIELD_DEFAULT = OFFSET_COLUMN
_JITTER = 0.1  # up to +10 % on each wait so that competing writers drift apart


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff: ``min_wait_ms``, doubled per retry, capped at ``max_wait_ms``."""

    num_retries: int
    min_wait_ms: int
    max_wait_ms: int

    def wait_ms(self, retry: int) -> float:
        """Base wait before retry number ``retry`` (0-based), before jitter."""
        return float(min(self.max_wait_ms, self.min_wait_ms * 2**retry))


def run_with_retries(
    attempt: Callable[[int], T],
    policy: RetryPolicy,
    *,
    table: str,
    sleep: Callable[[float], None] = time.sleep,
    on_retry: Callable[[int, str], None] | None = None,
) -> tuple[T, int]:
    """Call ``attempt(n)`` until it does not raise a commit conflict.

    Args:
        attempt: one try; gets the 0-based attempt number.
        policy: how often and how long to wait.
        table: named in the error.
        sleep: waits (seconds); replaced in tests.
        on_retry: called with (retry number, conflict) before each wait.

    Returns:
        The attempt's value and the number of retries it took.

    Raises:
        CommitConflictError: still conflicting after ``policy.num_retries`` retries.
        Exception: anything that is not a commit conflict, unchanged, at once.
    """
    retry = 0
    while True:
        try:
            return attempt(retry), retry
        except Exception as exc:
            reason = conflict_reason(exc)
            if reason is None:
                raise
            if retry >= policy.num_retries:
                raise CommitConflictError(
                    f"COMMIT FAILED: table {table} still conflicted with concurrent commits after "
                    f"{policy.num_retries} retries (commit.retry.num-retries={policy.num_retries}, "
                    f"commit.retry.min-wait-ms={policy.min_wait_ms}); last conflict: {reason}. "
                    "Nothing of this batch was committed; the job stops so it can be re-run from its checkpoint."
                ) from exc
            if on_retry is not None:
                on_retry(retry + 1, reason)
            sleep(policy.wait_ms(retry) * (1.0 + random.random() * _JITTER) / 1000.0)
            retry += 1


def drop_internal(rows: DataFrame) -> DataFrame:
    """``rows`` without ``_ki_*`` columns."""
    internal = [c for c in rows.columns if c.startswith(INTERNAL_PREFIX)]
    return rows.drop(*internal) if internal else rows


def aligned(rows: DataFrame, table: StructType, *, keep: Sequence[str] = ()) -> DataFrame:
    """``rows`` reshaped to the table's columns (order, types, missing as NULL), plus ``keep`` columns."""
    kept = [c for c in keep if c in rows.columns]
    if _in_shape(rows.schema, table, kept):  # the usual batch: a select of every column as it is costs ~40 py4j calls
        return rows
    exprs = align({c: rows[quote(c)] for c in rows.columns}, rows.schema, table)
    return rows.select(*exprs, *[rows[quote(c)] for c in kept])


def _in_shape(batch: StructType, table: StructType, keep: Sequence[str]) -> bool:
    """Whether ``batch`` is the table's columns in order with their types, then ``keep``: :func:`aligned`'s shape."""
    if [f.name for f in batch.fields] != [*table.names, *keep]:
        return False
    return all(b.dataType == t.dataType for b, t in zip(batch.fields, table.fields, strict=False))


def latest_per_key(rows: DataFrame, keys: Sequence[str], sequence: str) -> DataFrame:
    """One row per key: the highest sequence wins, then the highest ``offset`` (a Kafka replay tie)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    order = [F.col(quote(sequence)).desc_nulls_last()]
    if sequence != OFFSET_COLUMN and OFFSET_COLUMN in rows.columns:
        order.append(F.col(quote(OFFSET_COLUMN)).desc_nulls_last())
    window = Window.partitionBy(*[F.col(quote(k)) for k in keys]).orderBy(*order)
    rank = f"{INTERNAL_PREFIX}rank"
    return rows.withColumn(rank, F.row_number().over(window)).where(F.col(rank) == 1).drop(rank)


def upsert_source(rows: DataFrame, table: StructType, keys: Sequence[str], sequence: str) -> DataFrame:
    """The MERGE source: table-aligned rows, newest per key, with a non-null ``_ki_tombstone``."""
    from pyspark.sql import functions as F

    if TOMBSTONE_COLUMN in rows.columns:
        rows = rows.withColumn(TOMBSTONE_COLUMN, F.coalesce(F.col(TOMBSTONE_COLUMN).cast("boolean"), F.lit(False)))
    else:
        rows = rows.withColumn(TOMBSTONE_COLUMN, F.lit(False))
    source = aligned(rows, table, keep=[TOMBSTONE_COLUMN])
    return latest_per_key(source, keys, sequence)


def merge_sql(table: str, source_view: str, columns: Sequence[str], keys: Sequence[str], sequence: str) -> str:
    """The MERGE statement of an upsert.

    A matched row changes only if the source's sequence is at least the target's (or the target has
    none): late, older records never overwrite newer ones. Keys match with ``=``: a source row with a
    NULL key never gets here (``checks/rejections.py`` rejects it), so ``<=>`` would match nothing more,
    and ``=`` lets the join take the source as :func:`latest_per_key` partitioned it, where ``<=>``
    (joined on ``coalesce(k, 0), isnull(k)``) shuffled it a second time.
    """
    on = " AND ".join(f"t.{quote(k)} = s.{quote(k)}" for k in keys)
    seq = quote(sequence)
    newer = f"(t.{seq} IS NULL OR s.{seq} >= t.{seq})"
    tomb = f"s.{quote(TOMBSTONE_COLUMN)}"
    sets = ", ".join(f"t.{quote(c)} = s.{quote(c)}" for c in columns)
    names = ", ".join(quote(c) for c in columns)
    values = ", ".join(f"s.{quote(c)}" for c in columns)
    return (
        f"MERGE INTO {table} t USING {source_view} s ON {on} "
        f"WHEN MATCHED AND {tomb} AND {newer} THEN DELETE "
        f"WHEN MATCHED AND NOT {tomb} AND {newer} THEN UPDATE SET {sets} "
        f"WHEN NOT MATCHED AND NOT {tomb} THEN INSERT ({names}) VALUES ({values})"
    )


def run_merge(source: DataFrame, table: str, columns: Sequence[str], keys: Sequence[str], sequence: str) -> None:
    """Run the upsert MERGE with ``source`` registered as a uniquely named temporary view."""
    spark = source.sparkSession
    view = f"{INTERNAL_PREFIX}upsert_{uuid.uuid4().hex}"
    source.createOrReplaceTempView(view)
    try:
        spark.sql(merge_sql(table, quote(view), columns, keys, sequence))
    finally:
        spark.catalog.dropTempView(view)
