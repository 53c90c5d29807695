"""Write ``tests/corpus/<format>.jsonl`` (run ``python -m tests.corpus.generate`` from the repository root).

Classifications follow ``docs/decode.md`` and were checked against real runs of the fixture tables
(``tests/e2e/test_corpus_end_to_end.py``):
text/json with ``mode: value`` (key column NULL, the key is never read), csv ``id bigint, name string,
region string``, flatten ``id bigint, name string, extendinfo string`` under the default
``schema_evolution: add_columns`` (unknown keys with valid names become columns), binary ``mode: default``.
All are ``commit_mode: append``: a null value is an error for json, csv and flatten.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tests.corpus import CORPUS_DIR

TARGETS = {
    "text": ("fixtures/pipelines/text.yml", "examples.table_text", "topic_text"),
    "csv": ("fixtures/pipelines/csv.yml", "examples.table_csv", "topic_csv"),
    "json": ("fixtures/pipelines/json.yml", "examples.table_json", "topic_json"),
    "flatten": ("fixtures/pipelines/flatten.yml", "examples.table_flatten", "topic_flatten"),
    "binary": ("fixtures/pipelines/binary.yml", "examples.table_binary", "topic_binary"),
}

# Byte sequences that are not UTF-8 (each breaks the lossless round trip the decoder checks).
INVALID_UTF8 = {
    "lone_ff": b"\xff",
    "lone_continuation": b"\x80",
    "overlong_nul": b"\xc0\x80",
    "overlong_slash": b"\xe0\x80\xaf",
    "cesu_surrogate": b"\xed\xa0\x80",
    "truncated_3byte": b"\xe2\x82",
    "beyond_u10ffff": b"\xf4\x90\x80\x80",
    "latin1_e_acute": b"caf\xe9",
}
BOM = b"\xef\xbb\xbf"
HUGE = 1_000_000  # about 1 MB, Kafka's default max.message.bytes
TRUNCATED_JSON = [b'{"id":', b'{"id":1', b'{"id":1,"name":"x', b'{"id":[1,2', b"[1,2", b'"abc', b"{", b"t"]
NAN_INF = [b"NaN", b"Infinity", b"-Infinity"]


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def deep(depth: int, leaf: bytes = b"1") -> bytes:
    return b'{"a":' * depth + leaf + b"}" * depth


class Corpus:
    def __init__(self, fmt: str):
        self.fmt = fmt
        self.rows: list[dict[str, Any]] = []

    def add(
        self,
        id: str,
        category: str,
        why: str,
        value: bytes | None,
        expect: str,
        reason: str | None = None,
        *,
        key: bytes | None = b"k1",
        note: str | None = None,
        repeat: tuple[bytes, int, bytes, bytes] | None = None,
        key_repeat: tuple[bytes, int] | None = None,
    ) -> None:
        row: dict[str, Any] = {"id": f"{self.fmt}-{id}", "category": category, "why": why}
        if key_repeat is not None:
            row["key_repeat"] = {"unit_b64": b64(key_repeat[0]), "times": key_repeat[1]}
        else:
            row["key_b64"] = None if key is None else b64(key)
        if repeat is not None:
            unit, times, prefix, suffix = repeat
            row["value_repeat"] = {
                "unit_b64": b64(unit),
                "times": times,
                "prefix_b64": b64(prefix),
                "suffix_b64": b64(suffix),
            }
        else:
            row["value_b64"] = None if value is None else b64(value)
        row["expect"] = expect
        if reason:
            row["reason_contains"] = reason
        if note:
            row["note"] = note
        self.rows.append(row)

    def lines(self) -> Iterator[str]:
        pipeline, table, topic = TARGETS[self.fmt]
        head = {"corpus": self.fmt, "pipeline": pipeline, "table": table, "topic": topic}
        yield json.dumps(head)
        for row in self.rows:
            yield json.dumps(row)


def common(c: Corpus, *, utf8: str, empty: str, null_value: str, null_reason: str | None) -> None:
    """Messages every format gets: invalid UTF-8, BOM, control characters, empty and null parts."""
    utf8_reason = "invalid UTF-8 in value" if utf8 == "error" else None
    for name, bad in INVALID_UTF8.items():
        c.add(f"utf8-{name}", "invalid_utf8", f"value is not UTF-8 ({name})", bad, utf8, utf8_reason)
    c.add(
        "utf8-bad-key",
        "invalid_utf8",
        "key is not UTF-8; mode value never reads it",
        _good(c.fmt),
        "good",
        key=b"\xff\xfe",
    )
    c.add("null-key", "null_key", "null Kafka key", _good(c.fmt), "good", key=None)
    c.add("empty-key", "null_key", "zero-byte Kafka key", _good(c.fmt), "good", key=b"")
    c.add(
        "null-value", "null_value", "null value (a tombstone) under commit_mode append", None, null_value, null_reason
    )
    c.add("null-key-null-value", "null_value", "null key and null value", None, null_value, null_reason, key=None)
    reason_empty = "empty value (0 bytes)" if empty == "error" else None
    c.add("empty-value", "empty", "zero-byte value", b"", empty, reason_empty)


def _good(fmt: str) -> bytes:
    return {"csv": b"1,name,region", "flatten": b'{"id":1,"name":"n"}', "json": b'{"id":1}'}.get(fmt, b"plain")


def text_corpus() -> Corpus:
    """text, mode value: only invalid UTF-8 in the value fails; everything else is a string."""
    c = Corpus("text")
    common(c, utf8="error", empty="good", null_value="good", null_reason=None)
    c.add("empty-null-key", "empty", "zero-byte value and null key", b"", "good", key=None)
    c.add("bom", "bom", "UTF-8 BOM before text", BOM + b"hello", "good")
    c.add("bom-only", "bom", "only a BOM", BOM, "good")
    c.add(
        "utf16-bom", "bom", "UTF-16LE BOM and text: not UTF-8", b"\xff\xfeh\x00i\x00", "error", "invalid UTF-8 in value"
    )
    c.add("nul", "control_chars", "NUL bytes", b"a\x00b\x00", "good")
    c.add("c0", "control_chars", "every C0 control character", bytes(range(32)), "good")
    c.add(
        "del-c1",
        "control_chars",
        "DEL and C1 controls (U+0080..U+009F, valid UTF-8)",
        b"\x7f" + "\u0085\u009f".encode(),
        "good",
    )
    c.add("crlf", "control_chars", "CR LF line breaks", b"line1\r\nline2\r\n", "good")
    c.add("escape-seq", "control_chars", "ANSI escape sequence", b"\x1b[31mred\x1b[0m", "good")
    c.add("bidi", "control_chars", "bidi override and zero-width characters", "a\u202eb\u200bc\ufeff".encode(), "good")
    c.add(
        "nonchar",
        "control_chars",
        "noncharacters U+FFFE, U+FFFF, U+10FFFF (valid UTF-8)",
        "\ufffe\uffff\U0010ffff".encode(),
        "good",
    )
    c.add("replacement", "invalid_utf8", "a literal U+FFFD (valid UTF-8)", "\ufffd".encode(), "good")
    c.add("emoji", "invalid_utf8", "4-byte characters and combining marks", "😀👨‍👩‍👧e\u0301".encode(), "good")
    c.add(
        "utf8-in-middle",
        "invalid_utf8",
        "valid text with one bad byte in the middle",
        b"hello \xff world",
        "error",
        "invalid UTF-8 in value",
    )
    c.add(
        "utf8-truncated-end",
        "invalid_utf8",
        "a 4-byte character cut at the end",
        "ok😀".encode()[:-1],
        "error",
        "invalid UTF-8 in value",
    )
    for i, t in enumerate(TRUNCATED_JSON):
        c.add(f"truncated-json-{i}", "truncated_json", "truncated JSON is just text", t, "good")
    c.add("deep-json", "deep_nesting", "deeply nested JSON is just text", deep(5000), "good")
    c.add("dup-keys", "duplicate_keys", "JSON with duplicate keys is just text", b'{"a":1,"a":2}', "good")
    for t in NAN_INF:
        c.add(f"nan-{t.decode().lower()}", "nan_infinity", "NaN/Infinity as text", t, "good")
    c.add("big-number", "big_numbers", "a number beyond a long, as text", b"9" * 400, "good")
    c.add("csv-quotes", "csv_quoting", "CSV quoting is just text", b'"a,""b",c\n"unterminated', "good")
    c.add("huge", "huge_values", "1 MB of text", None, "good", repeat=(b"x", HUGE, b"", b""))
    c.add(
        "huge-multibyte",
        "huge_values",
        "about 1 MB of 3-byte characters",
        None,
        "good",
        repeat=("€".encode(), HUGE // 3, b"", b""),
    )
    c.add(
        "huge-bad-tail",
        "huge_values",
        "1 MB of text ending in an invalid byte",
        None,
        "error",
        "invalid UTF-8 in value",
        repeat=(b"x", HUGE, b"", b"\xff"),
    )
    c.add("huge-key", "huge_values", "a 1 MB key (not read under mode value)", b"v", "good", key_repeat=(b"k", HUGE))
    c.add("whitespace", "empty", "only spaces and tabs", b" \t ", "good")
    c.add("single-quote", "csv_quoting", "a lone quote", b'"', "good")
    c.add("backslashes", "control_chars", "backslash escapes stay literal", b"\\n\\u0000\\", "good")
    return c


def binary_corpus() -> Corpus:
    """binary, mode default: the bytes as sent; nothing can fail."""
    c = Corpus("binary")
    for name, bad in INVALID_UTF8.items():
        c.add(f"utf8-{name}", "invalid_utf8", f"not UTF-8 ({name}): binary does not care", bad, "good", key=bad)
    c.add("null-key", "null_key", "null key", b"v", "good", key=None)
    c.add("empty-key", "null_key", "zero-byte key", b"v", "good", key=b"")
    c.add("null-value", "null_value", "null value: a row with a NULL value under append", None, "good")
    c.add("null-key-null-value", "null_value", "null key and null value", None, "good", key=None)
    c.add("empty-value", "empty", "zero-byte value", b"", "good")
    c.add("empty-both", "empty", "zero-byte key and value", b"", "good", key=b"")
    c.add("all-bytes", "control_chars", "every byte 0..255", bytes(range(256)), "good")
    c.add("nul-only", "control_chars", "NUL bytes only", b"\x00" * 64, "good")
    c.add("nul-key", "control_chars", "NUL key", b"v", "good", key=b"\x00")
    c.add("bom", "bom", "UTF-8 BOM", BOM, "good")
    c.add("utf16-bom", "bom", "UTF-16 BOMs", b"\xff\xfe\xfe\xff", "good")
    c.add(
        "gzip-header",
        "huge_values",
        "a gzip header (compressed payloads are opaque)",
        b"\x1f\x8b\x08\x00" + b"\x00" * 6,
        "good",
    )
    c.add("protobuf-ish", "control_chars", "protobuf-like varints", b"\x08\x96\x01\x12\x07testing", "good")
    c.add(
        "avro-magic",
        "control_chars",
        "Confluent wire-format magic byte and schema id",
        b"\x00\x00\x00\x00\x01\x02abc",
        "good",
    )
    for i, t in enumerate(TRUNCATED_JSON):
        c.add(f"truncated-json-{i}", "truncated_json", "truncated JSON bytes", t, "good")
    c.add("deep-json", "deep_nesting", "deeply nested JSON bytes", deep(5000), "good")
    c.add("dup-keys", "duplicate_keys", "JSON with duplicate keys", b'{"a":1,"a":2}', "good")
    for t in NAN_INF:
        c.add(f"nan-{t.decode().lower()}", "nan_infinity", "NaN/Infinity bytes", t, "good")
    c.add("big-number", "big_numbers", "digits beyond a long", b"9" * 400, "good")
    c.add("csv-quotes", "csv_quoting", "CSV quoting bytes", b'"a,""b",c\n"', "good")
    c.add("huge", "huge_values", "1 MB of 0xFF", None, "good", repeat=(b"\xff", HUGE, b"", b""))
    c.add("huge-key", "huge_values", "a 1 MB key", b"v", "good", key_repeat=(b"\x00", HUGE))
    c.add(
        "huge-pattern",
        "huge_values",
        "1 MB of every byte value",
        None,
        "good",
        repeat=(bytes(range(256)), HUGE // 256, b"", b""),
    )
    for n in (1, 2, 3, 7, 127, 128, 255, 4096):
        c.add(
            f"random-{n}",
            "huge_values",
            f"{n} pseudo-random bytes",
            bytes((i * 197 + 31) % 256 for i in range(n)),
            "good",
        )
    c.add("text", "control_chars", "plain text", b"hello", "good")
    c.add(
        "key-only-huge-value",
        "huge_values",
        "a null key and a 1 MB value of NULs",
        None,
        "good",
        key=None,
        repeat=(b"\x00", HUGE, b"", b""),
    )
    return c


def json_corpus() -> Corpus:
    """json, mode value: the value must be exactly one JSON value (any kind), kept as sent."""
    c = Corpus("json")
    inv = "invalid JSON in value"
    trailing = "unexpected content after the end of the document"
    common(
        c,
        utf8="error",
        empty="error",
        null_value="error",
        null_reason="null value (tombstone) but commit_mode is append, not upsert",
    )
    for i, t in enumerate(TRUNCATED_JSON):
        c.add(f"truncated-{i}", "truncated_json", f"truncated document {t.decode()!r}", t, "error", inv)
    c.add("deep-50", "deep_nesting", "objects nested 50 deep", deep(50), "good")
    c.add("deep-500", "deep_nesting", "objects nested 500 deep", deep(500), "good")
    c.add("deep-arrays-500", "deep_nesting", "arrays nested 500 deep", b"[" * 500 + b"]" * 500, "good")
    c.add(
        "deep-5000",
        "deep_nesting",
        "objects nested 5000 deep",
        deep(5000),
        "error",
        inv,
        note="beyond the nesting limit of Spark's JSON parser (Jackson 2.15's 1000 levels, one taken by the decoder)",
    )
    c.add("deep-999", "deep_nesting", "objects nested 999 deep: the deepest accepted", deep(999), "good")
    c.add("deep-1001", "deep_nesting", "objects nested 1001 deep: past the limit", deep(1001), "error", inv)
    c.add("deep-unbalanced", "deep_nesting", "5000 opening brackets, never closed", b"[" * 5000, "error", inv)
    c.add(
        "dup-keys",
        "duplicate_keys",
        "duplicate keys: still one JSON value, kept as sent",
        b'{"a":1,"a":2}',
        "good",
        note="json checks syntax only; duplicates are flatten's concern",
    )
    c.add(
        "dup-keys-nested", "duplicate_keys", "duplicate keys in a nested object", b'{"o":{"x":1,"x":{"y":2}}}', "good"
    )
    for t in NAN_INF:
        c.add(f"bare-{t.decode().lower()}", "nan_infinity", f"bare {t.decode()} is not JSON", t, "error", inv)
        c.add(
            f"member-{t.decode().lower()}",
            "nan_infinity",
            f"{t.decode()} as a member",
            b'{"x":' + t + b"}",
            "error",
            inv,
        )
    c.add("nan-string", "nan_infinity", "NaN as a JSON string is fine", b'{"x":"NaN"}', "good")
    c.add("big-int", "big_numbers", "an integer beyond a long", b'{"x":123456789012345678901234567890}', "good")
    c.add("big-exp", "big_numbers", "1e999: valid JSON, overflows a double", b'{"x":1e999}', "good")
    c.add("big-neg", "big_numbers", "a negative integer beyond a long", b"-99999999999999999999999", "good")
    c.add(
        "huge-digits",
        "big_numbers",
        "a number with 5000 digits",
        b"1" * 5000,
        "error",
        inv,
        note="valid JSON beyond the parser's limit: Jackson 2.15 reads numbers of at most 1000 characters",
    )
    c.add("digits-1000", "big_numbers", "a number of 1000 digits: the longest accepted", b"1" * 1000, "good")
    c.add("digits-1001", "big_numbers", "a number of 1001 digits: past the limit", b"1" * 1001, "error", inv)
    c.add(
        "digits-1001-in-string",
        "big_numbers",
        "1001 digits inside a JSON string are just text",
        b'{"x":"' + b"1" * 1001 + b'"}',
        "good",
    )
    c.add("leading-plus", "big_numbers", "+1 is not JSON", b"+1", "error", inv)
    c.add("leading-zero", "big_numbers", "01 is not JSON (allowNumericLeadingZeros is off)", b"01", "error", inv)
    c.add("bare-dot", "big_numbers", ".5 is not JSON", b".5", "error", inv)
    c.add("raw-nul-in-string", "control_chars", "a raw NUL inside a string", b'{"x":"a\x00b"}', "error", inv)
    c.add("raw-tab-in-string", "control_chars", "a raw tab inside a string", b'{"x":"a\tb"}', "error", inv)
    c.add("raw-newline-in-string", "control_chars", "a raw newline inside a string", b'{"x":"a\nb"}', "error", inv)
    c.add(
        "escaped-controls",
        "control_chars",
        "escaped control characters are fine",
        b'{"x":"\\u0000\\u001f\\n\\t"}',
        "good",
    )
    c.add(
        "lone-surrogate-escape",
        "control_chars",
        "an escaped lone surrogate",
        b'{"x":"\\ud800"}',
        "good",
        note="the JSON grammar allows it; the document is kept as sent",
    )
    c.add("bad-escape", "control_chars", "an invalid escape \\x", b'{"x":"\\x41"}', "error", inv)
    c.add("bad-unicode-escape", "control_chars", "\\u with non-hex digits", b'{"x":"\\uZZZZ"}', "error", inv)
    c.add(
        "whitespace-around",
        "control_chars",
        "spaces, tabs and newlines around the document",
        b' \t\n{"a":1}\r\n ',
        "good",
    )
    c.add("bom", "bom", "UTF-8 BOM before the document (not JSON per RFC 8259)", BOM + b'{"a":1}', "error", inv)
    c.add("bom-inside-string", "bom", "U+FEFF inside a string is fine", b'{"a":"' + BOM + b'x"}', "good")
    c.add("single-quotes", "truncated_json", "single quotes are not JSON", b"{'a':1}", "error", inv)
    c.add("unquoted-name", "truncated_json", "an unquoted member name", b"{a:1}", "error", inv)
    c.add("comment", "truncated_json", "a comment", b'{"a":1 /* c */}', "error", inv)
    c.add("trailing-comma", "truncated_json", "a trailing comma", b'{"a":1,}', "error", inv)
    c.add("two-docs", "truncated_json", "two objects back to back", b'{"a":1}{"b":2}', "error", trailing)
    c.add("trailing-garbage", "truncated_json", "an object then garbage", b'{"a":1} trailing', "error", trailing)
    c.add("array-then-more", "truncated_json", "an array then a number", b"[1,2] 3", "error", trailing)
    c.add("two-scalars", "truncated_json", "two numbers", b"1 2", "error", inv)
    c.add(
        "sentinel-forgery",
        "truncated_json",
        "tries to close the decoder's wrapping array early",
        b'1],["x"',
        "error",
        inv,
    )
    c.add("whitespace-only", "empty", "only whitespace", b"   ", "error", inv)
    for name, doc in {
        "null": b"null",
        "true": b"true",
        "string": b'"s"',
        "number": b"-0.0e+0",
        "empty-object": b"{}",
        "empty-array": b"[]",
        "empty-string": b'""',
    }.items():
        c.add(f"scalar-{name}", "empty", f"a lone JSON {name}: any JSON value is accepted", doc, "good")
    c.add("huge-string", "huge_values", "a 1 MB string member", None, "good", repeat=(b"x", HUGE, b'{"x":"', b'"}'))
    c.add("huge-array", "huge_values", "an array of 200k numbers", None, "good", repeat=(b"1,", 200_000, b"[", b"1]"))
    c.add(
        "huge-truncated",
        "huge_values",
        "1 MB string never closed",
        None,
        "error",
        inv,
        repeat=(b"x", HUGE, b'{"x":"', b""),
    )
    c.add(
        "huge-key",
        "huge_values",
        "a 1 MB Kafka key (not read under mode value)",
        b"{}",
        "good",
        key_repeat=(b"k", HUGE),
    )
    return c


def flatten_corpus() -> Corpus:
    """flatten, add_columns: an object per message, declared columns typed strictly, new valid keys become columns."""
    c = Corpus("flatten")
    inv = "invalid JSON in value"
    common(
        c,
        utf8="error",
        empty="error",
        null_value="error",
        null_reason="null value (tombstone) but commit_mode is append, not upsert",
    )
    for i, t in enumerate(TRUNCATED_JSON):
        c.add(f"truncated-{i}", "truncated_json", f"truncated document {t.decode()!r}", t, "error", inv)
    c.add(
        "deep-50",
        "deep_nesting",
        "extendinfo nested 50 deep becomes a JSON string",
        b'{"id":1,"extendinfo":' + deep(50) + b"}",
        "good",
    )
    c.add(
        "deep-5000",
        "deep_nesting",
        "extendinfo nested 5000 deep",
        b'{"id":1,"extendinfo":' + deep(5000) + b"}",
        "error",
        inv,
        note="beyond the nesting limit of Spark's JSON parser, as for json",
    )
    c.add("dup-declared", "duplicate_keys", "a declared column twice", b'{"id":1,"id":2}', "error", "duplicate key id")
    c.add(
        "dup-unknown",
        "duplicate_keys",
        "an undeclared key twice",
        b'{"id":1,"extra_d":1,"extra_d":2}',
        "error",
        "duplicate key extra_d",
    )
    c.add(
        "dup-nested",
        "duplicate_keys",
        "duplicates inside a nested object (kept as a JSON string)",
        b'{"id":1,"extendinfo":{"a":1,"a":2}}',
        "good",
        note='only top-level keys are checked; extendinfo keeps both members: {"a":1,"a":2}',
    )
    for t in NAN_INF:
        c.add(
            f"id-{t.decode().lower()}",
            "nan_infinity",
            f"id {t.decode()} (not JSON)",
            b'{"id":' + t + b"}",
            "error",
            inv,
        )
    c.add(
        "id-nan-string", "nan_infinity", 'id as the string "NaN"', b'{"id":"NaN"}', "error", "field id: expected long"
    )
    c.add("name-nan-string", "nan_infinity", '"NaN" in a string column', b'{"id":1,"name":"NaN"}', "good")
    c.add("id-beyond-long", "big_numbers", "id 2^63", b'{"id":9223372036854775808}', "error", "field id: expected long")
    c.add("id-max-long", "big_numbers", "id 2^63-1", b'{"id":9223372036854775807}', "good")
    c.add("id-min-long", "big_numbers", "id -2^63", b'{"id":-9223372036854775808}', "good")
    c.add(
        "id-30-digits",
        "big_numbers",
        "id with 30 digits",
        b'{"id":123456789012345678901234567890}',
        "error",
        "field id: expected long",
    )
    c.add("id-fraction", "big_numbers", "id 1.5", b'{"id":1.5}', "error", "field id: expected long")
    c.add(
        "id-exponent",
        "big_numbers",
        "id 1e2: a number written with an exponent is not an integer (as csv's 1e3)",
        b'{"id":1e2}',
        "error",
        "field id: expected long",
        note='the reason quotes Spark\'s rendering of the number: got "100.0"',
    )
    c.add("id-string-number", "big_numbers", "id as a JSON string holding a long", b'{"id":"123"}', "good")
    c.add("id-string-spaces", "big_numbers", 'id " 42 " (spaces are allowed)', b'{"id":" 42 "}', "good")
    c.add("id-hex", "big_numbers", 'id "0x1A"', b'{"id":"0x1A"}', "error", "field id: expected long")
    c.add("id-bool", "big_numbers", "id true", b'{"id":true}', "error", "field id: expected long")
    c.add("id-object", "big_numbers", "id an object", b'{"id":{"v":1}}', "error", "field id: expected long")
    c.add("id-null", "null_value", "id JSON null: a NULL column", b'{"id":null,"name":"x"}', "good")
    c.add(
        "new-big-int",
        "big_numbers",
        "an undeclared key holding an integer beyond a long (becomes string)",
        b'{"id":1,"big_n":123456789012345678901234567890}',
        "good",
    )
    c.add(
        "raw-control",
        "control_chars",
        "a raw control character inside a string",
        b'{"id":1,"name":"a\x01b"}',
        "error",
        inv,
    )
    c.add(
        "escaped-controls",
        "control_chars",
        "escaped NUL and controls in a string column",
        b'{"id":1,"name":"\\u0000\\u001b[31m"}',
        "good",
    )
    c.add("bom", "bom", "UTF-8 BOM before the object", BOM + b'{"id":1}', "error", inv)
    c.add("bom-in-value", "bom", "U+FEFF inside a string column", b'{"id":1,"name":"' + BOM + b'x"}', "good")
    c.add(
        "not-object-array",
        "truncated_json",
        "a top-level array",
        b'[{"id":1}]',
        "error",
        "expected a JSON object in value, got an array",
    )
    c.add(
        "not-object-number",
        "truncated_json",
        "a top-level number",
        b"42",
        "error",
        "expected a JSON object in value, got a number",
    )
    c.add(
        "not-object-string",
        "truncated_json",
        "a top-level string",
        b'"s"',
        "error",
        "expected a JSON object in value, got a string",
    )
    c.add("not-object-null", "truncated_json", "a top-level null", b"null", "error", "expected a JSON object in value")
    c.add(
        "two-objects",
        "truncated_json",
        "two objects back to back",
        b'{"id":1}{"id":2}',
        "error",
        "unexpected content after the end of the document",
    )
    c.add("single-quotes", "truncated_json", "single quotes", b"{'id':1}", "error", inv)
    c.add("empty-object", "empty", "an empty object: a row of NULLs", b"{}", "good")
    c.add("whitespace-only", "empty", "only whitespace", b"  \n", "error", inv)
    c.add(
        "key-hyphen",
        "duplicate_keys",
        "an undeclared key that cannot be a column name",
        b'{"id":1,"bad-key":1}',
        "error",
        "not a valid column name",
    )
    c.add("key-empty", "duplicate_keys", "an empty key", b'{"id":1,"":1}', "error", "not a valid column name")
    c.add(
        "key-unicode",
        "duplicate_keys",
        "a non-ASCII key",
        '{"id":1,"名前":"x"}'.encode(),
        "error",
        "not a valid column name",
    )
    c.add(
        "key-case",
        "duplicate_keys",
        "a key differing only in case from a column",
        b'{"id":1,"ID":2}',
        "error",
        "differs only in case",
    )
    c.add("key-reserved", "duplicate_keys", "a reserved key", b'{"id":1,"offset":5}', "error", "reserved column name")
    c.add(
        "key-reserved-null",
        "null_value",
        "a reserved key holding null (nothing lost)",
        b'{"id":1,"pt":null}',
        "good",
        note="a key whose only values are null gets no column and is not an error",
    )
    c.add(
        "new-column", "duplicate_keys", "a valid undeclared key becomes a column", b'{"id":1,"region_new":"eu"}', "good"
    )
    c.add(
        "huge-name",
        "huge_values",
        "a 1 MB string column",
        None,
        "good",
        repeat=(b"x", HUGE, b'{"id":1,"name":"', b'"}'),
    )
    c.add(
        "huge-extendinfo",
        "huge_values",
        "a 200k-element array in extendinfo",
        None,
        "good",
        repeat=(b"1,", 200_000, b'{"id":1,"extendinfo":[', b"1]}"),
    )
    c.add(
        "huge-key-count",
        "huge_values",
        "an object with 2000 keys, one a bad name",
        b"{" + b",".join(b'"k-%d":%d' % (i, i) for i in range(2000)) + b"}",
        "error",
        "not a valid column name",
    )
    c.add(
        "huge-key",
        "huge_values",
        "a 1 MB Kafka key (not read under mode value)",
        b'{"id":1}',
        "good",
        key_repeat=(b"k", HUGE),
    )
    return c


def csv_corpus() -> Corpus:
    """csv, columns id bigint, name string, region string; RFC 4180 quoting, strict conversions."""
    c = Corpus("csv")
    common(
        c,
        utf8="error",
        empty="error",
        null_value="error",
        null_reason="null value (tombstone) but commit_mode is append, not upsert",
    )
    cnt = "expected 3 CSV columns"
    idl = "field id: expected long"
    c.add("example", "csv_quoting", "the worked example", b"1103,zhangsan,china", "good")
    c.add("quoted-delimiter", "csv_quoting", "a delimiter inside quotes", b'1,"zhang,san",china', "good")
    c.add("doubled-quote", "csv_quoting", "a doubled quote inside quotes", b'1,"say ""hi""",x', "good")
    c.add("quoted-empty", "csv_quoting", "a quoted empty string field", b'1,"",x', "good")
    c.add("quoted-id", "csv_quoting", "a quoted number", b'"7",a,b', "good")
    c.add("quoted-empty-id", "csv_quoting", 'a quoted empty id is "", not NULL', b'"",a,b', "error", idl)
    c.add(
        "unterminated",
        "csv_quoting",
        "an opening quote never closed",
        b'1,"abc,x',
        "error",
        "unterminated quoted field in CSV value",
    )
    c.add("lone-quote", "csv_quoting", "a lone quote", b'"', "error", "unterminated quoted field in CSV value")
    c.add(
        "quote-mid-field",
        "csv_quoting",
        "a quote inside an unquoted field",
        b'1,ab"c,x',
        "good",
        note='a quote that does not open a field is text: name ab"c',
    )
    c.add(
        "text-after-quote",
        "csv_quoting",
        "text after the closing quote",
        b'1,"a"b,x',
        "good",
        note='a malformed quoted field is taken literally, quotes included, up to the delimiter: name "a"b',
    )
    c.add(
        "text-after-quoted-delimiter",
        "csv_quoting",
        "text after a closing quote, with a delimiter inside the quotes",
        b'1,"a,b"c,x',
        "good",
        note='taken literally up to the next delimiter outside the quotes: name "a,b"c',
    )
    c.add(
        "space-before-quote",
        "csv_quoting",
        "a space before an opening quote",
        b'1, "a",x',
        "good",
        note="a leading space keeps the field unquoted: name ' \"a\"'",
    )
    c.add(
        "quoted-newline",
        "csv_quoting",
        "a newline inside quotes",
        b'1,"two\nlines",x',
        "good",
        note="a quoted line break is part of the field",
    )
    c.add(
        "unquoted-newline",
        "csv_quoting",
        "two records in one message",
        b"1,a,b\n2,c,d",
        "error",
        "expected 3 CSV columns, got 5",
        note="a message is one record: the line break is field content, so b and 2 make one field",
    )
    c.add(
        "trailing-crlf",
        "csv_quoting",
        "a record ending in CR LF",
        b"1,a,b\r\n",
        "good",
        note="lands as a row, but the unquoted last field keeps the line break (region 'b\\r\\n'; "
        "a quoted one does not): see docs/reliability.md",
    )
    c.add(
        "backslash",
        "csv_quoting",
        "a backslash is not an escape: three fields, name a\\",
        b"1,a\\,b",
        "good",
    )
    c.add("too-few", "csv_quoting", "two fields", b"1,a", "error", "expected 3 CSV columns, got 2")
    c.add("too-many", "csv_quoting", "four fields", b"1,a,b,c", "error", "expected 3 CSV columns, got 4")
    c.add(
        "trailing-delimiter", "csv_quoting", "a trailing delimiter", b"1,a,b,", "error", "expected 3 CSV columns, got 4"
    )
    c.add("one-space", "csv_quoting", "a single space", b" ", "error", "expected 3 CSV columns, got 1")
    c.add("delimiters-only", "empty", "three empty fields: all NULL", b",,", "good")
    c.add("thousand-fields", "huge_values", "1000 fields", b",".join(b"%d" % i for i in range(1000)), "error", cnt)
    c.add("id-empty", "null_value", "an empty id is NULL", b",a,b", "good")
    c.add("id-text", "csv_quoting", "id not a number", b"abc,a,b", "error", idl)
    c.add("id-fraction", "big_numbers", "id 1.5", b"1.5,a,b", "error", idl)
    c.add("id-exponent", "big_numbers", "id 1e3", b"1e3,a,b", "error", idl)
    c.add("id-beyond-long", "big_numbers", "id 2^63", b"9223372036854775808,a,b", "error", idl)
    c.add("id-max-long", "big_numbers", "id 2^63-1", b"9223372036854775807,a,b", "good")
    c.add("id-min-long", "big_numbers", "id -2^63", b"-9223372036854775808,a,b", "good")
    c.add("id-400-digits", "big_numbers", "id with 400 digits", b"9" * 400 + b",a,b", "error", idl)
    c.add("id-spaces", "big_numbers", "id with spaces around", b" 42 ,a,b", "good")
    c.add("id-plus", "big_numbers", "id +5: an explicit sign is an integer", b"+5,a,b", "good", note="id 5")
    c.add("id-hex", "big_numbers", "id 0x10", b"0x10,a,b", "error", idl)
    c.add("id-fullwidth", "big_numbers", "id in full-width digits", "\uff11\uff12\uff13,a,b".encode(), "error", idl)
    c.add("id-leading-zeros", "big_numbers", "id 007", b"007,a,b", "good")
    for t in NAN_INF:
        c.add(f"id-{t.decode().lower()}", "nan_infinity", f"id {t.decode()}", t + b",a,b", "error", idl)
    c.add("name-nan", "nan_infinity", "NaN in a string column", b"1,NaN,b", "good")
    c.add("json-in-field", "truncated_json", "truncated JSON in a string column", b'1,"{""a"":",b', "good")
    c.add(
        "deep-json-in-field",
        "deep_nesting",
        "deeply nested JSON text, quoted, in a string column",
        b'1,"' + deep(500).replace(b'"', b'""') + b'",b',
        "good",
    )
    c.add("dup-columns-text", "duplicate_keys", "the same value in every field", b"1,1,1", "good")
    c.add(
        "bom-start",
        "bom",
        "a UTF-8 BOM before the id",
        BOM + b"1,a,b",
        "error",
        idl,
        note="a BOM is part of the first field, like any character, so the id does not convert",
    )
    c.add("bom-in-name", "bom", "U+FEFF in a string column", b"1," + BOM + b"a,b", "good")
    c.add("control-in-name", "control_chars", "C0 controls in a string column", b"1,a\x01\x02\x1bb,c", "good")
    c.add(
        "nul-in-name",
        "control_chars",
        "a NUL in a string column",
        b"1,a\x00b,c",
        "good",
        note="the NUL is kept in the string",
    )
    c.add(
        "nul-start",
        "control_chars",
        "a record starting with NUL",
        b"\x001,a,b",
        "good",
        note="not a comment: number conversions ignore control characters around the digits as they do spaces (id 1)",
    )
    c.add(
        "tab-delimited", "csv_quoting", "tabs instead of commas", b"1\ta\tb", "error", "expected 3 CSV columns, got 1"
    )
    c.add("huge-name", "huge_values", "a 1 MB string field", None, "good", repeat=(b"x", HUGE, b"1,", b",b"))
    c.add(
        "huge-quoted",
        "huge_values",
        "a 1 MB quoted field full of doubled quotes",
        None,
        "good",
        repeat=(b'""', HUGE // 2, b'1,"', b'",b'),
    )
    c.add(
        "huge-key",
        "huge_values",
        "a 1 MB Kafka key (not read under mode value)",
        b"1,a,b",
        "good",
        key_repeat=(b"k", HUGE),
    )
    return c


def build() -> dict[str, list[str]]:
    """Every corpus file's lines."""
    corpora = [text_corpus(), csv_corpus(), json_corpus(), flatten_corpus(), binary_corpus()]
    return {c.fmt: list(c.lines()) for c in corpora}


def main(directory: Path = CORPUS_DIR) -> None:
    for fmt, lines in build().items():
        (directory / f"{fmt}.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
