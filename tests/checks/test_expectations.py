"""Each expectation action (warn, drop, quarantine, fail) is counted and does what it says."""

from __future__ import annotations

import pytest

from kafka_iceberg.checks import apply_expectations
from kafka_iceberg.errors import ExpectationFailedError
from kafka_iceberg.spec.model import Expectation
from tests.support.frames import kafka_frame


@pytest.fixture
def batch(spark):
    raw = kafka_frame(spark, [(0, i, f"k{i}", f"v{i}", [("h", b"x")]) for i in range(6)])
    decoded = spark.createDataFrame(
        [("t", 0, i, i - 1, f"n{i}" if i != 3 else None, False) for i in range(6)],
        "topic STRING, partition INT, offset BIGINT, id BIGINT, name STRING, _ki_tombstone BOOLEAN",
    )
    return raw, decoded


def run(decoded, raw, rules):
    return apply_expectations(decoded, raw, rules, payload_columns=["id", "name"], persist=lambda df: df.cache())


def test_warn_keeps_rows_and_counts(batch):
    raw, decoded = batch
    kept, errors, report = run(decoded, raw, {"positive": Expectation(expr="id > 0", on_violation="warn")})
    assert kept.count() == 6 and errors is None
    assert report.passed == {"positive": 4} and report.failed == {"positive": 2} and report.warned == 2


def test_drop_removes_rows_and_null_results_count_as_violations(batch):
    raw, decoded = batch
    kept, errors, report = run(decoded, raw, {"named": Expectation(expr="name <> ''", on_violation="drop")})
    assert sorted(r.offset for r in kept.collect()) == [0, 1, 2, 4, 5]  # name NULL → expression NULL → dropped
    assert errors is None and report.dropped == 1 and report.failed == {"named": 1}


def test_quarantine_yields_error_rows_with_original_bytes(batch):
    raw, decoded = batch
    rules = {
        "positive": Expectation(expr="id > 0", on_violation="quarantine"),
        "small": Expectation(expr="id < 100", on_violation="drop"),
    }
    kept, errors, report = run(decoded, raw, rules)
    assert sorted(r.offset for r in kept.collect()) == [2, 3, 4, 5]
    got = sorted(errors.collect(), key=lambda r: r.offset)
    assert [r.offset for r in got] == [0, 1]
    assert got[0].key == b"k0" and got[0].value == b"v0" and got[0].headers[0].key == "h"
    assert got[0]._error == "expectation positive failed: id > 0"
    assert got[0]._error_stage == "expectation:positive"
    assert got[0]._decoded == '{"id":-1,"name":"n0"}'
    assert report.quarantined == 2 and report.dropped == 0


@pytest.mark.parametrize("few", [True, False], ids=["few-broadcast", "many-shuffled"])
def test_quarantined_rows_find_their_bytes_without_shuffling_the_batch_when_few(batch, spark, monkeypatch, few):
    """Counted first, up to FEW_FAILURES quarantined rows are broadcast to the join with their batch."""
    import kafka_iceberg.records as records

    raw, decoded = batch
    monkeypatch.setattr(records, "FEW_FAILURES", 2 if few else 1)  # this batch quarantines 2
    threshold = spark.conf.get("spark.sql.autoBroadcastJoinThreshold")
    spark.conf.set("spark.sql.autoBroadcastJoinThreshold", "-1")  # Spark's own size estimate stays out of it
    try:
        _, errors, report = run(decoded, raw, {"positive": Expectation(expr="id > 0", on_violation="quarantine")})
        got = sorted(errors.collect(), key=lambda r: r.offset)
        plan = errors._jdf.queryExecution().executedPlan().toString()
    finally:
        spark.conf.set("spark.sql.autoBroadcastJoinThreshold", threshold)
    assert report.quarantined == 2
    assert [(r.offset, r.key, r.value, r._error) for r in got] == [
        (0, b"k0", b"v0", "expectation positive failed: id > 0"),
        (1, b"k1", b"v1", "expectation positive failed: id > 0"),
    ]
    assert ("BroadcastHashJoin" in plan) is few
    assert ("SortMergeJoin" in plan) is not few


def test_fail_stops_the_batch_naming_the_first_record(batch):
    raw, decoded = batch
    with pytest.raises(
        ExpectationFailedError,
        match=r"'positive' \(id > 0\) failed for 2 record\(s\); first at topic t partition 0 offset 0",
    ):
        run(decoded, raw, {"positive": Expectation(expr="id > 0", on_violation="fail")})


def test_tombstones_are_exempt(spark):
    raw = kafka_frame(spark, [(0, 0, "k", None)])
    decoded = spark.createDataFrame(
        [("t", 0, 0, 7, None, True)],
        "topic STRING, partition INT, offset BIGINT, id BIGINT, name STRING, _ki_tombstone BOOLEAN",
    )
    kept, _, report = run(decoded, raw, {"named": Expectation(expr="name IS NOT NULL", on_violation="drop")})
    assert kept.count() == 1 and report.failed == {"named": 0}
