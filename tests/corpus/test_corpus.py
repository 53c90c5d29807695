"""The bad-input corpus is well-formed (no JVM): enough messages per format, unique ids, every hostile
category of issue 9 present, the files match their generator and target real fixture tables, and
the json expectations agree with Python's own strict JSON parser."""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path

import pytest

from kafka_iceberg.spec.load import load_pipeline
from tests.corpus import CORPUS_DIR, FORMATS, load, load_target
from tests.corpus.generate import build

REPO = Path(__file__).resolve().parents[2]
COMMON = {"invalid_utf8", "control_chars", "bom", "huge_values", "empty", "null_key", "null_value"}
JSON_KINDS = {"truncated_json", "deep_nesting", "duplicate_keys", "nan_infinity", "big_numbers"}
CATEGORIES = {
    "text": COMMON | JSON_KINDS | {"csv_quoting"},
    "binary": COMMON | JSON_KINDS | {"csv_quoting"},
    "json": COMMON | JSON_KINDS,
    "flatten": COMMON | JSON_KINDS,
    "csv": COMMON | {"csv_quoting", "big_numbers", "nan_infinity"},
}


@pytest.mark.parametrize("fmt", FORMATS)
def test_at_least_50_messages_with_valid_expectations(fmt):
    messages = load(fmt)
    assert len(messages) >= 50
    for m in messages:
        assert m.id.startswith(f"{fmt}-")
        assert m.expect in ("good", "error"), m.id
        assert m.why, m.id
        assert m.expect != "good" or m.reason_contains is None, m.id


def test_ids_are_unique_across_formats():
    ids = Counter(m.id for fmt in FORMATS for m in load(fmt))
    assert [i for i, n in ids.items() if n > 1] == []


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_category_of_the_issue_is_present(fmt):
    found = {m.category for m in load(fmt)}
    assert CATEGORIES[fmt] <= found, CATEGORIES[fmt] - found
    assert found <= set().union(*CATEGORIES.values())


@pytest.mark.parametrize("fmt", FORMATS)
def test_hostile_shapes_really_are_in_the_bytes(fmt):
    messages = load(fmt)
    assert any(m.value is None for m in messages), "null value"
    assert any(m.key is None for m in messages), "null key"
    assert any(m.value == b"" for m in messages), "empty value"
    assert any(m.value is not None and len(m.value) >= 1_000_000 for m in messages), "huge value"
    assert any(m.key is not None and len(m.key) >= 1_000_000 for m in messages), "huge key"
    assert any(m.value is not None and m.value.startswith(b"\xef\xbb\xbf") for m in messages), "BOM"

    def invalid_utf8(b: bytes | None) -> bool:
        try:
            (b or b"").decode("utf-8")
        except UnicodeDecodeError:
            return True
        return False

    assert sum(invalid_utf8(m.value) for m in messages) >= 5


@pytest.mark.parametrize("fmt", FORMATS)
def test_each_file_targets_a_fixture_table_of_its_format(fmt):
    target = load_target(fmt)
    assert target.format == fmt
    pipeline = load_pipeline(REPO / target.pipeline)
    (table,) = [t for t in pipeline.tables if t.identifier == target.table]
    assert table.source.format == fmt
    assert table.source.topics == [target.topic]
    assert table.commit_mode == "append"  # a null value is an error, not a tombstone, for json/csv/flatten


def test_files_match_the_generator():
    for fmt, lines in build().items():
        assert (CORPUS_DIR / f"{fmt}.jsonl").read_text(encoding="utf-8") == "\n".join(lines) + "\n", (
            f"{fmt}.jsonl is stale: run python -m tests.corpus.generate"
        )


def test_text_fails_exactly_on_invalid_utf8_in_the_value():
    for m in load("text"):
        try:
            (m.value or b"").decode("utf-8")
            valid = True
        except UnicodeDecodeError:
            valid = False
        assert (m.expect == "error") == (not valid), m.id


def test_binary_never_fails():
    assert {m.expect for m in load("binary")} == {"good"}


def _python_json_ok(value: bytes) -> bool:
    def no_constants(name: str) -> float:
        raise ValueError(name)

    try:
        text = value.decode("utf-8")
        json.loads(text, parse_constant=no_constants)
    except (ValueError, RecursionError):
        return False
    return not text.startswith("\ufeff")


def test_json_syntax_expectations_agree_with_pythons_strict_parser():
    """An independent oracle for the syntax cases: Python's json (strict, NaN refused) and the corpus agree."""
    checked = 0
    for m in load("json"):
        if m.value is None or m.value == b"":
            continue
        if m.reason_contains and "JSON" not in m.reason_contains:
            continue
        if m.category == "deep_nesting" and len(m.value) > 2000:
            continue  # Python's recursion limit is not the decoder's
        if m.category == "big_numbers" and len(m.value) > 1000:
            continue  # nor is its limit on digits (Jackson reads numbers of at most 1000 characters)
        assert _python_json_ok(m.value) == (m.expect == "good"), m.id
        checked += 1
    assert checked >= 40


def test_json_big_exponent_is_valid_json_overflowing_a_double():
    (m,) = [m for m in load("json") if m.id == "json-big-exp"]
    assert m.value is not None and math.isinf(json.loads(m.value)["x"])
