"""The hostile-message strategies (tests/support/hostile.py) draw bytes of the promised shapes,
deterministically (no JVM: the end-to-end test that feeds them to the decoder needs Spark)."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.corpus import FORMATS
from tests.support import hostile

DETERMINISTIC = settings(
    derandomize=True, max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


def _utf8(b: bytes) -> bool:
    try:
        b.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


@pytest.mark.parametrize("fmt", FORMATS)
def test_messages_are_byte_pairs(fmt):
    @DETERMINISTIC
    @given(hostile.messages(fmt))
    def check(message):
        key, value = message
        assert key is None or isinstance(key, bytes)
        assert value is None or isinstance(value, bytes)

    check()


@DETERMINISTIC
@given(hostile.invalid_utf8())
def test_invalid_utf8_never_decodes(data):
    assert not _utf8(data)


@DETERMINISTIC
@given(hostile.valid_json_documents())
def test_valid_json_documents_parse(doc):
    json.loads(doc)


@DETERMINISTIC
@given(hostile.deep_json(50))
def test_deep_json_is_deep(doc):
    assert doc.startswith((b"[", b'{"a":'))


@DETERMINISTIC
@given(hostile.flatten_objects())
def test_flatten_objects_are_objects_with_an_id(doc):
    assert "id" in json.loads(doc)


@DETERMINISTIC
@given(hostile.csv_lines())
def test_csv_lines_are_bytes_with_at_least_one_field(line):
    assert isinstance(line, bytes)


def _draw_many(strategy: st.SearchStrategy[bytes | None], n: int = 300) -> list[bytes | None]:
    out: list[bytes | None] = []

    @settings(derandomize=True, max_examples=n, deadline=None, database=None)
    @given(strategy)
    def collect(x):
        out.append(x)

    collect()
    return out


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_format_gets_null_empty_and_invalid_utf8_values(fmt):
    drawn = _draw_many(hostile.values(fmt))
    assert None in drawn
    assert b"" in drawn
    assert any(v is not None and not _utf8(v) for v in drawn)


def test_broken_json_is_mostly_not_json():
    drawn = [d for d in _draw_many(hostile.broken_json()) if d is not None]

    def ok(d: bytes) -> bool:
        try:
            json.loads(d, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))
        except ValueError:
            return False
        return True

    assert sum(not ok(d) for d in drawn) > len(drawn) // 2


def test_draws_are_deterministic():
    assert _draw_many(hostile.values("csv"), 50) == _draw_many(hostile.values("csv"), 50)
