"""json: the document as sent in a STRING column; anything but exactly one JSON value is an error."""

from __future__ import annotations

from typing import Any

from kafka_iceberg.decode import TOMBSTONE_COLUMN
from tests.decode.conftest import table

AFTER_END = "invalid JSON in value: unexpected content after the end of the document"


def test_json_value_as_sent_and_every_invalid_form(run: Any) -> None:
    messages = [
        ("k", '{"id":1, "a" : [1,2]}'),
        ("k", "[1,2]"),
        ("k", "123"),
        ("k", '"str"'),
        ("k", "null"),
        ("k", '  {"a":1}  '),
        ("k", '{"a":1} x'),
        ("k", "{'a':1}"),
        ("k", '{"a":NaN}'),
        ("k", ""),
        ("k", b'{"a":"\xc3\x28"}'),
        ("k", None),
        ("k", '{"a":1}{"b":2}'),
        ("k", '{"a":'),
        ("k", "1] [2"),
        ("k", "   "),
        ("k", '{"a":1}]'),
    ]
    result = run(table("json"), messages)
    assert [(r["offset"], r["key"], r["value"]) for r in result.rows] == [
        (0, None, '{"id":1, "a" : [1,2]}'),
        (1, None, "[1,2]"),
        (2, None, "123"),
        (3, None, '"str"'),
        (4, None, "null"),
        (5, None, '  {"a":1}  '),
    ]
    assert result.reasons() == {
        6: AFTER_END,
        7: "invalid JSON in value",
        8: "invalid JSON in value",
        9: "empty value (0 bytes)",
        10: "invalid UTF-8 in value",
        11: "null value (tombstone) but commit_mode is append, not upsert",
        12: AFTER_END,
        13: "invalid JSON in value",
        14: "invalid JSON in value",
        15: "invalid JSON in value",
        16: AFTER_END,
    }
    assert all(bytes(r["key"]) == b"k" for r in result.errors)
    assert {r["_error_stage"] for r in result.errors} == {"decode"}


def test_json_mode_key_reads_the_key(run: Any) -> None:
    messages = [('{"id":1}', "not json"), (None, "x"), ("nope", "{}"), ('{"a":2}', None)]
    result = run(table("json", source_mode="key"), messages)
    assert [(r["offset"], r["key"], r["value"]) for r in result.rows] == [
        (0, '{"id":1}', None),
        (1, None, None),  # a null key is a NULL key column
        (3, '{"a":2}', None),  # the value is not read, so a null one is no tombstone
    ]
    assert result.reasons() == {2: "invalid JSON in key"}


def test_json_tombstone_under_upsert(run: Any) -> None:
    spec = table("json", commit_mode="upsert", key_fields=["key"])
    result = run(spec, [("k1", '{"a":1}'), ("k2", None), (None, None)])
    assert [(r["key"], r["value"], r[TOMBSTONE_COLUMN]) for r in result.rows] == [
        (None, '{"a":1}', False),  # mode value: the key column is NULL on normal rows
        ("k2", None, True),
    ]
    assert result.reasons() == {2: "null value (tombstone) with a null key: cannot read key field(s) key"}
