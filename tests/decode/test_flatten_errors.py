"""Flatten messages that certainly do not decode, settled where the Arrow writer parses them.

Every message here also goes through Spark's flatten decoder (``schema_evolution: strict``): each
reason and ``_decoded`` text the task settles must be Spark's, character for character; messages
it cannot be sure of are left (None), and the benchmark's bad documents (truncated, a word in an
int column, an unknown key) are all settled, or a second Spark job would still run for them.
"""

from __future__ import annotations

import json
import random

import pyarrow as pa
from benchmarks import datagen

from kafka_iceberg.decode.arrow import layout_for
from kafka_iceberg.decode.flatten_errors import settled_reasons
from tests.decode.conftest import sparks_errors, table

COLUMNS = {
    "id": "long",
    "ts": "timestamp",
    "amount": "double",
    "qty": "int",
    "ok": "boolean",
    "name": "string",
    "day": "date",
    "ctx": "string",
}
# Values a column may get instead of its own: JSON text, as it would stand in the document.
WRONG = [
    '"several"', '"12,50 EUR"', '"1e3"', '" 12"', '"+5"', '"yes"', '"TRUE"', '"not a time"', '"2024-13-01"',
    "true", "false", "1.5", "-0", "-0.0", "1e3", "12345678901234567890", "1E-400", "1e999", '{"a":1}', "[1,2]",
    '[1.5]', '{"a":"x\\"y"}', '{"a":"\\ud83d\\ude00"}', "null", '""', '"\\u0000x"', '"t\\tab"', '"Infinity"',
    '"NaN"', '"0x10"', '"1d"', '"€5"', '"1_000"', "0.0001", "12345678.5", "250.0", "3", '"x' + "y" * 80 + '"',
]  # fmt: skip
NAMES = ['"plain"', '"a \\"quoted\\" name"', '"ünï©ødé"', '"tab\\t/slash\\u2028"', "42", "2.50", "1e2", "true",
         '{"w":[1,{"x":null}],"s":"ok"}', '["a","b"]', "[]", "{}", '{"f":0.5}', "null"]  # fmt: skip


def _good(rng: random.Random, i: int) -> dict[str, str]:
    """The document's members as JSON text, by key."""
    return {
        "id": str(i),
        "ts": json.dumps(
            f"2024-05-01T{rng.randrange(24):02d}:{rng.randrange(60):02d}:00" + rng.choice(["Z", ".5Z", "+02:00", ""])
        ),
        "amount": rng.choice([f"{rng.uniform(0, 500):.2f}", "0", "7", "1234567.5", "0.001", "3.14159", '"2.5"']),
        "qty": str(rng.randrange(-100, 100)),
        "ok": rng.choice(["true", "false", "null"]),
        "name": rng.choice(NAMES),
        "day": rng.choice(['"2024-02-29"', '"2024-05-01"', "null"]),
        "ctx": rng.choice(['{"ab":"A"}', '{"screen":{"w":390,"h":844},"tags":["x","y"]}', "null", '"plain"']),
    }


def _documents() -> list[bytes]:
    rng = random.Random(17)
    out = []
    for i in range(900):
        members = _good(rng, i)
        roll = i % 9
        if roll in (1, 2, 3):  # one to three fields given something else
            for _ in range(roll):
                members[rng.choice(list(COLUMNS))] = rng.choice(WRONG)
        elif roll == 4:
            members[rng.choice(["promo", "zz", "Id"])] = rng.choice(["1", '"x"', "null", "{}"])  # unknown
        elif roll == 5:
            members["promo"], members["extra"] = "1", '"two"'
            members["qty"] = rng.choice(WRONG)
        elif roll == 6:
            del members[rng.choice(list(COLUMNS))]
            members["name"] = rng.choice(WRONG)
        elif roll == 7:
            members["qty"] = '"several"'
            members["ctx"] = rng.choice(WRONG)
        text = "{" + ",".join(f"{json.dumps(k)}:{v}" for k, v in members.items()) + "}"
        if i % 31 == 0:
            text = text[:-7]  # truncated
        out.append(text.encode())
    out += [b'{"id":1,"id":2,"qty":"x"}', b'[{"qty":"x"}]', b'"qty"', b"", b"\xff{}", b'{"qty": "x"} ', b'{"qty":"x"}x']
    return out


def _spec():
    return table("flatten", schema={"columns": COLUMNS}, schema_evolution="strict", source_decoder="spark")


def test_every_settled_reason_and_decoded_text_is_sparks(spark):
    assert spark.conf.get("spark.sql.session.timeZone") == "UTC"
    docs = _documents()
    sparks = sparks_errors(spark, _spec(), docs)
    layout = layout_for(_spec(), dict(COLUMNS))

    settled = settled_reasons(
        pa.array(docs, pa.binary()), list(range(len(docs))), layout, list(COLUMNS), part="value", utc=True
    )

    assert {i: sparks.get(i) for i in settled} == settled
    # Not vacuous: most of Spark's errors are settled, of every kind.
    assert len(settled) > 0.6 * len(sparks)
    reasons = " ".join(reason for reason, _ in settled.values())
    for kind in ("unknown field ", "unknown fields ", "expected long", "expected int", "expected double",
                 "expected boolean", "expected date", "expected timestamp", "; field", "invalid JSON in value",
                 '..."'):  # fmt: skip
        assert kind in reasons
    decoded = [d for _, d in settled.values() if d]
    assert any('"ts":"' in d and '"amount":' in d and '"ctx":"{' in d for d in decoded)


def test_a_benchmark_topics_bad_documents_are_all_settled():
    spec = table("flatten", schema={"columns": datagen.FLATTEN_COLUMNS}, schema_evolution="strict")
    rng = random.Random(5)
    bad = [m for m, kind in (datagen.flatten_message(rng, i, large, bad_share=1.0) for i in range(60) for large in (0, 1))
           if kind == "bad"]  # fmt: skip
    settled = settled_reasons(
        pa.array(bad), range(len(bad)), layout_for(spec, dict(datagen.FLATTEN_COLUMNS)),
        list(datagen.FLATTEN_COLUMNS), part="value", utc=True,
    )  # fmt: skip
    assert len(bad) == 120 and sorted(settled) == list(range(len(bad)))
    reasons = {reason.split(":")[0] for reason, _ in settled.values()}
    assert reasons == {"invalid JSON in value", "field qty", "unknown field promo (schema_evolution is strict)"}


def test_what_spark_might_read_otherwise_is_left_to_it():
    columns = {"n": "long", "s": "string", "d": "double", "t": "timestamp"}
    spec = table("flatten", schema={"columns": columns}, schema_evolution="strict")
    docs = [
        b'{"n":"x","s":{"f":1.5}}',  # a fraction nested: Jackson prints it its own way
        b'{"n":"x","s":"\\ud83d\\ude00"}',  # fine at the top level (a string) ...
        b'{"n":"x","s":["\\ud83d\\ude00"]}',  # ... not nested (Jackson escapes it there)
        b'{"n":"x","s":1e-9}',  # Java prints 1.0E-9
        b'{"n":1.5}',  # Spark casts "1.5" to a long its own way
        b'{"n":"x","t":"2024-05-01T25:00"}',  # a timestamp text Spark's conversion judges
        b'{"n":"x","n":"y"}',  # a duplicate key has its own rule
        b'{"n":"+5","s":"x"}',  # +5 might convert
        b'{"n":"x","d":1e999}',  # Infinity
    ]
    settled = settled_reasons(pa.array(docs), range(len(docs)), layout_for(spec, columns), list(columns), part="value",
                              utc=True)  # fmt: skip
    assert settled == {1: ('field n: expected long, got "x"', '{"s":"\U0001f600"}')}
