"""The single pass's sorting of records inside the writing task (checks/labels.py), without Spark.

The precedence must be the step-by-step path's: decode error, then a violated ``fail`` rule (the
batch fails), ``quarantine``, ``drop``, write rejection, written; ``warn`` is only counted.
"""

from __future__ import annotations

import datetime as dt

import pyarrow as pa

from kafka_iceberg.checks.labels import REJECT, ROW_JSON, Labels, merged_stats, sort_batch
from kafka_iceberg.decode.plan import ERROR_FIELDS, ERROR_TEXT, FAILED, HEADERS, KEY, VALUE
from kafka_iceberg.records import ERROR_COLUMNS

RULES = (
    ("warned", "amount < 10", "warn"),
    ("positive", "amount >= 0", "quarantine"),
    ("nonzero", "amount <> 0", "drop"),
)
AT = dt.datetime(2026, 1, 5, tzinfo=dt.timezone.utc)


def batch(records: list[dict]) -> pa.RecordBatch:
    """A batch as check_columns shapes it: the row's columns, then the flags and error columns."""
    n = len(records)

    def col(name, default=None):
        return [r.get(name, default) for r in records]

    return pa.RecordBatch.from_pydict(
        {
            "topic": ["t"] * n,
            "partition": pa.array([0] * n, pa.int32()),
            "offset": pa.array(list(range(n)), pa.int64()),
            "timestamp": pa.array([AT] * n, pa.timestamp("us", tz="UTC")),
            "amount": pa.array(col("amount"), pa.float64()),
            FAILED: col("failed", False),
            "_ki_exp_0": col("warned", True),
            "_ki_exp_1": col("positive", True),
            "_ki_exp_2": col("nonzero", True),
            REJECT: pa.array(col("reject"), pa.string()),
            ROW_JSON: pa.array(col("row_json"), pa.string()),
            KEY: pa.array(col("key"), pa.binary()),
            VALUE: pa.array(col("value"), pa.binary()),
            HEADERS: pa.array([None] * n, pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))),
            ERROR_TEXT: pa.array(col("error"), pa.string()),
            ERROR_FIELDS: pa.array(col("decoded"), pa.string()),
        }
    )


def test_each_record_lands_in_exactly_one_place_with_the_step_by_step_precedence():
    records = [
        {"amount": 12.0, "warned": False},  # 0: only warned about: written
        {"failed": True, "value": b"{", "error": "invalid JSON in value", "positive": False},  # 1: decode error wins
        {"amount": -1.0, "positive": False, "nonzero": True, "value": b"-1", "row_json": '{"amount":-1.0}'},  # 2
        {"amount": 0.0, "nonzero": False, "reject": "column id is required (NOT NULL) but is null"},  # 3: dropped
        {"amount": -0.0, "positive": False, "nonzero": False, "value": b"-0", "row_json": "{}"},  # 4: quarantine wins
        {"amount": 5.0, "reject": "column id is required (NOT NULL) but is null", "value": b"5", "row_json": "{}"},
        {"amount": 7.0},  # 6: written
    ]
    out = sort_batch(batch(records), Labels(rules=RULES, carry=("topic", "partition", "offset", "amount")))

    assert out.rows.column_names == ["topic", "partition", "offset", "amount"]
    assert out.rows.column("offset").to_pylist() == [0, 6]
    assert [(e["offset"], e["_error_stage"], e["_error"]) for e in out.errors] == [
        (1, "decode", "invalid JSON in value"),
        (5, "write", "column id is required (NOT NULL) but is null"),
    ]
    assert all(list(e) == list(ERROR_COLUMNS) for e in out.errors + out.quarantined)
    assert out.errors[0]["value"] == b"{"
    assert [(q["offset"], q["_error_stage"], q["_error"], q["_decoded"]) for q in out.quarantined] == [
        (2, "expectation:positive", "expectation positive failed: amount >= 0", '{"amount":-1.0}'),
        (4, "expectation:positive", "expectation positive failed: amount >= 0", "{}"),
    ]
    # Counted over the decoded records, as apply_expectations counts: a decode error violates nothing.
    assert out.stats == {
        "in": 7,
        "offsets": {"t": {0: 7}},  # the next offset of each partition: the commit's, found in this pass
        "decoded": 6,
        "violations": [1, 2, 2],
        "first": [None, None, None],
        "quarantined": 2,
        "dropped": 1,
    }


def test_a_fail_rule_reports_its_first_violation_across_tasks():
    rules = (("positive", "amount > 0", "fail"),)
    first = sort_batch(batch([{"amount": 1.0}, {"amount": -2.0, "warned": False}]), Labels(rules=rules))
    # check_columns' flags for one rule are _ki_exp_0: the "warned" column of the helper above.
    assert first.stats["violations"] == [1] and first.stats["first"] == [["t", 0, 1]]
    other = {**first.stats, "first": [["t", 0, 0]]}
    assert merged_stats([first.stats, other], 1)["first"] == [["t", 0, 0]]
    assert merged_stats([first.stats, other], 1)["violations"] == [2]
    later = {**first.stats, "offsets": {"t": {"0": 9, "1": 4}}}  # as JSON brings it back from a task
    assert merged_stats([first.stats, later], 1)["offsets"] == {"t": {0: 9, 1: 4}}
