"""flatten: keys matched to columns by name, strict vs add_columns, inference, reserved names."""

from __future__ import annotations

from typing import Any

import pytest

from kafka_iceberg.decode import decode
from kafka_iceberg.errors import ConfigError
from tests.decode.conftest import FLUSH, Msg, table

COLUMNS = {"id": "long", "name": "string", "extra": "string"}


def test_flatten_strict_errors(run: Any) -> None:
    messages = [
        ("k", '{"id":1,"name":"a","extra":[1, {"b" : 2.50}]}'),
        ("k", '{"id":"2","name":3}'),
        ("k", '{"id":3}'),
        ("k", '{"id":null,"name":null}'),
        ("k", '{"id":"abc","name":"b"}'),
        ("k", '{"id":1.5}'),
        ("k", '{"id":4,"nope":1,"also":null}'),
        ("k", '{"id":5,"id":6}'),
        ("k", "[1,2]"),
        ("k", '"text"'),
        ("k", "{'id':1}"),
        ("k", '{"id":7} trailing'),
        ("k", ""),
        ("k", b'{"name":"\xff"}'),
        ("k", '{"id":true,"name":"x","zz":1}'),
        ("k", "{}"),
    ]
    result = run(table("flatten", schema={"columns": COLUMNS}, schema_evolution="strict"), messages)
    assert [(r["offset"], r["id"], r["name"], r["extra"]) for r in result.rows] == [
        (0, 1, "a", '[1,{"b":2.5}]'),  # nested values: compact JSON
        (1, 2, "3", None),  # a JSON string holding a long, a number for a string column
        (2, 3, None, None),  # missing keys: NULL
        (3, None, None, None),
        (15, None, None, None),
    ]
    assert result.reasons() == {
        4: 'field id: expected long, got "abc"',
        5: 'field id: expected long, got "1.5"',
        6: "unknown fields nope, also (schema_evolution is strict)",
        7: "duplicate key id in the JSON object in value",
        8: "expected a JSON object in value, got an array",
        9: "expected a JSON object in value, got a string",
        10: "invalid JSON in value",
        11: "invalid JSON in value: unexpected content after the end of the document",
        12: "empty value (0 bytes)",
        13: "invalid UTF-8 in value",
        14: 'unknown field zz (schema_evolution is strict); field id: expected long, got "true"',
    }
    assert result.decoded.new_columns == {}


def test_flatten_add_columns_adds_typed_columns_in_first_seen_order(run: Any) -> None:
    messages = [
        Msg("k", '{"id":1,"zeta":1,"alpha":"x"}', partition=0, offset=5),
        Msg("k", '{"id":2,"alpha":"y","beta":null,"gamma":[1]}', partition=0, offset=6),
        Msg("k", '{"id":3,"zeta":2.5,"delta":true}', partition=1, offset=0),
        Msg("k", '{"id":4,"timestamp":"2024","Name":"dup","user-name":"u","_ki_x":1}', partition=1, offset=1),
        Msg("k", '{"id":5,"timestamp":null}', partition=1, offset=2),
    ]
    result = run(table("flatten", schema={"columns": COLUMNS}), messages)
    assert result.decoded.new_columns == {"zeta": "double", "alpha": "string", "gamma": "string", "delta": "boolean"}
    assert result.decoded.rows.columns[4:11] == ["id", "name", "extra", "zeta", "alpha", "gamma", "delta"]
    assert dict(result.decoded.rows.dtypes)["zeta"] == "double"
    assert [(r["id"], r["zeta"], r["alpha"], r["gamma"], r["delta"]) for r in result.rows] == [
        (1, 1.0, "x", None, None),
        (2, None, "y", "[1]", None),
        (3, 2.5, None, None, True),
        (5, None, None, None, None),  # a key holding only null is no column and no error
    ]
    [error] = result.errors
    assert error["_error"] == (
        "field timestamp: reserved column name; field Name: differs only in case from column name; "
        "field user-name: not a valid column name (letters, digits and '_' only, not starting with a digit "
        "(S3 Tables and OSS Tables reject '-')); field _ki_x: reserved column name"
    )


def test_flatten_infers_schema_without_one(run: Any) -> None:
    messages = [
        ("k", '{"i":1,"mixed":1,"s":"1","o":{"a":1},"a":[1],"b":false,"big":1}'),
        ("k", '{"i":2,"mixed":2.5,"s":"x","b":true,"big":123456789012345678901234,"lm":1}'),
        ("k", '{"lm":"one","n":null}'),
    ]
    result = run(table("flatten"), messages)
    assert result.decoded.new_columns == {
        "i": "long",
        "mixed": "double",
        "s": "string",  # a JSON string holding digits stays a string
        "o": "string",
        "a": "string",
        "b": "boolean",
        "big": "string",  # beyond a long: no silent double
        "lm": "string",  # a long and a string
    }
    assert [(r["i"], r["mixed"], r["s"], r["o"], r["big"], r["lm"]) for r in result.rows] == [
        (1, 1.0, "1", '{"a":1}', "1", None),
        (2, 2.5, "x", None, "123456789012345678901234", "1"),
        (None, None, None, None, None, "one"),
    ]
    assert result.errors == []


def test_known_columns_win_over_declared_and_inferred(run: Any) -> None:
    known = {"id": "string", "score": "long", "small": "smallint"}  # smallint: a table made elsewhere
    messages = [("k", '{"id":"A-1","score":5,"name":"n","small":7}'), ("k", '{"id":"B","score":"high"}')]
    result = run(table("flatten", schema={"columns": {"id": "long", "name": "string"}}), messages, known_columns=known)
    assert result.decoded.rows.columns[4:8] == ["id", "score", "small", "name"]  # the table's order first
    assert dict(result.decoded.rows.dtypes)["small"] == "smallint"
    assert [(r["id"], r["score"], r["small"], r["name"]) for r in result.rows] == [("A-1", 5, 7, "n")]
    assert result.reasons() == {1: 'field score: expected long, got "high"'}
    assert result.decoded.new_columns == {}

    inferred = run(table("flatten"), messages[:1], known_columns=known)
    assert inferred.decoded.new_columns == {"name": "string"}


def test_flatten_mode_key(run: Any) -> None:
    spec = table("flatten", source_mode="key", schema={"columns": {"id": "long"}}, schema_evolution="strict")
    result = run(spec, [('{"id":1}', None), ("[]", "{}")])
    assert [r["id"] for r in result.rows] == [1]
    assert result.reasons() == {1: "expected a JSON object in key, got an array"}


def test_discovery_needs_a_batch_dataframe(spark: Any, tmp_path: Any, kafka_df: Any) -> None:
    kafka_df([("k", "{}")]).write.parquet(str(tmp_path / "in"))
    stream = spark.readStream.schema(kafka_df([]).schema).parquet(str(tmp_path / "in"))
    with pytest.raises(ConfigError) as err:
        decode(stream, table("flatten", schema={"columns": COLUMNS}), flush_time=FLUSH)
    [problem] = err.value.problems
    assert (problem.key_path, problem.value) == ("schema_evolution", "add_columns")
    assert "foreachBatch" in problem.expected
    # strict with a declared schema needs no discovery: fine on a stream
    decode(stream, table("flatten", schema={"columns": COLUMNS}, schema_evolution="strict"), flush_time=FLUSH)


@pytest.mark.parametrize(
    ("fmt", "keys", "key_path"),
    [
        ("csv", {}, "schema"),
        ("csv", {"schema": {"columns": {"a": "long"}}, "source_mode": "default"}, "source.mode"),
        ("flatten", {"schema_evolution": "strict"}, "schema_evolution"),
    ],
)
def test_specs_that_cannot_decode(kafka_df: Any, fmt: str, keys: dict[str, Any], key_path: str) -> None:
    with pytest.raises(ConfigError) as err:
        decode(kafka_df([]), table(fmt, **keys), flush_time=FLUSH)
    assert [p.key_path for p in err.value.problems] == [key_path]


def test_strict_without_a_schema_uses_the_table_columns(run: Any) -> None:
    spec = table("flatten", schema_evolution="strict")
    result = run(spec, [("k", '{"id":"x"}'), ("k", '{"id":"y","new":1}')], known_columns={"id": "string"})
    assert [r["id"] for r in result.rows] == ["x"]
    assert result.reasons() == {1: "unknown field new (schema_evolution is strict)"}
    assert result.decoded.new_columns == {}
