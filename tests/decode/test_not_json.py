"""Messages that are certainly not one JSON document, settled where the Arrow writer parses them.

``decode.not_json.settled_reason`` gives the reason Spark's decoder gives such a message, or None
where it cannot be sure. Each message here goes through Spark's decoder (json and flatten tables)
and every reason Python settles must be Spark's, word for word, with no decoded fields; and the
messages a benchmark's topic carries (truncated documents, a missing colon) must be settled, or
the tasks would still leave them to a second Spark job.
"""

from __future__ import annotations

import json
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafka_iceberg.decode import decode
from kafka_iceberg.decode.not_json import settled_reason
from tests.corpus import load
from tests.decode.conftest import FLUSH, collect, table
from tests.support import hostile

DOCS = [
    {"id": 1, "name": 'a "quoted" \\ name', "n": -12.5e3, "tags": ["x", {"y": [1, 2, None]}], "ok": True},
    {"ünï": "©ø", "emoji": "\U0001f600", "empty": {}, "list": [], "null": None, "esc": "\u2028\t"},
    [1, "two", [3, [4]], {"five": 5}],
    {"comment": "words words words"},
]
INVALID = [
    '{"uid" 123, "x": 1}',  # missing colon (a benchmark's broken document)
    '{"a":1}x',
    '{"a":1} x',
    '{"a":1}{"b":2}',
    '{"a":1},',
    "[1,2]]",
    "[1] [2]",
    '{"a":1,"a":2}x',  # duplicate keys, then more
    '  {"a":1}y',  # leading spaces: Spark's ltrim
    "  [1,",
    "{'a': 1}",
    '{"a": 01}',
    '{"a": NaN}',
    '{"a": Infinity}',
    "[-Infinity]",
    "NaN",
    "{a: 1}",
    '{"a": 1,}',
    "[1,,2]",
    "[1,]",
    '{"a": +1}',
    '{"a": .5}',
    '{"a": 1.}',
    '{"a": 1e}',
    '{"a": tru}',
    '{"a": nul}',
    '{"a": "\\x"}',
    '{"a": "\\u12"}',
    '{"a": 1} // comment',
    "/* c */ {}",
    "x",
    "   ",
    "'text'",
    '"unterminated',
    "}",
    "]",
    "{]",
    "[}",
    ":",
    "1 2",
    "true false",
    "nullx",
    "-",
    "--1",
    "0x10",
]
UNSURE = [
    '{"a": "tab\tinside"}',  # a control character
    "\ufeff{}x",  # a byte order mark
    "[" * 600 + "1",  # deep nesting: Jackson's limit, not Python's
    '{"a": ' + "1" * 600 + "x",  # a long number
    '{"a": 1}',  # valid JSON: Spark's decoder decides what it is
    "[1]",
    '"text"',
    "12",
    " {} ",
]


def _truncations(text: str) -> list[str]:
    return [text[:cut] for cut in range(1, len(text))]


def _messages() -> list[bytes]:
    texts = list(INVALID) + list(UNSURE)
    for doc in DOCS:
        compact = json.dumps(doc, ensure_ascii=False, separators=(",", ":"))
        texts += _truncations(compact) + _truncations(json.dumps(doc))
        texts += [compact.replace('":', '" ', 1), compact[:-3], compact + "]", " " + compact + "}"]
    out = [t.encode() for t in texts]
    for fmt in ("json", "flatten"):
        out += [m.value for m in load(fmt) if isinstance(m.value, bytes)]
    rng = random.Random(5)
    for _ in range(300):  # splices of breakers into real documents
        doc = json.dumps(rng.choice(DOCS))
        at = rng.randrange(len(doc) + 1)
        out.append((doc[:at] + rng.choice(hostile.JSON_BREAKERS) + doc[at:]).encode("utf-8", "surrogatepass"))
    return out


def _sparks_errors(spark, fmt: str, values: list[bytes]) -> dict[int, tuple[str, object]]:
    spec = (
        table("json", source_decoder="spark")
        if fmt == "json"
        else table(
            "flatten",
            schema={"columns": {"id": "long", "name": "string"}},
            schema_evolution="strict",
            source_decoder="spark",
        )
    )
    rows = [(None, v, "t", 0, i, FLUSH.replace(tzinfo=None), None) for i, v in enumerate(values)]
    frame = spark.createDataFrame(rows, "key BINARY, value BINARY, topic STRING, partition INT, offset BIGINT, "
                                        "timestamp TIMESTAMP, headers ARRAY<STRUCT<key: STRING, value: BINARY>>")  # fmt: skip
    result = collect(decode(frame, spec, flush_time=FLUSH))
    return {r["offset"]: (r["_error"], r["_decoded"]) for r in result.errors}


@pytest.mark.parametrize("fmt", ["json", "flatten"])
def test_every_settled_reason_is_the_one_sparks_decoder_gives(spark, fmt):
    values = _messages()
    errors = _sparks_errors(spark, fmt, values)

    settled = {i: settled_reason(v, "value") for i, v in enumerate(values)}
    settled = {i: reason for i, reason in settled.items() if reason is not None}

    assert {i: errors.get(i) for i in settled} == {i: (reason, None) for i, reason in settled.items()}
    # Not vacuous: most messages are settled, both reasons among them.
    assert len(settled) > 0.7 * len(values)
    assert {"invalid JSON in value", "invalid JSON in value: unexpected content after the end of the document"} <= set(
        settled.values()
    )


def test_what_python_cannot_be_sure_of_is_left_to_spark():
    assert [settled_reason(t.encode(), "value") for t in UNSURE] == [None] * len(UNSURE)
    assert settled_reason(None, "value") is None and settled_reason(b"", "value") is None
    assert settled_reason(b'{"a": "\xff"', "value") is None  # invalid UTF-8 has its own rule


def test_a_benchmark_topics_broken_documents_are_all_settled():
    doc = json.dumps(DOCS[0], separators=(",", ":"))
    for broken in (doc[:-3], doc[:-7], doc.replace('":', '" ', 1)):
        assert settled_reason(broken.encode(), "value") == "invalid JSON in value"
    assert settled_reason(b'{"a":1}}', "key") == "invalid JSON in key: unexpected content after the end of the document"


@settings(max_examples=2, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(st.lists(hostile.broken_json(), min_size=60, max_size=60))
def test_generated_broken_documents_settle_as_sparks_decoder_refuses_them(spark, values):
    errors = _sparks_errors(spark, "json", values)
    for i, value in enumerate(values):
        reason = settled_reason(value, "value")
        if reason is not None:
            assert errors.get(i) == (reason, None), value
