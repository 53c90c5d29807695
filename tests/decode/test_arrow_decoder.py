"""The Arrow decoder: it certifies the records it can prove it decodes exactly as Spark does, leaves
every other record to the Spark decoder, and the two give identical rows and error rows.

The ``run`` fixture decodes every batch with both decoders and compares them, so each test here
(and every other decode test on json, csv and flatten) is also an identity test. What this file
adds: the Arrow decoder really does the work on ordinary data (a test of identity alone would pass
if it certified nothing), a bad record costs only itself, the hostile corpus and generated
batches agree on both paths, and the edges where the parsers could differ are left to Spark.
"""

from __future__ import annotations

import dataclasses
import json
import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings

from kafka_iceberg.decode.arrow import (
    AUTO_ARROW,
    Layout,
    certify_batch,
    convert_text,
    mistyped_found,
    nested_found,
    uses_arrow,
)
from kafka_iceberg.decode.sql import convert
from kafka_iceberg.spec.load import arrow_decoder_unsupported as unsupported
from kafka_iceberg.spec.load import load_pipeline, table_problems
from kafka_iceberg.spec.model import TableSpec
from tests.corpus import load, load_target
from tests.decode.conftest import Msg, table, with_decoder
from tests.support import hostile
from tests.support.parses import counted_parses

REPO = Path(__file__).resolve().parents[2]
FLAT = {
    "id": "long",
    "n": "int",
    "amount": "double",
    "ok": "boolean",
    "name": "string",
    "ts": "timestamp",
    "day": "date",
    "price": "decimal(10,2)",
    "f": "float",
}


def flat_doc(rng: random.Random, i: int) -> bytes:
    doc: dict[str, Any] = {
        "id": i,
        "n": rng.randrange(-(2**31), 2**31),
        "amount": rng.choice([0.1, 1e-7, 123456.789, -2.5, 1e300, 7, 0]),
        "ok": rng.random() < 0.5,
        "name": rng.choice(["plain", 'quote " and \\ backslash', "ünï©ødé", "tab\tnewline\n", "/slash", ""]),
        "ts": f"2026-01-0{rng.randrange(1, 10)}T10:00:0{rng.randrange(10)}Z",
        "day": "2026-02-03",
        "price": rng.choice(["12.34", "0.5", "-7"]),
        "f": rng.choice(["1.5", "3.4e38", "-0.25"]),
    }
    for key in rng.sample(sorted(doc), rng.randrange(3)):  # absent or null: both NULL
        if key != "id":
            doc[key] = None if rng.random() < 0.5 else doc.pop(key)
    return json.dumps(doc, ensure_ascii=rng.random() < 0.5, separators=(",", ":")).encode()


def csv_line(rng: random.Random, i: int) -> bytes:
    comment = rng.choice(["plain", '"with, comma"', '"say ""hi"""', "", "ünï"])
    return f"{i},2026-01-05 10:00:00,{rng.randrange(10**6)},{rng.uniform(-5, 5):.3f},{comment}".encode()


CSV_COLUMNS = {"id": "long", "ts": "timestamp", "uid": "long", "amount": "double", "comment": "string"}


def spec_for(fmt: str, decoder: str = "arrow") -> TableSpec:
    if fmt == "flatten":
        return table(fmt, schema={"columns": FLAT}, schema_evolution="strict", source_decoder=decoder)
    if fmt == "csv":
        return table(fmt, schema={"columns": CSV_COLUMNS}, source_decoder=decoder)
    return table(fmt, source_decoder=decoder)


def good_messages(fmt: str, n: int, seed: int = 7) -> list[Msg]:
    rng = random.Random(seed)
    make = csv_line if fmt == "csv" else flat_doc
    return [Msg(f"k{i}", make(rng, i)) for i in range(n)]


def certified(result: Any) -> int:
    return int(result.decoded.parsed.where("_ki_certified").count())


@pytest.mark.parametrize("fmt", ["json", "flatten", "csv"])
def test_ordinary_records_are_all_decoded_by_arrow(run, fmt):
    messages = good_messages(fmt, 400)
    result = run(spec_for(fmt), messages)
    assert len(result.rows) == 400 and result.errors == []
    assert certified(result) == 400


@pytest.mark.parametrize(
    ("fmt", "bad"),
    [
        ("json", [b'{"id": 1', b"[1, 2", b'{"a":1}{"b":2}']),
        ("flatten", [b'{"id": "x"}', b'{"id": 1, "promo": "y"}', b'{"id": 2, "id": 3}', b'{"id": 1.5}']),
        ("csv", [b"1,2", b"1,2,3,4,5,6", b'1,"unterminated,3,4,5']),
    ],
)
def test_a_bad_record_costs_only_itself(run, fmt, bad):
    messages = good_messages(fmt, 600)
    for i, value in enumerate(bad):
        messages.insert(100 + 150 * i, Msg("bad", value))
    result = run(spec_for(fmt), messages)
    wrong = {m.offset for m in result.errors} if fmt != "json" else None
    assert len(result.rows) + len(result.errors) == len(messages)
    assert certified(result) == len(messages) - len(bad)
    if wrong is not None:
        assert len(wrong) == len(bad)


def test_a_bad_record_far_into_a_batch_is_reparsed_with_part_of_its_block_only(monkeypatch):
    """JSON is read in blocks and the blocks before a failing one are kept: the rows a failed read
    throws away are at most those of the bad record's block, not everything before it. Blocks are
    large until the first failure (a clean batch reads fastest so), small after it."""
    from kafka_iceberg.decode import arrow

    rng = random.Random(3)
    values = [flat_doc(rng, i) for i in range(12000)]  # about 1.8 MB: two large blocks, many small ones
    bad = [9000, 9900, 9901, 11500]  # the first in the second large block
    for i in bad:
        values[i] = values[i].replace(b'":', b'" ', 1)  # braces intact: only the parse finds it
    thrown_away: list[int] = []
    blocks: list[int] = []
    reader_of = arrow._reader

    def counting(layout: Layout, nested: tuple[str, ...] = ()) -> Any:
        read = reader_of(layout, nested)

        def counted(buffer: pa.Buffer, block: int) -> Any:
            blocks.append(block)
            try:
                return read(buffer, block)
            except Exception as exc:  # the rows read before the bad one that the caller cannot keep
                match = arrow._ROW.search(str(getattr(exc, "cause", exc)))
                kept = exc.rows if isinstance(exc, arrow._PartialParse) else 0
                thrown_away.append(int(match.group(1)) if match else 0)
                assert kept >= 0
                raise

        return counted

    monkeypatch.setattr(arrow, "_reader", counting)
    batch = pa.RecordBatch.from_pydict({"value": pa.array(values, pa.binary())})
    checked = certify_batch(batch, Layout(fmt="json", source="value"))
    ok = checked.column(arrow.OK).to_pylist()
    assert [i for i, v in enumerate(ok) if not v] == bad
    assert blocks[0] == arrow._JSON_FIRST_BLOCK and set(blocks[1:]) == {arrow._JSON_BLOCK}
    shortest = min(len(v) for v in values)
    per_first_block, per_block = arrow._JSON_FIRST_BLOCK // shortest + 1, arrow._JSON_BLOCK // shortest + 1
    assert len(thrown_away) > 1 and thrown_away[0] <= per_first_block, thrown_away
    assert max(thrown_away[1:]) <= per_block, thrown_away
    assert sum(thrown_away) < bad[0]  # one read in a single block threw away 9000 + 900 + ...


def test_a_failing_block_after_blocks_that_cannot_be_kept_marks_no_innocent_record():
    """A parse error names its row from the start of its block. When the blocks before it cannot be
    kept (here a key holding only null in the first block), that row must not be read as a row of
    the whole buffer: only the bad record and the one with the unknown key are left to Spark."""
    from kafka_iceberg.decode import arrow

    values = [json.dumps({"id": i, "name": "x" * 150}).encode() for i in range(3000)]  # several blocks
    values[5] = json.dumps({"id": 5, "name": "n", "promo": None}).encode()
    values[2000] = values[2000].replace(b'":', b'" ', 1)
    layout = Layout(fmt="flatten", source="value", columns=(("id", "long"), ("name", "string")))
    checked = certify_batch(pa.RecordBatch.from_pydict({"value": pa.array(values, pa.binary())}), layout)
    assert arrow._JSON_BLOCK < 2000 * 160  # the bad record is not in the first block
    assert [i for i, ok in enumerate(checked.column(arrow.OK).to_pylist()) if not ok] == [5, 2000]


NESTED_JACKSON_KEEPS = [  # Jackson re-serialises these to the text sent: certified
    {"a": [1, "x y", True, None, {}], "b": "ünï / ©"},
    [],
    ["one", "two"],
    {"deep": {"er": [[{"k": -12}]]}},
    {"big": 123456789012345678901234567890},
]
NESTED_JACKSON_CHANGES = [  # ... and these not: left to Spark
    '{"a":[1.50]}',  # 1.5
    '{"a":1e3}',  # 1000.0
    '{"a":-0}',  # 0
    '{"a": 1}',  # {"a":1}
    '{"a":"\\u00e9"}',  # é
    '{"a":"q\\"q"}',  # Jackson re-escapes: kept as sent, but left to Spark with every backslash
    '[[[[[[[["too deep for the expressions"]]]]]]]]',
]


def test_nested_values_in_string_columns_are_certified_where_jackson_prints_them_back_unchanged(run):
    """Spark writes a nested value as Jackson re-serialises it; where that is the text as sent (compact,
    no escape, no fraction, exponent or -0), Arrow's path reads the text itself, and the rows are the
    Spark decoder's (``run`` compares them)."""
    spec = table(
        "flatten",
        schema={"columns": {"id": "long", "ctx": "string", "tags": "string", "name": "string"}},
        schema_evolution="strict",
        source_decoder="arrow",
    )
    keeps = [
        Msg("k", json.dumps({"id": i, "ctx": v, "tags": ["a"], "name": "n"}, ensure_ascii=False, separators=(",", ":")))
        for i, v in enumerate(NESTED_JACKSON_KEEPS)
    ]
    changes = [Msg("k", f'{{"id":{100 + i},"ctx":{v},"tags":["a"]}}') for i, v in enumerate(NESTED_JACKSON_CHANGES)]
    scalars = [Msg("k", b'{"id":200,"ctx":"flat","tags":null}'), Msg("k", b'{"id":201,"ctx":12,"tags":[true]}')]
    doubled = [Msg("k", b'{"id":300,"ctx":{},"ctx":[]}'), Msg("k", b'{"id":301,"ctx":{},"promo":[]}')]
    result = run(spec, keeps + changes + scalars + doubled)
    rows = {row["id"]: row for row in result.rows}
    assert len(rows) == len(keeps) + len(changes) + len(scalars)
    assert rows[0]["ctx"] == '{"a":[1,"x y",true,null,{}],"b":"ünï / ©"}' and rows[0]["tags"] == '["a"]'
    assert rows[100]["ctx"] == '{"a":[1.5]}' and rows[103]["ctx"] == '{"a":1}'
    assert rows[200]["ctx"] == "flat" and rows[201]["ctx"] == "12" and rows[201]["tags"] == "[true]"
    assert len(result.errors) == 2  # a duplicate key and an unknown one
    assert certified(result) == len(keeps) + len(scalars)


def _nested_value(rng: random.Random, depth: int = 0) -> Any:
    kind = rng.randrange(9 if depth < 4 else 5)
    if kind == 0:
        return rng.choice([0, 7, -12, 2**70, -(2**63)])
    if kind == 1:
        return rng.choice([1.5, 0.1, 1e-7, 2.0, -0.0, 1e300])
    if kind == 2:
        return rng.choice(["x", "", "ünï", 'q"q', "back\\slash", "tab\t", "/", "\u2028", "😀", "\x7f\x85", "€"])
    if kind == 3:
        return rng.choice([True, False, None])
    if kind == 4:
        return "plain words"
    if kind < 7:
        return [_nested_value(rng, depth + 1) for _ in range(rng.randrange(4))]
    return {rng.choice(["a", "b", "ünï", "k k"]): _nested_value(rng, depth + 1) for _ in range(rng.randrange(4))}


def test_generated_nested_values_are_written_as_sparks_decoder_writes_them(run):
    """Hundreds of nested values of every kind, compact or spaced, escaped or not: the rows are the
    Spark decoder's (``run`` compares them), and the compact ones without escapes are Arrow's."""
    spec = table(
        "flatten",
        schema={"columns": {"id": "long", "ctx": "string", "tags": "string"}},
        schema_evolution="strict",
        source_decoder="arrow",
    )
    rng = random.Random(11)
    messages = []
    for i in range(600):
        doc = {"id": i, "ctx": _nested_value(rng, 1), "tags": [_nested_value(rng, 2)]}
        separators = (",", ":") if rng.random() < 0.8 else (", ", ": ")
        messages.append(Msg("k", json.dumps(doc, ensure_ascii=rng.random() < 0.3, separators=separators)))
    result = run(spec, messages)
    assert len(result.rows) == 600 and result.errors == []
    assert 200 < certified(result) < 600


def _corpus_spec(fmt: str) -> TableSpec:
    target = load_target(fmt)
    pipeline = load_pipeline(REPO / target.pipeline)
    spec = next(t for t in pipeline.tables if t.identifier == target.table)
    if fmt == "flatten":
        spec = spec.model_copy(update={"schema_evolution": "strict"})
    return with_decoder(spec, "arrow")


@pytest.mark.parametrize("fmt", ["json", "flatten", "csv"])
def test_the_hostile_corpus_decodes_identically_on_both_paths(run, fmt):
    messages = [Msg(m.key, m.value) for m in load(fmt)]
    result = run(_corpus_spec(fmt), messages)  # run compares with the Spark decoder
    assert len(result.rows) + len(result.errors) == len(messages)


GENERATED_SPECS = {
    "json": lambda: table("json", source_decoder="arrow"),
    "flatten": lambda: table(
        "flatten",
        schema={"columns": {"id": "long", "name": "string", "extendinfo": "string"}},
        schema_evolution="strict",
        source_decoder="arrow",
    ),
    "csv": lambda: table(
        "csv", schema={"columns": {"id": "long", "name": "string", "amount": "double"}}, source_decoder="arrow"
    ),
}


@pytest.mark.parametrize("fmt", ["json", "flatten", "csv"])
def test_generated_hostile_batches_decode_identically_on_both_paths(run, fmt):
    spec = GENERATED_SPECS[fmt]()

    @settings(max_examples=4, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
    @given(hostile.batches(fmt, max_size=120))
    def check(batch: list[tuple[bytes | None, bytes | None]]) -> None:
        result = run(spec, [Msg(k, v) for k, v in batch])
        assert len(result.rows) + len(result.errors) == len(batch)

    check()


# -- no JVM: what the pre-checks leave to Spark ---------------------------------------------------
FLATTEN_LAYOUT = Layout(fmt="flatten", source="v", columns=(("id", "long"), ("d", "double"), ("s", "string")))


@pytest.mark.parametrize(
    ("value", "why"),
    [
        (b'{"d":NaN}', "NaN is not JSON; Arrow reads it"),
        (b'{"d":Infinity}', "Infinity is not JSON; Arrow reads it"),
        (b'{"d":-0}', "Spark reads the integer -0 as 0.0, Arrow as -0.0"),
        (b'{"d":1e999}', "overflows a double"),
        (b'\xef\xbb\xbf{"id":1}', "a BOM; Arrow skips one at the start of its buffer"),
        (b' {"id":1}', "surrounding whitespace (kept simple: left to Spark)"),
        (b'{"id":1}{"id":2}', "two documents; Arrow reads two rows"),
        (b'{"id":1,"x":null}', "a key that is no column, even holding null"),
        (b'{"id":1,"id":1}', "a duplicate key"),
        (b'{"s":{},"s":"x"}', "a duplicate key holding an object"),
        (b'{"s":"x","s":"y"}', "a duplicate string key"),
        (b'{"s":"\xff"}', "invalid UTF-8, which Arrow's JSON reader passes through"),
        (b'{"s":{"a":1.5}}', "a nested value Jackson prints differently (1.5 is kept, 1.50 would not be)"),
        (b'{"s":{"a":1},"x":2}', "a nested value, and a key that is no column"),
        (b'{"s":12}', "a number in a string column (Spark writes Jackson's rendering)"),
        (b'{"id":1e2}', "an exponent in a long column"),
        (b'{"s":"a\nb"}', "a raw line break"),
        (b"", "an empty message"),
        (None, "a tombstone"),
    ],
)
@pytest.mark.parametrize("nested", [(), ("s",)], ids=["looked-for", "found-earlier"])
def test_edges_where_the_parsers_could_differ_are_left_to_spark(value, why, nested):
    """Also where ``s`` is read by the expressions from the start, as once an earlier batch held an
    object in it (``Layout.nested``)."""
    good = b'{"id":7,"d":1.5,"s":"x"}'
    batch = pa.RecordBatch.from_arrays([pa.array([good, value, good], pa.binary())], names=["v"])
    out = certify_batch(batch, dataclasses.replace(FLATTEN_LAYOUT, nested=nested))
    if nested and value == b'{"s":12}':  # read by the expressions: Jackson prints 12 back unchanged
        assert out.column("_ki_certified").to_pylist() == [True] * 3 and out.column("_ki_a2")[1].as_py() == "12"
        return
    assert out.column("_ki_certified").to_pylist() == [True, False, True], why
    assert out.column("_ki_a0").to_pylist()[:: 1 if not nested else 2] == ([7, None, 7] if not nested else [7, 7])


def _flatten_batch(docs: list[Any]) -> pa.RecordBatch:
    values = [d if isinstance(d, bytes) else json.dumps(d, separators=(",", ":")).encode() for d in docs]
    return pa.RecordBatch.from_arrays([pa.array(values, pa.binary())], names=["v"])


@pytest.mark.parametrize("nested", [(), ("a", "b")], ids=["looked-for", "found-earlier"])
def test_a_nested_value_holding_another_nested_columns_key_is_left_to_spark(nested):
    """``b`` is read where its key is first found: in ``{"a":{"b":[1]}}`` that is inside ``a``'s
    value, and the keys' count agrees (one ``a``, one ``b``), so only the check that no nested value
    holds a nested key keeps ``[1]`` out of ``b``."""
    layout = Layout(
        fmt="flatten", source="v", columns=(("id", "long"), ("a", "string"), ("b", "string")), nested=nested
    )
    out = certify_batch(_flatten_batch([{"id": 1, "a": [2], "b": {"c": 3}}, {"id": 2, "a": {"b": [1]}}]), layout)
    assert out.column("_ki_certified").to_pylist() == [True, False]
    assert out.column("_ki_a1")[0].as_py() == "[2]" and out.column("_ki_a2")[0].as_py() == '{"c":3}'


def test_string_columns_found_holding_objects_are_reported_and_read_as_found_in_later_batches():
    """A batch reports the string columns it found objects or arrays in; a later batch given them
    (``Layout.nested``) does not look for them again but reads them with the expressions, which
    take a string as Arrow does, except one with a backslash (Jackson re-escapes it): Spark's."""
    found = certify_batch(_flatten_batch([{"id": 1, "s": {"a": [1]}}, {"id": 2, "s": "x"}]), FLATTEN_LAYOUT)
    assert nested_found(found) == ("s",) and found.column("_ki_a2").to_pylist() == ['{"a":[1]}', "x"]
    assert nested_found(certify_batch(_flatten_batch([{"id": 1, "s": "x"}]), FLATTEN_LAYOUT)) == ()

    later = _flatten_batch([{"id": 2, "s": "x"}, b'{"id":3,"s":"q\\"q"}', {"id": 4, "s": None}, {"id": 5}])
    learned = certify_batch(later, FLATTEN_LAYOUT.reading_nested({"s", "d", "gone"}))  # only string columns
    assert nested_found(learned) == ("s",)
    assert learned.column("_ki_certified").to_pylist() == [True, False, True, True]
    assert Layout(fmt="json", source="v", columns=(("s", "string"),)).reading_nested({"s"}).nested == ()
    assert learned.column("_ki_a2").filter(learned.column("_ki_certified")).to_pylist() == ["x", None, None]
    looked_for = certify_batch(later, FLATTEN_LAYOUT)  # the escaped string is Arrow's when s is parsed
    assert looked_for.column("_ki_certified").to_pylist() == [True] * 4
    assert looked_for.column("_ki_a2").to_pylist() == ["x", 'q"q', None, None]


@pytest.mark.parametrize("first", [0, 6000], ids=["first-block", "later-block"])
def test_a_string_column_holding_an_object_is_found_by_the_parse_wherever_it_first_does(first):
    """Arrow's reader refuses the object and names its column; the parse starts again reading that
    column as nested, also when the object is past the first block read (about 1.3 MB of records
    before it), and the batch comes out as one given the column from the start."""
    docs: list[Any] = [{"id": i, "d": 0.5, "s": "x" * 200} for i in range(6003)]
    docs[first]["s"] = {"a": [1]}
    docs[first + 1]["s"] = ["b"]
    found = certify_batch(_flatten_batch(docs), FLATTEN_LAYOUT)
    given = certify_batch(_flatten_batch(docs), FLATTEN_LAYOUT.reading_nested({"s"}))
    assert nested_found(found) == ("s",)
    assert found.column("_ki_certified").to_pylist() == [True] * len(docs)
    assert found.column("_ki_a2")[first : first + 3].to_pylist() == ['{"a":[1]}', '["b"]', "x" * 200]
    assert found.to_pydict() == given.to_pydict()


def test_a_batch_holding_nested_values_certifies_the_same_whether_its_columns_were_found_earlier():
    """Generated nested values (every kind, compact or spaced, escaped or not, keys repeated): the
    same records certified with the same values, whether the batch finds ``ctx`` and ``tags`` or is
    given them."""
    rng = random.Random(12)
    docs: list[Any] = []
    for i in range(600):
        doc = {"id": i, "ctx": _nested_value(rng, 1), "tags": [_nested_value(rng, 2)]}
        separators = (",", ":") if rng.random() < 0.8 else (", ", ": ")
        text = json.dumps(doc, ensure_ascii=rng.random() < 0.3, separators=separators)
        if rng.random() < 0.05:  # a key twice
            text = text[:-1] + f',"{rng.choice(["ctx", "tags"])}":{json.dumps(_nested_value(rng, 1))}}}'
        docs.append(text.encode())
    layout = Layout(fmt="flatten", source="v", columns=(("id", "long"), ("ctx", "string"), ("tags", "string")))
    looked_for = certify_batch(_flatten_batch(docs), layout)
    given_them = certify_batch(_flatten_batch(docs), dataclasses.replace(layout, nested=("ctx", "tags")))
    assert nested_found(looked_for) == nested_found(given_them) == ("ctx", "tags")
    assert looked_for.to_pydict() == given_them.to_pydict()
    assert 200 < sum(given_them.column("_ki_certified").to_pylist()) < 570


QTY_LAYOUT = Layout(fmt="flatten", source="v", columns=(("id", "long"), ("qty", "int"), ("s", "string")))


def test_a_key_met_holding_a_value_of_another_type_is_left_out_of_the_parse_from_then_on(monkeypatch):
    """A string in an ``int`` column made Arrow's reader fail, the parse split its span and read
    the rest in small blocks, at each such record of the batch (80 here). The first now names the
    key and type: the batch is parsed again without the records holding one, and a later batch
    given the pair (``Layout.mistyped``) leaves them out at once. Same records certified, same values."""
    docs = [{"id": i, "qty": "12" if i % 25 == 0 else i, "s": "x" * 100} for i in range(2000)]
    good = [i % 25 != 0 for i in range(2000)]
    parses = counted_parses(monkeypatch)
    first = certify_batch(_flatten_batch(docs), QTY_LAYOUT)
    assert first.column("_ki_certified").to_pylist() == good
    qty = first.column("_ki_a1").filter(first.column("_ki_certified"))
    assert qty.to_pylist() == [i for i in range(2000) if good[i]]
    assert mistyped_found(first) == (("qty", "string"),)
    assert parses == [False, True]  # one failed parse, then the batch without the 80
    parses.clear()
    later = certify_batch(_flatten_batch(docs), QTY_LAYOUT.mistyping(mistyped_found(first)))
    assert parses == [True]
    assert later.to_pydict() == first.to_pydict() and mistyped_found(later) == (("qty", "string"),)


def test_a_flatten_string_column_holding_a_number_is_not_left_out_as_it_may_be_read_nested():
    """In a flatten ``string`` column a number is certified once the column is read by the
    expressions (found holding an object): such a key is never left out of the parse."""
    docs = [{"id": 1, "qty": 1, "s": 12}, {"id": 2, "qty": 2, "s": {"a": 1}}, {"id": 3, "qty": 3, "s": "x"}]
    out = certify_batch(_flatten_batch(docs), QTY_LAYOUT)
    assert out.column("_ki_certified").to_pylist() == [True, True, True] and mistyped_found(out) == ()
    assert out.column("_ki_a2").to_pylist() == ["12", '{"a":1}', "x"]


def test_records_holding_a_mistyped_key_are_found_at_any_spacing_and_depth_never_in_text():
    """A raw ``"`` only delimits in JSON, so ``"qty"`` and a colon is a key: at the top or nested (a
    record then left to Spark needlessly, which costs only time), never inside a string value."""
    from kafka_iceberg.decode.arrow import _mistyped

    values = [
        (b'{"qty":"1"}', True),
        (b'{"qty" :\t "1"}', True),
        (b'{"a":{"qty":"1"}}', True),
        (b'{"qty":1}', False),
        (b'{"note":"\\"qty\\":\\"1\\""}', False),
        (b'{"qtyx":"1","xqty":"1"}', False),
        (b'{"unit price.":"1"}', True),
        (b'{"unit price.":true,"qty":[1]}', False),
        (None, False),
    ]
    found = _mistyped(pa.array([v for v, _ in values], pa.binary()), [("qty", "string"), ("unit price.", "string")])
    assert found.tolist() == [expected for _, expected in values]


def test_records_of_a_key_holding_another_type_are_spark_s_and_the_others_arrow_s(run):
    """End to end: the records whose ``n`` holds a string or an array are decoded by Spark (``run``
    compares both decoders' rows and errors), every other record by Arrow."""
    columns = {"id": "long", "n": "int", "name": "string"}
    spec = table("flatten", schema={"columns": columns}, schema_evolution="strict", source_decoder="arrow")
    odd = {i: "7" if i % 2 else [7] for i in range(0, 600, 40)}
    messages = [Msg(f"k{i}", json.dumps({"id": i, "n": odd.get(i, i), "name": "x"})) for i in range(600)]
    result = run(spec, messages)
    assert len(result.rows) + len(result.errors) == 600
    assert certified(result) == 600 - len(odd)


def test_csv_edges_are_left_to_spark():
    layout = Layout(fmt="csv", source="v", columns=(("a", "string"), ("b", "string")))
    values = [b"x,y", b'"x",y', b'x"y,z', b'"x"y,z', b' "x",y', b'"",y', b"x,y\r", b"\xef\xbb\xbfx,y", b"x,y,z", b"x"]
    batch = pa.RecordBatch.from_arrays([pa.array(values, pa.binary())], names=["v"])
    out = certify_batch(batch, layout)
    assert out.column("_ki_certified").to_pylist() == [True, True] + [False] * 8
    assert out.column("_ki_a0").to_pylist()[:2] == ["x", "x"]


def _pre_checks_in_python(values: list[bytes | None], layout: Layout) -> list[bool]:
    """The pre-checks as the module docstring states them, one payload at a time in plain Python."""
    import re

    def json_candidate(v: bytes) -> bool:
        numbers = max((len(run) for run in re.findall(rb"[-+.eE0-9]+", v)), default=0)
        deep = v.count(b"[") + v.count(b"{") >= 1000
        return (
            v.startswith(b"{")
            and v.endswith(b"}")
            and not re.search(rb"[\x00-\x08\x0a-\x1f]|NaN|Infinity", v)
            and not (len(v) >= 1000 and (numbers >= 1000 or deep))
        )

    def csv_candidate(v: bytes) -> bool:
        d, q = re.escape(layout.delimiter.encode()), re.escape(layout.quote.encode())
        field = rb"(?:[^%b%b]*|%b(?:[^%b]|%b%b)*%b)" % (q, d, q, q, q, q, q)
        control = any(c < 0x20 and chr(c) != layout.delimiter for c in v)
        well_formed = re.fullmatch(rb"%b(?:%b%b)*" % (field, d, field), v) and not re.search(
            rb"(?:^|%b)%b%b(?:%b|$)" % (d, q, q, d), v
        )
        return (
            not control and not v.startswith(b"\xef\xbb\xbf") and (layout.quote.encode() not in v or bool(well_formed))
        )

    candidate = csv_candidate if layout.fmt == "csv" else json_candidate
    return [v is not None and 0 < len(v) <= 1 << 20 and candidate(v) for v in values]


def test_the_pre_checks_read_from_the_bytes_keep_what_they_keep_written_out_per_payload():
    """``_candidates`` reads the bytes with numpy and samples for runs of number characters; on
    generated payloads crowded with what the checks look for (runs of digits and brackets either
    side of 1000, NaN, Infinity, control characters, quotes, a BOM), as binary and large_binary,
    whole and sliced, it keeps exactly what the checks written out per payload keep."""
    import numpy as np

    from kafka_iceberg.decode.arrow import _candidates

    rng = random.Random(49)
    pieces = [b"{", b"}", b"[", b"1", b"-", b".", b"e", b"N", b"a", b"NaN", b"Infinity", b"Inf", b"\t", b"\n"]
    pieces += [b"\x01", b"\x1f", b'"', b"'", b",", b"x", b"\xef\xbb\xbf", b"\xff", b" "]

    def payload() -> bytes | None:
        if rng.random() < 0.1:
            return rng.choice([None, b""])
        parts, size = [b"{"] if rng.random() < 0.7 else [], rng.choice([5, 60, 999, 1000, 1300, 2600])
        while sum(map(len, parts)) < size:
            roll = rng.random()
            if roll < 0.1:
                parts.append(b"7" * rng.choice([499, 500, 999, 1000, 1500]))
            elif roll < 0.15:
                parts.append(rng.choice([b"[", b"{"]) * rng.choice([500, 999, 1000]))
            else:
                parts.append(rng.choice(pieces) * rng.randrange(1, 4))
        return b"".join(parts + ([b"}"] if rng.random() < 0.7 else []))

    layouts = [Layout(fmt="json", source="v"), Layout(fmt="flatten", source="v"), Layout(fmt="csv", source="v")]
    layouts.append(Layout(fmt="csv", source="v", delimiter="\t", quote="'"))
    kept = 0
    for _ in range(30):
        for array in _as_arrays(rng, [payload() for _ in range(rng.randrange(1, 200))]):
            for layout in layouts:
                got = _candidates(array, layout)
                assert isinstance(got, np.ndarray) and len(got) == len(array)
                assert got.tolist() == _pre_checks_in_python(array.to_pylist(), layout), layout
                kept += int(got.sum())
    assert kept > 500  # the comparison is not between two empty answers


def test_a_word_is_found_in_the_bytes_wherever_a_plain_search_finds_it():
    """``_found`` (the pre-checks' and the keys' search) looks for a word's first two bytes as one
    16-bit number at even and odd positions; on short byte strings of a few letters, of every
    length and so every alignment, with words of one to three bytes, it finds every start a plain
    search finds, the last one that fits included."""
    import numpy as np

    from kafka_iceberg.decode.arrow import _found

    rng = random.Random(77)
    found = 0
    for _ in range(3000):
        data = bytes(rng.choice(b'NaI"c') for _ in range(rng.randrange(0, 20)))
        word = bytes(rng.choice(b'NaI"c') for _ in range(rng.randrange(1, 4)))
        want = [i for i in range(len(data) - len(word) + 1) if data[i : i + len(word)] == word]
        assert _found(np.frombuffer(data, dtype=np.uint8), word).tolist() == want, (data, word)
        found += len(want)
    assert found > 1000  # the comparison is not between two empty answers


def test_keys_found_in_the_bytes_are_those_a_search_of_each_payload_finds():
    """``_at_keys`` finds a nested column's keys with numpy at any byte alignment; on generated
    payloads crowded with the name (as a key, spaced before its colon, as a string, inside other
    names, nested, repeated), as binary and large_binary, whole and sliced, it counts exactly the
    keys a regular expression finds in each payload, and each record's view starts at its first."""
    import re

    from kafka_iceberg.decode.arrow import _at_keys, _bytes_of

    rng = random.Random(76)
    pieces = [b'"ctx":', b'"ctx" :', b'"ctx"\t\t:', b'"ctx",', b'"ctx"}', b'"ctxs":', b'"actx":', b'"c":', b'"ct"']
    pieces += [b'{"ctx":1}', b"ctx:", b'"', b"x", b" ", b"1", b",", b"[", b"\xc3\xa9"]

    def payload() -> bytes:
        return b"{" + b"".join(rng.choice(pieces) for _ in range(rng.randrange(0, 12))) + b"}"

    key = re.compile(rb'"ctx"[ \t]*:')
    found = 0
    for _ in range(40):
        for array in _as_arrays(rng, [payload() for _ in range(rng.randrange(1, 120))]):
            seen, view = _at_keys(*_bytes_of(array), "ctx")
            records = array.to_pylist()
            assert seen.tolist() == [len(key.findall(r)) for r in records]
            for record, at_key in zip(records, view.to_pylist(), strict=True):
                first = key.search(record)
                if first is None:
                    assert not key.match(at_key)
                else:
                    assert at_key.startswith(record[first.start() :])
            found += sum(seen.tolist())
    assert found > 500  # the comparison is not between two empty answers


def _as_arrays(rng: random.Random, values: list[bytes | None]) -> list[pa.Array]:
    """``values`` as binary and large_binary, each whole and as a random slice (an array offset)."""
    out = []
    for arrow_type in (pa.binary(), pa.large_binary()):
        whole = pa.array(values, arrow_type)
        start = rng.randrange(len(values))
        out += [whole, whole.slice(start, rng.randrange(len(values) - start + 1))]
    return out


# -- timestamps and dates the Arrow writer converts from text -------------------------------------
def _date_time_texts(rng: random.Random, n: int) -> list[str]:
    """Text near the canonical ISO 8601 forms: valid, impossible (02-30, 24:00, :60), and other spellings."""
    parts = {  # (canonical and valid choices, others); each part is one of the others one time in eight
        "year": (["2024", "2023", "2000", "1900", "1582", "1000", "9999"], ["0999", "0000", "+2024", "12024"]),
        "month": (["01", "02", "06", "12"], ["00", "13", "1"]),
        "day": (["01", "28", "29", "30", "31"], ["00", "32", "7"]),
        "time": (["00:00:00", "10:11:12", "23:59:59"], ["24:00:00", "12:60:00", "12:00:60", "9:00:00", "12:00"]),
        "fraction": (["", "", ".5", ".123", ".123456", ".000001"], [".", ".1234567", ".12345678"]),
        "zone": (
            ["", "Z", "+05:30", "-01:15", "+18:00", "-18:00"],
            ["+18:01", "+19:00", "+00:60", "+0530", " UTC", "z"],
        ),
        "sep": (["T", " "], ["t", "_"]),
        "pad": ([""], [" "]),
    }

    def pick(name: str) -> str:
        good, other = parts[name]
        return rng.choice(other if rng.random() < 0.125 else good)

    out = []
    for _ in range(n):
        day = f"{pick('year')}-{pick('month')}-{pick('day')}"
        if rng.random() < 0.3:
            out.append(pick("pad") + day + pick("pad"))
        else:
            out.append(pick("pad") + day + pick("sep") + pick("time") + pick("fraction") + pick("zone") + pick("pad"))
    return out


@pytest.mark.parametrize("zoneless_utc", [True, False])
def test_timestamps_and_dates_the_arrow_writer_converts_are_the_values_sparks_conversion_gives(spark, zoneless_utc):
    """What write/certified.py converts from a flatten record's text: each value exactly Spark's; the rest Spark's."""
    rng = random.Random(20)
    texts = [*_date_time_texts(rng, 3000), "2024-02-29", "2024-02-29T10:00:00Z", "2024-01-01 10:00:00.5+02:00"]
    frame = spark.createDataFrame([(t,) for t in texts], "t STRING")
    spark_values = frame.selectExpr(
        f"unix_micros({convert('t', 'timestamp')}) AS ts", f"unix_date({convert('t', 'date')}) AS day"
    ).collect()
    arrow_texts = pa.array(texts, pa.string())
    for col_type, column, to_int in (("timestamp", "ts", pa.int64()), ("date", "day", pa.int32())):
        values, keep = convert_text(arrow_texts, col_type, zoneless_utc=zoneless_utc)
        ours = values.cast(to_int).to_pylist()
        converted = [i for i, v in enumerate(ours) if v is not None]
        assert all(keep[i] == (ours[i] is not None) for i in range(len(texts)))  # no null text here
        for i in converted:
            assert ours[i] == spark_values[i][column], (texts[i], ours[i], spark_values[i][column])
        # Not vacuous: a good share of each is converted here; what is not, Spark's decoder converts
        # (other spellings) or refuses.
        assert len(converted) > 150, (col_type, len(converted))
        refused_by_spark = [i for i in range(len(texts)) if spark_values[i][column] is None]
        assert refused_by_spark and not set(refused_by_spark) & set(converted)
    zoneless = [t for t in texts if len(t) == 19 and t[10] in "T "]
    _, keep = convert_text(pa.array(zoneless, pa.string()), "timestamp", zoneless_utc=zoneless_utc)
    assert keep.any() == zoneless_utc  # without an offset: Spark reads it in its session time zone


def _number_texts(rng: random.Random, n: int) -> list[str]:
    """CSV field text near the canonical numbers and booleans: signs, spaces, zeros, exponents, bounds."""
    edges = ["2147483647", "2147483648", "-2147483648", "-2147483649", "999999999", "1000000000",
             "9223372036854775807", "9223372036854775808", "999999999999999999", "-0", "0", "-0.0", "0.0",
             "+1", " 1", "1 ", "01", "1.", ".5", "1e3", "1E-3", "NaN", "Infinity", "-", "", "1_000",
             "\uff10", "true", "false", "True", "FALSE", " true", "yes", "1", "t"]  # fmt: skip
    out = list(edges)
    for _ in range(n):
        digits = "".join(rng.choice("0123456789") for _ in range(rng.randrange(1, 21)))
        text = (digits.lstrip("0") or "0") if rng.random() < 0.8 else digits
        if rng.random() < 0.5:
            text += "." + "".join(rng.choice("0123456789") for _ in range(rng.randrange(1, 18)))
        out.append(("-" if rng.random() < 0.3 else "") + text)
    return out


def test_csv_numbers_and_booleans_the_arrow_writer_converts_are_the_values_sparks_conversion_gives(spark):
    """What write/certified.py converts from a csv field: each value exactly Spark's ``try_cast`` of the
    same text (doubles bit for bit); every text it does not convert is Spark's decoder's to convert or refuse."""
    texts = _number_texts(random.Random(21), 3000)
    frame = spark.createDataFrame([(t,) for t in texts], "t STRING")
    types = {"long": "long", "int": "int", "double": "double", "boolean": "boolean"}
    spark_values = frame.selectExpr(*[f"{convert('t', t)} AS {name}" for name, t in types.items()]).collect()
    for name, col_type in types.items():
        values, keep = convert_text(pa.array(texts, pa.string()), col_type, zoneless_utc=True)
        ours = values.to_pylist()
        converted = [i for i in range(len(texts)) if keep[i]]
        for i in converted:
            theirs = spark_values[i][name]
            assert repr(ours[i]) == repr(theirs), (col_type, texts[i], ours[i], theirs)
        assert all(ours[i] is None for i in range(len(texts)) if not keep[i])
        assert len(converted) > (1 if col_type == "boolean" else 300), (col_type, len(converted))


def test_timestamp_and_date_text_is_null_kept_and_impossible_dates_refused_not_moved():
    texts = pa.array(["2023-02-29", "2024-02-29", None, "2024-04-31", "2024-4-01"], pa.string())
    values, keep = convert_text(texts, "date", zoneless_utc=True)
    assert keep.tolist() == [False, True, True, False, False]
    assert values.cast(pa.string()).to_pylist() == [None, "2024-02-29", None, None, None]
    stamps = pa.array(["2024-01-01T23:59:60Z", "2024-01-01T10:00:00+05:30", None, "2024-01-01 12:30:60"], pa.string())
    values, keep = convert_text(stamps, "timestamp", zoneless_utc=True)
    assert keep.tolist() == [False, True, True, False]  # strptime moves a 60th second to the next minute
    assert values.cast(pa.int64()).to_pylist()[1] == 1704083400 * 1_000_000  # 2024-01-01T04:30:00Z


def test_a_moved_date_or_time_is_found_as_printing_it_back_finds_it():
    """convert_text compares the day and second parsed with those written where it once printed each
    value back (``strftime``) and compared the text: the same verdict on every month, day, hour,
    minute and second around the edges, in leap and common years."""
    import itertools

    import pyarrow.compute as pc

    days = [f"{y}-{m:02d}-{d:02d}" for y, m, d in itertools.product((1900, 2000, 2023, 2024), range(14), range(33))]
    clocks = [
        f"{h}:{m}:{s}" for h, m, s in itertools.product(("00", "23", "24"), ("59", "60"), ("00", "59", "60", "61"))
    ]
    for col_type, texts, fmt in (
        ("date", days, "%Y-%m-%d"),
        ("timestamp", [f"{d} {c}" for d in days for c in clocks], "%Y-%m-%d %H:%M:%S"),
    ):
        text = pa.array(texts, pa.string())
        parsed = pc.strptime(text, format=fmt, unit="s", error_is_null=True)
        printed_back = pc.equal(pc.strftime(parsed, format=fmt), text).fill_null(False).to_numpy(zero_copy_only=False)
        _, keep = convert_text(text, col_type, zoneless_utc=True)
        assert (keep == printed_back).all(), [t for t, k, b in zip(texts, keep, printed_back, strict=True) if k != b][
            :5
        ]
        assert 0 < printed_back.sum() < len(texts)


# -- which decoder a table gets ---------------------------------------------------------------------
def test_arrow_is_used_where_asked_and_possible_and_auto_follows_the_measurements():
    strict = {"schema": {"columns": {"a": "long"}}, "schema_evolution": "strict"}
    assert uses_arrow(table("json", source_decoder="arrow"))
    assert uses_arrow(table("csv", schema={"columns": {"a": "long"}}, source_decoder="arrow"))
    assert uses_arrow(table("flatten", source_decoder="arrow", **strict))
    assert not uses_arrow(table("text", source_decoder="arrow"))  # nothing to parse
    for fmt in ("json", "csv", "flatten"):  # auto: Arrow only where whole runs measured faster
        assert uses_arrow(table(fmt, **(strict if fmt == "flatten" else {}))) == (fmt in AUTO_ARROW)


def test_arrow_for_flatten_with_schema_discovery_is_refused_with_its_reason():
    assert unsupported(table("flatten", schema_evolution="strict")) is None
    reason = unsupported(table("flatten", schema_evolution="add_columns"))
    assert reason is not None and "schema_evolution strict" in reason
    found = table_problems(table("flatten", source_decoder="arrow"), file="p.yml", key="tables[0]", base_dir=None)
    assert [(p.key_path, p.value) for p in found] == [("tables[0].source.decoder", "arrow")]
    assert "schema_evolution strict" in found[0].expected
