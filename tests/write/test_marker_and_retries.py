"""The commit marker's summary form, conflict detection and the retry loop — no JVM needed."""

from __future__ import annotations

import pytest

from kafka_iceberg.errors import CommitConflictError
from kafka_iceberg.write import CommitMarker, CommitResult
from kafka_iceberg.write.commit import RetryPolicy, merge_sql, run_with_retries
from kafka_iceberg.write.jvm import conflict_reason


def test_marker_round_trips_through_a_snapshot_summary():
    marker = CommitMarker(
        stream="sales.orders",
        batch_id=7,
        offsets={"orders": {1: 40, 0: 12}, "alpha": {0: 3}},
        error_offsets={"orders_errors": {0: 2}},
        extra={"run-id": "r1"},
    )
    summary = marker.summary("shop")
    assert summary == {
        "kafka-iceberg.pipeline": "shop",
        "kafka-iceberg.stream": "sales.orders",
        "kafka-iceberg.batch-id": "7",
        "kafka-iceberg.offsets": '{"alpha":{"0":3},"orders":{"0":12,"1":40}}',
        "kafka-iceberg.error-offsets": '{"orders_errors":{"0":2}}',
        "kafka-iceberg.run-id": "r1",
    }
    back = CommitMarker.from_summary({**summary, "added-records": "3"}, snapshot_id=99)
    assert back == CommitMarker(
        stream="sales.orders",
        batch_id=7,
        offsets={"orders": {0: 12, 1: 40}, "alpha": {0: 3}},
        error_offsets={"orders_errors": {0: 2}},
        extra={"run-id": "r1"},
        snapshot_id=99,
    )


def test_error_offsets_default_to_an_empty_object():
    assert CommitMarker(stream="s", batch_id=0, offsets={}).summary("p")["kafka-iceberg.error-offsets"] == "{}"


@pytest.mark.parametrize(
    "kwargs",
    [
        {"stream": "", "batch_id": 0, "offsets": {}},
        {"stream": "s", "batch_id": -1, "offsets": {}},
        {"stream": "s", "batch_id": True, "offsets": {}},
        {"stream": "s", "batch_id": 0, "offsets": {"t": {"0": 1}}},
        {"stream": "s", "batch_id": 0, "offsets": {}, "extra": {"batch-id": "9"}},
    ],
)
def test_malformed_markers_are_refused(kwargs):
    with pytest.raises(ValueError, match="CommitMarker"):
        CommitMarker(**kwargs)


def test_a_malformed_summary_is_reported():
    with pytest.raises(ValueError, match="malformed kafka-iceberg marker"):
        CommitMarker.from_summary({"kafka-iceberg.stream": "s", "kafka-iceberg.batch-id": "x"}, 1)


def test_commit_result_counts_come_from_the_summary():
    result = CommitResult.from_summary(
        table="c.n.t",
        marker=CommitMarker(stream="s", batch_id=3, offsets={}),
        snapshot_id=5,
        operation="overwrite",
        summary={
            "added-records": "10",
            "deleted-records": "4",
            "added-data-files": "2",
            "added-delete-files": "1",
            "added-files-size": "4096",
        },
        retries=2,
        latency_ms=12.5,
    )
    assert (result.records_written, result.records_deleted, result.files_added, result.bytes_added) == (10, 4, 3, 4096)
    assert (result.snapshot_id, result.retries, result.skipped) == (5, 2, False)


# -- conflicts and retries -----------------------------------------------------------------------
class FakeJava:
    """Stands in for a py4j Java exception object."""

    def __init__(self, name: str, message: str, cause: FakeJava | None = None):
        self.name, self.message, self.cause = name, message, cause

    def getClass(self):
        return self

    def getName(self):
        return self.name

    def getMessage(self):
        return self.message

    def getCause(self):
        return self.cause


class FakePy4JError(Exception):
    def __init__(self, java: FakeJava):
        super().__init__("An error occurred while calling o123.sql")
        self.java_exception = java


def conflict(message: str = "Cannot commit: metadata location changed") -> FakePy4JError:
    cause = FakeJava("org.apache.iceberg.exceptions.CommitFailedException", message)
    return FakePy4JError(FakeJava("org.apache.spark.SparkException", "Writing job aborted", cause))


def test_conflicts_are_recognised_through_the_cause_chain():
    assert conflict_reason(conflict("stale")) == "CommitFailedException: stale"
    validation = FakeJava(
        "org.apache.iceberg.exceptions.ValidationException",
        "Found conflicting files that can contain records matching true: [f.parquet]",
    )
    assert conflict_reason(FakePy4JError(validation)).startswith("ValidationException: Found conflicting files")
    unknown = FakeJava("org.apache.iceberg.exceptions.CommitStateUnknownException", "timeout")
    assert conflict_reason(FakePy4JError(unknown)) == "CommitStateUnknownException: timeout"


def test_other_errors_are_not_conflicts():
    schema = FakeJava("org.apache.iceberg.exceptions.ValidationException", "Cannot find field 'x' in struct")
    assert conflict_reason(FakePy4JError(schema)) is None
    assert conflict_reason(FakePy4JError(FakeJava("java.io.IOException", "disk full"))) is None
    assert conflict_reason(ValueError("plain python")) is None


def test_conflicts_in_plain_text_are_recognised_too():
    text = "py4j...\norg.apache.iceberg.exceptions.CommitFailedException: Commit failed: 409\n\tat ..."
    assert conflict_reason(RuntimeError(text)) == "CommitFailedException: Commit failed: 409"


def test_retries_back_off_exponentially_then_succeed():
    waits: list[float] = []
    calls: list[int] = []

    def attempt(n: int) -> str:
        calls.append(n)
        if n < 3:
            raise conflict()
        return "snapshot"

    value, retries = run_with_retries(attempt, RetryPolicy(4, 100, 60_000), table="c.n.t", sleep=waits.append)
    assert (value, retries, calls) == ("snapshot", 3, [0, 1, 2, 3])
    for got, base in zip(waits, [0.1, 0.2, 0.4], strict=True):
        assert base <= got <= base * 1.1  # 100 ms → 200 ms → 400 ms, up to 10 % jitter


def test_exhausted_retries_fail_loudly():
    waits: list[float] = []
    with pytest.raises(CommitConflictError) as err:
        run_with_retries(
            lambda n: (_ for _ in ()).throw(conflict("409 stale")),
            RetryPolicy(2, 50, 60),
            table="lake.sales.orders",
            sleep=waits.append,
        )
    message = str(err.value)
    assert "COMMIT FAILED" in message and "lake.sales.orders" in message and "after 2 retries" in message
    assert "409 stale" in message and "commit.retry.num-retries=2" in message
    assert len(waits) == 2 and waits[0] >= 0.05 and waits[1] <= 0.06 * 1.1  # capped by max-wait-ms


def test_other_errors_are_not_retried():
    with pytest.raises(KeyError):
        run_with_retries(lambda n: {}["x"], RetryPolicy(4, 1, 1), table="t", sleep=lambda s: None)


def test_the_upsert_merge_statement():
    sql = merge_sql("`c`.`n`.`t`", "`src`", ["id", "name", "offset"], ["id"], "offset")
    assert sql == (
        "MERGE INTO `c`.`n`.`t` t USING `src` s ON t.`id` = s.`id` "
        "WHEN MATCHED AND s.`_ki_tombstone` AND (t.`offset` IS NULL OR s.`offset` >= t.`offset`) THEN DELETE "
        "WHEN MATCHED AND NOT s.`_ki_tombstone` AND (t.`offset` IS NULL OR s.`offset` >= t.`offset`) "
        "THEN UPDATE SET t.`id` = s.`id`, t.`name` = s.`name`, t.`offset` = s.`offset` "
        "WHEN NOT MATCHED AND NOT s.`_ki_tombstone` THEN INSERT (`id`, `name`, `offset`) "
        "VALUES (s.`id`, s.`name`, s.`offset`)"
    )
