"""Large messages, ANSI mode, and the plan shape that keeps each document parsed once."""

from __future__ import annotations

import json
from typing import Any

import pytest

from kafka_iceberg.decode import decode
from tests.decode.conftest import FLUSH, table

FIVE_MB = 5 * 1024 * 1024
FLAT = {"columns": {"id": "long", "name": "string", "amount": "decimal(10,2)"}}


@pytest.mark.parametrize("fmt", ["text", "json", "flatten", "csv"])
def test_five_megabyte_messages(run: Any, fmt: str) -> None:
    big = "x" * FIVE_MB
    good = {
        "text": big,
        "json": json.dumps({"id": 1, "name": big}),
        "flatten": json.dumps({"id": 1, "name": big}),
        "csv": f"1,{big},2.50",
    }[fmt]
    truncated = good[:-1] if fmt != "csv" else f"x,{big},2.50"
    spec = table(fmt, schema=FLAT if fmt in ("csv", "flatten") else None)
    result = run(spec, [("k", good), ("k", truncated)])
    if fmt == "text":
        assert [len(r["value"]) for r in result.rows] == [FIVE_MB, FIVE_MB - 1]
        return
    [row] = result.rows
    if fmt == "json":
        assert row["value"] == good
    else:
        assert (row["id"], len(row["name"])) == (1, FIVE_MB)
    [error] = result.errors
    assert bytes(error["value"]) == truncated.encode()  # the whole message, byte for byte
    assert error["_error"] in ("invalid JSON in value", 'field id: expected long, got "x"')


MIXED = {
    "csv": (table("csv", schema=FLAT), ["1,a,2.5", "x,a,1", "1,a,1.234", "1,a", ""]),
    "flatten": (
        table("flatten", schema=FLAT, schema_evolution="strict"),
        ['{"id":1,"amount":"2.5"}', '{"id":"x"}', '{"id":9223372036854775808}', '{"q":1}', "[]", "{"],
    ),
    "json": (table("json"), ['{"a":1}', "{", "", "1 2"]),
}


@pytest.mark.parametrize("fmt", sorted(MIXED))
def test_ansi_mode_changes_nothing(spark: Any, run: Any, fmt: str) -> None:
    spec, values = MIXED[fmt]
    messages = [("k", v) for v in [*values, None]]
    lenient = run(spec, messages)
    spark.conf.set("spark.sql.ansi.enabled", "true")
    try:
        ansi = run(spec, messages)
    finally:
        spark.conf.set("spark.sql.ansi.enabled", "false")
    assert ansi.rows == lenient.rows
    assert ansi.errors == lenient.errors
    assert len(lenient.errors) == len(values)  # every bad value is an error, the null value too


def test_rows_parse_each_document_once(kafka_df: Any) -> None:
    """Without the barrier in assemble, the ``_error IS NULL`` filter re-runs from_json."""
    spec = table("flatten", schema=FLAT, schema_evolution="strict")
    decoded = decode(kafka_df([("k", "{}")]), spec, flush_time=FLUSH)
    for df in (decoded.rows, decoded.errors):
        plan = df._jdf.queryExecution().optimizedPlan().toString()
        assert plan.count("from_json(ArrayType(MapType(StringType,StringType") == 1


def test_binary_errors_plan_reads_nothing(kafka_df: Any) -> None:
    decoded = decode(kafka_df([("k", b"\xff")]), table("binary"), flush_time=FLUSH)
    plan = decoded.errors._jdf.queryExecution().optimizedPlan().toString()
    assert "LocalRelation <empty>" in plan
    assert decoded.errors.count() == 0
