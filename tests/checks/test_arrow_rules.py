"""Expectations evaluated by pyarrow (checks/arrow_rules.py) agree with Spark's, record for record."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from kafka_iceberg.checks.arrow_rules import holds, translate

# Certified rows' column types: what the Arrow decoder parses natively, Kafka's columns and pt.
COLUMNS = {"n": "bigint", "i": "int", "d": "double", "s": "string", "b": "boolean", "Mixed": "string"}
ROWS: list[dict[str, Any]] = [
    {"n": 0, "i": 0, "d": 0.0, "s": "", "b": False, "Mixed": "a"},
    {"n": -5, "i": -1, "d": -0.5, "s": "a", "b": True, "Mixed": "B"},
    {"n": 5, "i": 7, "d": 1.5, "s": "é", "b": None, "Mixed": None},
    {"n": None, "i": None, "d": None, "s": None, "b": None, "Mixed": "x"},
    {"n": 2**62, "i": 2**31 - 1, "d": 1e300, "s": "b", "b": True, "Mixed": "a"},
    {"n": -(2**63), "i": -(2**31), "d": -1e-300, "s": "ab", "b": False, "Mixed": ""},
]
TRANSLATED = [
    "n >= 0",
    "n > -5 AND n < 5",
    "n <> 0",
    "n != 5",
    "n = 5 OR d = 1.5",
    "d >= 0",
    "d > 0.25",
    "d <= 1e3",
    "i >= 1.5e0",
    "n BETWEEN -5 AND 5",
    "NOT (n = 0)",
    "n IS NULL",
    "s IS NOT NULL AND s <> ''",
    "s = 'a'",
    "s < 'b'",
    "s >= 'ab'",
    "b",
    "NOT b",
    "b = true",
    "b <=> true OR n <=> 5",
    "n <=> 5",
    "n IN (0, 5, 7)",
    "s IN ('a', 'é')",
    "d IN (0, 1.5)",
    "n = i",
    "d > n",
    "mixed = 'a'",
    "`Mixed` = 'B' OR n > 0",
    "n > 0 OR true",
    "n > 0 AND false",
]
REFUSED = [
    "n + 1 > 0",  # arithmetic: overflow and ANSI rules are Spark's
    "abs(n) > 0",  # functions
    "n > 0.5",  # an integer column against a decimal: Spark compares exactly
    "i >= 1.5",
    "s = 5",  # Spark casts across types
    "n IN (1, 1.5)",
    "CAST(s AS INT) > 0",
    "unknown > 0",
    "n",  # not a boolean
    "1 = 1",  # no column
    "NULL IS NULL",
    "s LIKE 'a%'",
    "n >",  # not SQL: Spark's path reports it
]


@pytest.fixture(scope="module")
def frame(spark):
    from pyspark.sql.types import StructType, _parse_datatype_string

    schema = StructType([])
    for name, col_type in COLUMNS.items():
        schema = schema.add(name, _parse_datatype_string(col_type))
    return spark.createDataFrame([tuple(r[c] for c in COLUMNS) for r in ROWS], schema)


def _arrow() -> dict[str, pa.Array]:
    types = {"bigint": pa.int64(), "int": pa.int32(), "double": pa.float64(), "string": pa.string()}
    types["boolean"] = pa.bool_()
    return {name: pa.array([r[name] for r in ROWS], types[t]) for name, t in COLUMNS.items()}


@pytest.mark.parametrize("sql", TRANSLATED)
def test_a_translated_rule_holds_exactly_where_spark_says_it_does(spark, frame, sql):
    rule = translate(spark, sql, COLUMNS)
    assert rule is not None, sql
    from pyspark.sql import functions as F

    expected = [r[0] for r in frame.select(F.coalesce(F.expr(sql), F.lit(False))).collect()]
    assert holds(rule, _arrow(), len(ROWS)).tolist() == expected


@pytest.mark.parametrize("sql", REFUSED)
def test_a_rule_outside_the_subset_is_left_to_spark(spark, sql):
    assert translate(spark, sql, COLUMNS) is None
