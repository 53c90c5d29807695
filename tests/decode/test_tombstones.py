"""Null values: tombstones under upsert with key fields read from the Kafka key, errors otherwise."""

from __future__ import annotations

from typing import Any

from kafka_iceberg.decode import TOMBSTONE_COLUMN
from tests.decode.conftest import table

SCHEMA = {"columns": {"id": "long", "region": "string", "name": "string"}}


def test_single_key_field_from_scalar_or_object_key(run: Any) -> None:
    spec = table("flatten", schema=SCHEMA, commit_mode="upsert", key_fields=["id"])
    messages = [
        ("7", None),
        ('{"id":8,"other":1}', None),
        ('"9"', None),
        (" 10 ", None),
        ("abc", None),
        (None, None),
        (b"\xff", None),
        ('{"other":1}', None),
        ("11", '{"id":11,"name":"n"}'),
        ("", None),
    ]
    result = run(spec, messages)
    assert [(r["offset"], r["id"], r["region"], r["name"], r[TOMBSTONE_COLUMN]) for r in result.rows] == [
        (0, 7, None, None, True),
        (1, 8, None, None, True),
        (2, 9, None, None, True),
        (3, 10, None, None, True),
        (8, 11, None, "n", False),
    ]
    assert result.reasons() == {
        4: 'tombstone key field id: expected long, got "abc"',
        5: "null value (tombstone) with a null key: cannot read key field(s) id",
        6: "null value (tombstone) with invalid UTF-8 in key",
        7: "null value (tombstone): key has no field id",
        9: 'tombstone key field id: expected long, got ""',
    }


def test_composite_key_needs_a_json_object(run: Any) -> None:
    spec = table("flatten", schema=SCHEMA, commit_mode="upsert", key_fields=["id", "region", "partition"])
    messages = [
        ('{"region":"eu","id":1}', None),
        ('{"id":2}', None),
        ("3", None),
        ('{"id":"x","region":"eu"}', None),
    ]
    result = run(spec, messages)
    assert [(r["id"], r["region"], r["partition"], r[TOMBSTONE_COLUMN]) for r in result.rows] == [(1, "eu", 0, True)]
    assert result.reasons() == {
        1: "null value (tombstone): key has no field region",
        2: "null value (tombstone): expected a JSON object with fields id, region in key, got 3",
        3: 'tombstone key field id: expected long, got "x"',
    }


def test_null_value_without_upsert_is_an_error(run: Any) -> None:
    for commit_mode in ("append", "overwrite"):
        spec = table("csv", schema=SCHEMA, commit_mode=commit_mode)
        result = run(spec, [("1", None), ("2", "2,eu,n")])
        assert [r["id"] for r in result.rows] == [2]
        assert result.reasons() == {0: f"null value (tombstone) but commit_mode is {commit_mode}, not upsert"}


def test_csv_tombstone_and_kafka_column_key_fields(run: Any) -> None:
    spec = table("csv", schema=SCHEMA, commit_mode="upsert", key_fields=["id"])
    result = run(spec, [("5", None), ("6", "6,eu,n")])
    assert [(r["id"], r["region"], r[TOMBSTONE_COLUMN]) for r in result.rows] == [(5, None, True), (6, "eu", False)]

    by_coordinates = table("csv", schema=SCHEMA, commit_mode="upsert", key_fields=["topic", "partition"])
    result = run(by_coordinates, [(None, None)])  # nothing to read from the key: a null key is fine
    assert [(r["topic"], r["id"], r[TOMBSTONE_COLUMN]) for r in result.rows] == [("t", None, True)]
