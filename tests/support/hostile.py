"""Hypothesis strategies for hostile Kafka messages, per format (issue 9's property-based corpus).

Each strategy draws ``(key, value)`` byte pairs (either may be None). They are built for the end-to-end
decode test, which produces drawn messages to a topic and checks that every one lands in the table
or the error target; nothing here needs a JVM.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st

Message = tuple[bytes | None, bytes | None]

BOM = b"\xef\xbb\xbf"
INVALID_UTF8_PIECES = [b"\xff", b"\x80", b"\xc0\x80", b"\xed\xa0\x80", b"\xe2\x82", b"\xf4\x90\x80\x80", b"\xfe"]
JSON_BREAKERS = [
    "NaN",
    "Infinity",
    "-Infinity",
    "'x'",
    "{",
    "}",
    "[",
    "]",
    ",",
    ":",
    '"',
    "\\",
    "\x00",
    "\t",
    "//",
    "01",
]


def invalid_utf8() -> st.SearchStrategy[bytes]:
    """Bytes guaranteed not to be UTF-8: valid text with at least one bad sequence spliced in."""
    return st.builds(
        lambda before, bad, after: before.encode() + bad + after.encode(),
        st.text(max_size=20),
        st.sampled_from(INVALID_UTF8_PIECES),
        st.text(max_size=20),
    )


def any_bytes(max_size: int = 256) -> st.SearchStrategy[bytes]:
    """Arbitrary bytes, biased towards the hostile: invalid UTF-8, BOMs, NULs, controls."""
    return st.one_of(
        st.binary(max_size=max_size),
        invalid_utf8(),
        st.builds(lambda b: BOM + b, st.binary(max_size=32)),
        st.text(alphabet=st.characters(max_codepoint=0x1F), max_size=32).map(str.encode),
        st.text(max_size=64).map(lambda t: t.encode("utf-8", "surrogatepass")),
    )


def _json_leaves() -> st.SearchStrategy[Any]:
    return st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(2**80), max_value=2**80),  # beyond a long on purpose
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(max_size=20),
    )


def json_values(max_leaves: int = 20) -> st.SearchStrategy[Any]:
    """Python values that serialise to valid JSON (nested objects and arrays)."""
    return st.recursive(
        _json_leaves(),
        lambda children: st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=8), children, max_size=5),
        max_leaves=max_leaves,
    )


def valid_json_documents() -> st.SearchStrategy[bytes]:
    """Valid JSON documents of any kind, with whitespace variations and escaping choices."""
    return st.builds(
        lambda v, ascii_only, pad: (pad + json.dumps(v, ensure_ascii=ascii_only) + pad).encode(),
        json_values(),
        st.booleans(),
        st.sampled_from(["", " ", "\n", "\t \r\n"]),
    )


def broken_json() -> st.SearchStrategy[bytes]:
    """Documents that are almost JSON: truncated, with a breaker spliced in, NaN tokens, trailing data."""
    doc = st.builds(json.dumps, json_values())
    truncated = st.builds(lambda d, cut: d[: max(0, len(d) - 1 - cut % max(1, len(d)))], doc, st.integers(0, 50))
    spliced = st.builds(
        lambda d, at, brk: d[: at % (len(d) + 1)] + brk + d[at % (len(d) + 1) :],
        doc,
        st.integers(0, 200),
        st.sampled_from(JSON_BREAKERS),
    )
    trailing = st.builds(lambda d, t: d + t, doc, st.sampled_from([" x", "{}", "]", ",1", "\x00"]))
    duplicate = st.builds(
        lambda k, a, b: f'{{"{k}":{json.dumps(a)},"{k}":{json.dumps(b)}}}',
        st.sampled_from(["id", "a"]),
        _json_leaves(),
        _json_leaves(),
    )
    return st.one_of(truncated, spliced, trailing, duplicate).map(lambda s: s.encode("utf-8", "surrogatepass"))


def deep_json(max_depth: int = 3000) -> st.SearchStrategy[bytes]:
    """Objects or arrays nested up to ``max_depth`` levels, balanced or not."""
    return st.builds(
        lambda depth, arrays, balanced: (
            ("[" * depth + "1" + ("]" * depth if balanced else ""))
            if arrays
            else ('{"a":' * depth + "1" + ("}" * depth if balanced else ""))
        ).encode(),
        st.integers(1, max_depth),
        st.booleans(),
        st.booleans(),
    )


def flatten_objects() -> st.SearchStrategy[bytes]:
    """JSON objects for the flatten fixture (``id bigint, name string, extendinfo string``) with hostile
    members: ids of every type and size, nested values, keys that cannot be columns."""
    ids = st.one_of(
        st.integers(min_value=-(2**63), max_value=2**63 - 1),
        st.integers(min_value=2**63, max_value=2**70),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(max_size=10),
        st.none(),
        st.booleans(),
    )
    keys = st.one_of(
        st.sampled_from(["name", "extendinfo", "extra", "ID", "offset", "pt", "bad-key", "", "名前"]),
        st.from_regex(r"[a-z_][a-z0-9_]{0,6}", fullmatch=True),
    )
    return st.builds(
        lambda i, extra: json.dumps({"id": i, **extra}).encode(),
        ids,
        st.dictionaries(keys, json_values(max_leaves=5), max_size=4),
    )


def csv_lines(columns: int = 3) -> st.SearchStrategy[bytes]:
    """CSV records for a ``columns``-column table: quoting edge cases, wrong field counts, odd numbers."""
    plain = st.text(alphabet=st.characters(blacklist_characters=',"\r\n'), max_size=12)
    quoted = st.text(max_size=12).map(lambda t: '"' + t.replace('"', '""') + '"')
    broken = st.sampled_from(['"', '"abc', 'a"b', '"a"b', ' "a"', '""', '"""', "\\", "\ufeff1"])
    numbers = st.one_of(
        st.integers(min_value=-(2**70), max_value=2**70).map(str),
        st.sampled_from(["NaN", "Infinity", "1e3", "1.5", " 7 ", "+5", "0x10", "007", ""]),
    )
    field = st.one_of(plain, quoted, broken, numbers)
    return st.builds(
        lambda first, rest, sep_end: (",".join([first, *rest]) + sep_end).encode("utf-8", "surrogatepass"),
        numbers,
        st.lists(field, min_size=max(0, columns - 3), max_size=columns + 1),
        st.sampled_from(["", "", "", ",", "\n", "\r\n"]),
    )


def keys() -> st.SearchStrategy[bytes | None]:
    """Kafka keys: null, empty, text, or hostile bytes."""
    return st.one_of(st.none(), st.just(b""), st.text(max_size=16).map(str.encode), any_bytes(32))


def values(fmt: str) -> st.SearchStrategy[bytes | None]:
    """Hostile values for one format (null and empty included for every format)."""
    common = st.one_of(st.none(), st.just(b""), invalid_utf8(), st.builds(lambda b: BOM + b, st.binary(max_size=16)))
    per_format: dict[str, st.SearchStrategy[bytes]] = {
        "text": st.one_of(any_bytes(), valid_json_documents(), broken_json()),
        "binary": any_bytes(1024),
        "json": st.one_of(valid_json_documents(), broken_json(), deep_json()),
        "flatten": st.one_of(flatten_objects(), valid_json_documents(), broken_json(), deep_json(1500)),
        "csv": csv_lines(),
    }
    return st.one_of(common, per_format[fmt], per_format[fmt], per_format[fmt])  # mostly format-specific


def messages(fmt: str) -> st.SearchStrategy[Message]:
    """``(key, value)`` pairs for ``fmt``."""
    return st.tuples(keys(), values(fmt))


def batches(fmt: str, max_size: int = 200) -> st.SearchStrategy[list[Message]]:
    """A batch of messages for one table."""
    return st.lists(messages(fmt), min_size=1, max_size=max_size)
