"""text and binary: modes, UTF-8 errors, null and empty messages, tombstones, headers."""

from __future__ import annotations

from typing import Any

import pytest

from kafka_iceberg.decode import TOMBSTONE_COLUMN, decode
from tests.decode.conftest import FLUSH, Msg, table

MESSAGES = [("k0", "v0"), (None, "v1"), ("k2", None), ("", ""), ("k4", "ü")]


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        ("default", [("k0", "v0"), (None, "v1"), ("k2", None), ("", ""), ("k4", "ü")]),
        ("value", [(None, "v0"), (None, "v1"), (None, None), (None, ""), (None, "ü")]),
        ("key", [("k0", None), (None, None), ("k2", None), ("", None), ("k4", None)]),
    ],
)
def test_text_modes(run: Any, mode: str, expected: list[tuple[str | None, str | None]]) -> None:
    result = run(table("text", source_mode=mode), MESSAGES)
    assert [(r["key"], r["value"]) for r in result.rows] == expected
    assert result.errors == []
    assert result.decoded.rows.columns == [
        "topic", "partition", "offset", "timestamp", "key", "value", "pt", TOMBSTONE_COLUMN,
    ]  # fmt: skip
    assert dict(result.decoded.rows.dtypes)["key"] == "string"


def test_text_mode_defaults_to_default(run: Any) -> None:
    result = run(table("text"), [("k", "v")])
    assert [(r["key"], r["value"]) for r in result.rows] == [("k", "v")]


def test_text_invalid_utf8_is_an_error_in_the_part_written(run: Any) -> None:
    bad = b"\xc3\x28"  # a lead byte without its continuation
    overlong = b"\xc0\xaf"  # an overlong '/'
    surrogate = b"\xed\xa0\x80"  # UTF-8 of a UTF-16 surrogate
    messages = [("ok", "fine"), ("k", bad), (bad, "v"), (bad, overlong), ("k", surrogate), ("k", "\ufffd is fine")]
    default = run(table("text"), messages)
    assert default.reasons() == {
        1: "invalid UTF-8 in value",
        2: "invalid UTF-8 in key",
        3: "invalid UTF-8 in key; invalid UTF-8 in value",
        4: "invalid UTF-8 in value",
    }
    assert [r["offset"] for r in default.rows] == [0, 5]
    assert default.by_offset()[5]["value"] == "\ufffd is fine"
    # the bytes the error row carries are the record's, unchanged; what could be read is kept
    error = {r["offset"]: r for r in default.errors}[1]
    assert bytes(error["value"]) == bad
    assert error["_decoded"] == '{"key":"k"}'

    value_only = run(table("text", source_mode="value"), messages)
    assert sorted(value_only.reasons()) == [1, 3, 4]  # a bad key is not read under mode value


def test_text_null_value_is_a_row_or_a_tombstone(run: Any) -> None:
    messages = [("k0", "v0"), ("k1", None)]
    append = run(table("text"), messages)
    assert [(r["key"], r["value"], r[TOMBSTONE_COLUMN]) for r in append.rows] == [
        ("k0", "v0", False),
        ("k1", None, False),
    ]
    upsert = run(table("text", commit_mode="upsert", key_fields=["key"]), messages)
    assert [(r["key"], r["value"], r[TOMBSTONE_COLUMN]) for r in upsert.rows] == [
        ("k0", "v0", False),
        ("k1", None, True),
    ]
    assert upsert.errors == []


def test_binary_keeps_bytes_as_sent(run: Any) -> None:
    messages = [(b"\x00\xff", b"\xc3\x28"), (None, b""), (b"k", None)]
    result = run(table("binary"), messages)
    assert [(r["key"], r["value"]) for r in result.rows] == [
        (bytearray(b"\x00\xff"), bytearray(b"\xc3\x28")),
        (None, bytearray(b"")),
        (bytearray(b"k"), None),
    ]
    assert result.errors == []
    assert dict(result.decoded.rows.dtypes)["value"] == "binary"
    keys = run(table("binary", source_mode="key"), messages)
    assert [r["value"] for r in keys.rows] == [None, None, None]


def test_headers_become_a_map_last_duplicate_wins(run: Any) -> None:
    messages = [
        Msg("k", "v", headers=[("a", "1"), ("b", None), ("a", "2")]),
        Msg("k", "v", headers=None),
        Msg("k", "v", headers=[]),
        Msg("k", b"\xff", headers=[("x", "y"), ("x", "z")]),
    ]
    result = run(table("text", source_include_headers=True), messages)
    assert dict(result.decoded.rows.dtypes)["headers"] == "map<string,binary>"
    assert result.decoded.rows.columns[-2:] == ["headers", TOMBSTONE_COLUMN]
    assert [r["headers"] for r in result.rows] == [{"a": bytearray(b"2"), "b": None}, None, {}]
    [error] = result.errors  # error rows keep the headers array exactly as it came
    assert [(h["key"], bytes(h["value"])) for h in error["headers"]] == [("x", b"y"), ("x", b"z")]
    assert "headers" not in run(table("text"), messages[:1]).decoded.rows.columns


def test_missing_headers_column_and_non_kafka_input(spark: Any, kafka_df: Any) -> None:
    df = kafka_df([("k", "v")]).drop("headers")
    decoded = decode(df, table("text", source_include_headers=True), flush_time=FLUSH)
    assert [r["headers"] for r in decoded.rows.collect()] == [None]
    with pytest.raises(ValueError, match=r"missing \['offset'\]"):
        decode(df.drop("offset"), table("text"), flush_time=FLUSH)
