"""csv: configured columns typed left to right; wrong field counts and unparsable values are errors."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

from tests.decode.conftest import table

COLUMNS = {"id": "long", "name": "string", "amount": "decimal(10,2)", "active": "boolean"}


def test_csv_values_quotes_nulls_and_errors(run: Any) -> None:
    messages = [
        ("k", "1,alice,10.50,true"),
        ("k", '2,"smith, bob",0.1,FALSE'),
        ("k", '3,"say ""hi""",1,true'),
        ("k", "4,,2,true"),
        ("k", '5,"",2,true'),
        ("k", " 6 ,x,3,true"),
        ("k", "1,2,3"),
        ("k", "1,a,2,true,extra"),
        ("k", "abc,a,2,true"),
        ("k", "7,a,1.234,true"),
        ("k", "8,a,2,yes"),
        ("k", "x,a,y,true"),
        ("k", ""),
        ("k", b"9,\xc3\x28,1,true"),
        ("k", '10,"open,1,true'),
        ("k", "," * 80),
        ("k", "99999999999999999999,a,1,true"),
        ("k", "11,a,1e2,true"),
        ("k", None),
        ("k", "12,a,1.500,true"),
    ]
    result = run(table("csv", schema={"columns": COLUMNS}), messages)
    assert [(r["offset"], r["id"], r["name"], r["amount"], r["active"]) for r in result.rows] == [
        (0, 1, "alice", Decimal("10.50"), True),
        (1, 2, "smith, bob", Decimal("0.10"), False),
        (2, 3, 'say "hi"', Decimal("1.00"), True),
        (3, 4, None, Decimal("2.00"), True),  # empty unquoted field: NULL
        (4, 5, "", Decimal("2.00"), True),  # quoted empty field: empty string
        (5, 6, "x", Decimal("3.00"), True),
        (17, 11, "a", Decimal("100.00"), True),
        (19, 12, "a", Decimal("1.50"), True),  # trailing zeros are no loss
    ]
    assert result.reasons() == {
        6: "expected 4 CSV columns, got 3",
        7: "expected 4 CSV columns, got 5",
        8: 'field id: expected long, got "abc"',
        9: 'field amount: expected decimal(10,2), got "1.234"',
        10: 'field active: expected boolean, got "yes"',
        11: 'field id: expected long, got "x"; field amount: expected decimal(10,2), got "y"',
        12: "empty value (0 bytes)",
        13: "invalid UTF-8 in value",
        14: "unterminated quoted field in CSV value",
        15: "expected 4 CSV columns, got more than 68",
        16: 'field id: expected long, got "99999999999999999999"',
        18: "null value (tombstone) but commit_mode is append, not upsert",
    }
    decoded = {r["offset"]: r["_decoded"] for r in result.errors}
    assert decoded[8] == '{"name":"a","amount":2.00,"active":true}'  # the fields that could be read
    assert decoded[6] is None


def test_csv_layout_delimiter_quote_null_value_and_column_order(run: Any) -> None:
    spec = table(
        "csv",
        schema={"columns": {"id": "long", "name": "string", "region": "string"}},
        source_csv={"columns": ["name", "id"], "delimiter": "|", "quote": "'", "null_value": "\\N"},
    )
    messages = [("k", "alice|1"), ("k", "'a|b'|2"), ("k", "\\N|3"), ("k", "|4"), ("k", "x|y|z"), ("k", "a,b|5")]
    result = run(spec, messages)
    assert result.decoded.rows.columns[4:7] == ["id", "name", "region"]  # table order, not CSV order
    assert [(r["id"], r["name"], r["region"]) for r in result.rows] == [
        (1, "alice", None),
        (2, "a|b", None),
        (3, None, None),
        (4, None, None),
        (5, "a,b", None),
    ]
    assert result.reasons() == {4: "expected 2 CSV columns, got 3"}


def test_csv_mode_key(run: Any) -> None:
    spec = table("csv", source_mode="key", schema={"columns": {"id": "long", "name": "string"}})
    result = run(spec, [("1,a", "ignored"), (None, "x"), ("2", None)])
    assert [(r["id"], r["name"]) for r in result.rows] == [(1, "a")]
    assert result.reasons() == {
        1: "null key: mode key decodes the message key, which is null",
        2: "expected 2 CSV columns, got 1",
    }


def test_every_column_type_converts_strictly(run: Any) -> None:
    columns = {
        "i": "int",
        "f": "float",
        "d": "double",
        "day": "date",
        "ts": "timestamp",
        "ntz": "timestamp_ntz",
        "b": "binary",
        "dec": "decimal(5,2)",
    }
    good = "7,1.5,-2.5e3,2024-02-29,2024-01-02T03:04:05+02:00,2024-01-02 03:04:05,aGk=,123.45"
    messages = [
        ("k", good),
        ("k", "2147483648,1.5,1,2024-01-01,2024-01-01,2024-01-01,,1"),
        ("k", "1,1e39,1,2024-01-01,2024-01-01,2024-01-01,,1"),
        ("k", "1,1,1e999,2024-01-01,2024-01-01,2024-01-01,,1"),
        ("k", "1,1,1,2024-02-30,2024-01-01,2024-01-01,,1"),
        ("k", "1,1,1,2024-01-01T10:00,2024-01-01,2024-01-01,,1"),
        ("k", "1,1,1,2024-01-01,10:00,2024-01-01,,1"),
        ("k", "1,1,1,2024-01-01,2024-01-01,yesterday,,1"),
        ("k", "1,1,1,2024-01-01,2024-01-01,2024-01-01,a$$b,1"),
        ("k", "1,1,1,2024-01-01,2024-01-01,2024-01-01,,1234"),
        ("k", "1,NaN,-Infinity,2024-01-01,2024-01-01,2024-01-01,,1"),
    ]
    result = run(table("csv", schema={"columns": columns}), messages)
    rows = result.by_offset()
    first = rows[0]
    assert (first["i"], first["f"], first["d"], first["day"]) == (7, 1.5, -2500.0, dt.date(2024, 2, 29))
    assert first["ts"] == dt.datetime(2024, 1, 2, 1, 4, 5)  # UTC session time zone
    assert first["ntz"] == dt.datetime(2024, 1, 2, 3, 4, 5)
    assert (bytes(first["b"]), first["dec"]) == (b"hi", Decimal("123.45"))
    assert rows[10]["d"] == float("-inf")  # an infinity spelled out is a value, not an overflow
    assert result.reasons() == {
        1: 'field i: expected int, got "2147483648"',
        2: 'field f: expected float, got "1e39"',
        3: 'field d: expected double, got "1e999"',
        4: 'field day: expected date, got "2024-02-30"',
        5: 'field day: expected date, got "2024-01-01T10:00"',
        6: 'field ts: expected timestamp, got "10:00"',
        7: 'field ntz: expected timestamp_ntz, got "yesterday"',
        8: 'field b: expected binary, got "a$$b"',
        9: 'field dec: expected decimal(5,2), got "1234"',
    }
