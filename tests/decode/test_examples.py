"""PRODUCT.md's worked examples (from the MaxCompute seed), with exact expected rows."""

from __future__ import annotations

from typing import Any

from chispa import assert_df_equality

from kafka_iceberg.decode import ERROR_COLUMNS
from tests.decode.conftest import KAFKA_TS, Msg, table

COORDS = "topic STRING, partition INT, offset BIGINT, timestamp TIMESTAMP"
PT = "07-13-2023 21:13"  # the flush time at minute granularity, as in the seed


def test_text_mode_value_writes_null_key(spark: Any, run: Any) -> None:
    spec = table("text", source_mode="value", partition_window="minute")
    messages = [Msg("123", "abc", topic="topic_text"), Msg("456", "edf", topic="topic_text")]
    result = run(spec, messages)
    expected = spark.createDataFrame(
        [
            ("topic_text", 0, 0, KAFKA_TS, None, "abc", PT, False),
            ("topic_text", 0, 1, KAFKA_TS, None, "edf", PT, False),
        ],
        f"{COORDS}, key STRING, value STRING, pt STRING, _ki_tombstone BOOLEAN",
    )
    assert_df_equality(result.decoded.rows, expected, ignore_nullable=True, ignore_row_order=True)
    assert result.errors == []


def test_csv_columns_typed_left_to_right(spark: Any, run: Any) -> None:
    spec = table(
        "csv",
        source_mode="value",
        partition_window="minute",
        schema={"columns": {"id": "BIGINT", "name": "STRING", "region": "STRING"}},
    )
    result = run(spec, [("123", "1103,zhangsan,china"), ("456", "1104,lisi,usa")])
    expected = spark.createDataFrame(
        [
            ("t", 0, 0, KAFKA_TS, 1103, "zhangsan", "china", PT, False),
            ("t", 0, 1, KAFKA_TS, 1104, "lisi", "usa", PT, False),
        ],
        f"{COORDS}, id BIGINT, name STRING, region STRING, pt STRING, _ki_tombstone BOOLEAN",
    )
    assert_df_equality(result.decoded.rows, expected, ignore_nullable=True, ignore_row_order=True)
    assert result.errors == []


def test_flatten_nested_object_becomes_json_string(spark: Any, run: Any) -> None:
    spec = table(
        "flatten",
        source_mode="value",
        partition_window="minute",
        schema={"columns": {"id": "BIGINT", "name": "STRING", "extendinfo": "STRING"}},
    )
    value = '{"id":123,"name":"json-1","extendinfo":{"region":"beijing","sex":"M"}}'
    result = run(spec, [("123", value)])
    expected = spark.createDataFrame(
        [("t", 0, 0, KAFKA_TS, 123, "json-1", '{"region":"beijing","sex":"M"}', PT, False)],
        f"{COORDS}, id BIGINT, name STRING, extendinfo STRING, pt STRING, _ki_tombstone BOOLEAN",
    )
    assert_df_equality(result.decoded.rows, expected, ignore_nullable=True)
    assert result.decoded.new_columns == {}


def test_flatten_strict_sends_mismatch_to_errors_byte_for_byte(spark: Any, run: Any) -> None:
    spec = table(
        "flatten",
        source_mode="value",
        partition_window="minute",
        schema={"columns": {"id": "BIGINT", "name": "STRING", "extendinfo": "STRING"}},
        schema_evolution="strict",
    )
    bad_key, bad_value = b"101", b'{"id":101,"name":"json-4","extendinfos":"null"}'
    messages = [
        Msg("100", '{"id":100,"name":"json-3","extendinfo":{"region":"beijing","gender":"M"}}', topic="topic_abnormal"),
        Msg(bad_key, bad_value, topic="topic_abnormal"),
        Msg("102", '{"id":102,"name":"json-5","extendinfo":{"region":"beijing","gender":"M"}}', topic="topic_abnormal"),
    ]
    result = run(spec, messages)
    nested = '{"region":"beijing","gender":"M"}'
    expected = spark.createDataFrame(
        [
            ("topic_abnormal", 0, 0, KAFKA_TS, 100, "json-3", nested, PT, False),
            ("topic_abnormal", 0, 2, KAFKA_TS, 102, "json-5", nested, PT, False),
        ],
        f"{COORDS}, id BIGINT, name STRING, extendinfo STRING, pt STRING, _ki_tombstone BOOLEAN",
    )
    assert_df_equality(result.decoded.rows, expected, ignore_nullable=True, ignore_row_order=True)

    assert result.decoded.errors.columns == list(ERROR_COLUMNS)
    [error] = result.errors
    assert (error["topic"], error["partition"], error["offset"]) == ("topic_abnormal", 0, 1)
    assert bytes(error["key"]) == bad_key
    assert bytes(error["value"]) == bad_value
    assert error["headers"] is None
    assert error["_error"] == "unknown field extendinfos (schema_evolution is strict)"
    assert error["_error_stage"] == "decode"
    assert error["_decoded"] == '{"id":101,"name":"json-4"}'
