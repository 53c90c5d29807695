"""Text and binary rows made by the task that writes them (``decode/as_sent.py``), without a JVM.

The tasks' UTF-8 verdict must be the one Spark's side reaches by its round trip; that agreement is
shown end to end on the corpus and generated messages
(``tests/e2e/test_corpus_end_to_end.py::test_text_and_binary_rows_made_as_sent_by_the_writing_tasks_match_sparks_decoder_and_writer``).
Here: Arrow's verdict is Python's strict decoder's on every hostile byte string, and the reason and
decoded fields of each part that fails.
"""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafka_iceberg.decode.arrow import OK
from kafka_iceberg.decode.as_sent import as_sent_layout, certify_as_sent, settled_reasons
from kafka_iceberg.decode.plan import KEY, VALUE
from tests.corpus import load
from tests.support import hostile


def _batch(pairs: list[tuple[bytes | None, bytes | None]]) -> pa.RecordBatch:
    keys, values = zip(*pairs, strict=True)
    return pa.RecordBatch.from_arrays([pa.array(keys, pa.binary()), pa.array(values, pa.binary())], [KEY, VALUE])


def _utf8(data: bytes | None) -> str | None:
    try:
        return None if data is None else data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _valid(data: bytes | None) -> bool:
    return data is None or _utf8(data) is not None


def test_only_text_and_binary_are_written_as_sent_and_mode_picks_the_parts():
    assert as_sent_layout("json", "value") is None
    text = as_sent_layout("text", "default")
    assert text is not None and text.columns == (("key", "string"), ("value", "string"))
    binary = as_sent_layout("binary", "key")
    assert binary is not None and binary.columns == (("key", "binary"),)


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(
    st.lists(st.tuples(hostile.keys(), st.one_of(hostile.invalid_utf8(), hostile.any_bytes(), st.none())), min_size=1)
)
def test_a_text_record_is_certified_exactly_when_each_part_written_is_null_or_utf8(pairs):
    layout = as_sent_layout("text", "default")
    assert layout is not None
    out = certify_as_sent(_batch(pairs), layout)
    expected = [_valid(k) and _valid(v) for k, v in pairs]
    assert out.column(OK).to_pylist() == expected
    assert out.column("_ki_a0").to_pylist() == [_utf8(k) for k, _ in pairs]
    assert out.column("_ki_a1").to_pylist() == [_utf8(v) for _, v in pairs]
    settled = settled_reasons(_batch(pairs), range(len(pairs)), layout)
    assert sorted(settled) == [i for i, ok in enumerate(expected) if not ok]  # every failure settled here


def test_the_corpus_messages_not_utf8_are_the_ones_left_uncertified():
    messages = [(m.key, m.value) for m in load("text")]
    layout = as_sent_layout("text", "value")  # the fixture's mode: the key is not read
    assert layout is not None
    ok = certify_as_sent(_batch(messages), layout).column(OK).to_pylist()
    assert ok == [m.expect == "good" for m in load("text")]


@pytest.mark.parametrize(
    ("key", "value", "reason", "decoded"),
    [
        (b"k1", b"\xff", "invalid UTF-8 in value", '{"key":"k1"}'),
        (b'q"t\\\n\x01', b"\xc0\x80", "invalid UTF-8 in value", '{"key":"q\\"t\\\\\\n\\u0001"}'),
        (b"\xed\xa0\x80", b"fine", "invalid UTF-8 in key", '{"value":"fine"}'),
        (b"\xf4\x90\x80\x80", b"\xe2\x82", "invalid UTF-8 in key; invalid UTF-8 in value", None),
        (None, b"\x80", "invalid UTF-8 in value", None),  # nothing decoded: to_json's {} is NULL
    ],
)
def test_a_text_error_has_sparks_reason_and_decoded_fields(key, value, reason, decoded):
    layout = as_sent_layout("text", "default")
    assert layout is not None
    assert settled_reasons(_batch([(key, value)]), [0], layout) == {0: (reason, decoded)}


def test_binary_certifies_everything_as_the_bytes_sent():
    pairs = [(b"\xff", b"\x00\x80"), (None, None), (b"", b"")]
    layout = as_sent_layout("binary", "default")
    assert layout is not None
    out = certify_as_sent(_batch(pairs), layout)
    assert out.column(OK).to_pylist() == [True] * 3
    assert [out.column("_ki_a0").to_pylist(), out.column("_ki_a1").to_pylist()] == [
        list(p) for p in zip(*pairs, strict=True)
    ]
    assert settled_reasons(_batch(pairs), range(3), layout) == {}
