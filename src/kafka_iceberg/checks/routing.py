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
from kafka_iceberg.records import COORDINATES
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
                them in their one pass); counting again would join them to their bytes once more.

        Raises:
            RecordError: bad records with neither ``skip_error`` nor an error target.
        """
        n_errors = _count(errors) if errors is not None else 0
        n_quarantined = 0
        if quarantined is not None:
            n_quarantined = quarantined_count if quarantined_count is not None else _count(quarantined)
        policy = self.spec.errors
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
