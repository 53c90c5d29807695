"""Where bad records go: MaxCompute's table, extended with a quarantine table.

| skip_error | error target (topic and/or quarantine table) | behaviour |
|---|---|---|
| false | none | the batch fails before anything commits; the first bad record is named |
| true  | none | bad records are dropped and counted |
| any   | set  | bad records go to the target(s); good records commit |

Records failing a ``quarantine`` expectation always go to the quarantine table only.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from kafka_iceberg.checks.error_topic import ErrorTopicPublisher
from kafka_iceberg.errors import RecordError
from kafka_iceberg.records import COORDINATES, ERROR_COLUMNS, FEW_FAILURE_BYTES, FEW_FAILURES, INTERNAL_PREFIX
from kafka_iceberg.spec.model import TableSpec

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, Row


class QuarantineTarget(Protocol):
    """Appends error rows to the quarantine table, exactly once per batch."""

    def append(self, errors: DataFrame | list[Row], batch_id: int) -> int:
        """Append and return how many rows were written (0 when the batch was already there)."""


@dataclass(frozen=True)
class RoutingResult:
    """What happened to the bad records of one batch."""

    failed: int = 0
    skipped: int = 0
    published: int = 0
    quarantined: int = 0
    error_offsets: dict[int, int] | None = None


@dataclass
class ErrorRouter:
    """Applies a table's error policy to the bad records of each batch."""

    spec: TableSpec
    publisher: ErrorTopicPublisher | None = None
    quarantine: QuarantineTarget | None = None

    def route(
        self,
        errors: DataFrame | list[Row] | None,
        quarantined: DataFrame | list[Row] | None,
        *,
        batch_id: int,
        quarantined_count: int | None = None,
    ) -> RoutingResult:
        """Route one batch's bad records.

        Args:
            errors: records that failed decoding, schema or write checks (error-row shape), as a
                DataFrame or as rows already on the driver (the single pass brings them back with
                its files): those are counted, ordered and published without a Spark job.
            quarantined: records that failed a ``quarantine`` expectation (the same).
            batch_id: the batch, for the quarantine table's idempotency marker.
            quarantined_count: rows of ``quarantined`` when already known (the expectations count
                them in their one pass). Zero means none: the frame is not looked at. Otherwise
                frames are counted again with the errors, in the one aggregation that also
                measures their bytes (:func:`_few_on_driver`).

        Raises:
            RecordError: bad records with neither ``skip_error`` nor an error target.
        """
        policy = self.spec.errors
        if quarantined_count == 0:
            quarantined = None
        if isinstance(errors, list) or isinstance(quarantined, list) or (errors is None and quarantined is None):
            n_errors = _count(errors) if errors is not None else 0
            n_quarantined = _count(quarantined) if quarantined is not None else 0
        else:
            errors, quarantined, n_errors, n_quarantined = _few_on_driver(
                errors, quarantined, errors_routed=policy.has_target
            )
        if n_errors and not policy.has_target and not policy.skip_error:
            assert errors is not None
            raise _first_error(errors, n_errors)
        published, offsets, to_quarantine = 0, None, []
        if n_errors and policy.has_target:
            assert errors is not None
            if self.publisher is not None:
                published, offsets = self.publisher.publish(_in_order(errors))
            if self.quarantine is not None:
                to_quarantine.append(errors)
        if n_quarantined and quarantined is not None:
            to_quarantine.append(quarantined)
        written = 0
        if to_quarantine and self.quarantine is not None:
            written = self.quarantine.append(self._together(to_quarantine), batch_id)
        skipped = n_errors if (n_errors and not policy.has_target) else 0
        return RoutingResult(
            failed=n_errors + n_quarantined,
            skipped=skipped,
            published=published,
            quarantined=written,
            error_offsets=offsets,
        )

    @staticmethod
    def _together(parts: list[DataFrame | list[Row]]) -> DataFrame | list[Row]:
        """One input for the quarantine table: rows on the driver stay there, DataFrames are unioned.

        A batch's errors and quarantined records come the same way: both on the driver (the single
        pass) or both as DataFrames (step by step).
        """
        on_driver = [p for p in parts if isinstance(p, list)]
        frames = [p for p in parts if not isinstance(p, list)]
        if not frames:
            return [r for p in on_driver for r in p]
        assert not on_driver, "a batch's bad records come all on the driver or all as DataFrames"
        frame = frames[0]
        for other in frames[1:]:
            frame = frame.unionByName(other)
        return frame


def _count(rows: DataFrame | list[Row]) -> int:
    return len(rows) if isinstance(rows, list) else rows.count()


def _few_on_driver(
    errors: DataFrame | None, quarantined: DataFrame | None, *, errors_routed: bool
) -> tuple[DataFrame | list[Row] | None, DataFrame | list[Row] | None, int, int]:
    """Both frames counted in one Spark job; when few, the ones routed brought to the driver in one more.

    On the driver they are published in order and quarantined without a Spark job each (a sort and
    a job per partition to publish; a count, a write and Spark's commit to quarantine): the
    quarantine append of a flatten upsert took 0.7 s a batch (benchmarks/fixes.md, stop 52). Few is
    up to :data:`~kafka_iceberg.records.FEW_FAILURES` rows and
    :data:`~kafka_iceberg.records.FEW_FAILURE_BYTES` of keys, values, reasons and decoded JSON:
    large messages stay in Spark. ``errors_routed``: whether an error target takes the errors
    (else they are only counted, or the first one named).

    Returns:
        errors and quarantined (rows on the driver, or the frames as given), and their counts.
    """
    from pyspark.sql import Row
    from pyspark.sql import functions as F

    tag = f"{INTERNAL_PREFIX}routed"
    parts = [f.withColumn(tag, F.lit(i)) for i, f in enumerate((errors, quarantined)) if f is not None]
    tagged = parts[0] if len(parts) == 1 else parts[0].unionByName(parts[1])
    # Cached for the collect: the records' bytes come from joins with the batch, run once.
    tagged = tagged.persist()
    try:
        lengths = [F.coalesce(F.octet_length(c), F.lit(0)) for c in ("key", "value", "_error", "_decoded")]
        size = lengths[0] + lengths[1] + lengths[2] + lengths[3]
        sizes = tagged.groupBy(tag).agg(F.count(F.lit(1)).alias("n"), F.sum(size).alias("bytes")).collect()
        counts = {r[tag]: (int(r["n"]), int(r["bytes"] or 0)) for r in sizes}
        n_errors, n_quarantined = (counts.get(i, (0, 0))[0] for i in (0, 1))
        routed = [i for i, n in ((0, n_errors if errors_routed else 0), (1, n_quarantined)) if n]
        few = n_errors + n_quarantined <= FEW_FAILURES
        if not routed or not few or sum(counts[i][1] for i in routed) > FEW_FAILURE_BYTES:
            return errors, quarantined, n_errors, n_quarantined
        wanted = tagged if len(routed) == 2 else tagged.where(F.col(tag) == routed[0])
        rows = wanted.collect()
    finally:
        tagged.unpersist()
    on_driver = [[Row(**{c: r[c] for c in ERROR_COLUMNS}) for r in rows if r[tag] == i] for i in (0, 1)]
    return (
        on_driver[0] if 0 in routed else errors,
        on_driver[1] if 1 in routed else None,
        n_errors,
        n_quarantined,
    )


def _coordinates(row: Row) -> tuple[str, int, int]:
    return row["topic"], row["partition"], row["offset"]


def _in_order(rows: DataFrame | list[Row]) -> Iterator[Any]:
    """The rows by source coordinates: the order the error topic receives them in."""
    if isinstance(rows, list):
        return iter(sorted(rows, key=_coordinates))
    return rows.orderBy(*COORDINATES).toLocalIterator()


def _first_error(errors: DataFrame | list[Row], count: int) -> RecordError:
    first = min(errors, key=_coordinates) if isinstance(errors, list) else errors.orderBy(*COORDINATES).first()
    assert first is not None  # called with count > 0
    more = f" (and {count - 1} more bad record(s) in this batch)" if count > 1 else ""
    return RecordError(
        f"bad record at topic {first['topic']} partition {first['partition']} offset {first['offset']}: "
        f"{first['_error_stage']}: {first['_error']}{more}. Nothing of this batch was committed; set "
        "errors.skip_error, errors.error_topic or errors.quarantine_table to keep going.",
        topic=first["topic"],
        partition=int(first["partition"]),
        offset=int(first["offset"]),
        stage=first["_error_stage"],
        reason=first["_error"],
    )
