"""Avro decoded in the JVM gives every record the outcome Python gives it (``decode/avro_jvm.py``).

Each batch is decoded twice through ``decode_schemaful``: with the JVM taking what it may, and with
Python decoding everything (the path before it). The outcomes (fields, failed, reason) must be the
same record for record, and the JVM must have taken the well-formed records, or the test proves
nothing. The bytes that make the two decoders disagree (left-over bytes, a boolean byte of 2, text
that is not UTF-8, a date past year 9999, a corrupt collection count that Java would allocate)
must reach Python.
"""

from __future__ import annotations

import io
import json
from types import SimpleNamespace
from typing import Any

import fastavro
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import functions as F

from kafka_iceberg.decode import avro, avro_jvm, schemaful
from kafka_iceberg.decode.codec import Codec
from kafka_iceberg.decode.plan import FAILED, FIELDS, kafka_frame
from kafka_iceberg.decode.schemaful import REASON
from tests.decode.conftest import Msg
from tests.decode.test_avro_plain_values import EVERY, record

SMALL = {
    "type": "record",
    "name": "Small",
    "fields": [
        {"name": "ok", "type": "boolean"},
        {"name": "name", "type": "string"},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "note", "type": ["null", "string"], "default": None},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-micros"}},
    ],
}
# SMALL with its logical types as their plain types: mutated() draws any value Python can read
SMALL_PLAIN = {
    **SMALL,
    "fields": [
        {**f, "type": f["type"]["type"]} if isinstance(f["type"], dict) and "logicalType" in f["type"] else f
        for f in SMALL["fields"]
    ],
}
SCHEMA_ID = 7


def zigzag(n: int) -> bytes:
    n, out = (n << 1) ^ (n >> 63), bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    return bytes([*out, n])


def text(s: bytes) -> bytes:
    return zigzag(len(s)) + s


def wire(body: bytes, schema_id: int = SCHEMA_ID) -> bytes:
    return b"\x00" + schema_id.to_bytes(4, "big") + body


def encode(schema: dict[str, Any], doc: dict[str, Any]) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), doc)
    return out.getvalue()


def codec(schema: dict[str, Any]) -> Codec:
    t = json.dumps(schema)
    return Codec("avro", "value", "_ki_value", True, avro.record_columns(t), writers={SCHEMA_ID: t})


def outcomes(kafka_df: Any, values: list[bytes | None], c: Codec, *, jvm: bool, monkeypatch: Any) -> list[Any]:
    frame = kafka_frame(kafka_df([Msg(None, v) for v in values]))
    with monkeypatch.context() as m:
        if not jvm:
            m.setattr(avro_jvm, "jvm_writers", lambda frame, codec: {})
        outcome, _, _, _ = schemaful.decode_schemaful(frame, None, base_dir=None, codec=c)
        # as JSON: Python's datetimes do not reach year 1 in every time zone
        got = outcome.orderBy("offset").select("offset", F.to_json(FIELDS), FAILED, REASON).collect()
        return [(o, None if f is None else json.loads(f), failed, reason) for o, f, failed, reason in got]


def where_written(kafka_df: Any, values: list[bytes | None], c: Codec, *, jvm: bool) -> list[Any]:
    """What the Arrow writer's tasks make of ``values`` (``schemaful.decoded_fields``), in the batch's order.

    ``(offset, value, None)`` of a record they decode, ``(offset, None, reason)`` of one whose
    error they settle themselves; a record they leave to Spark is not listed. ``jvm``: the tasks
    get the JVM's pass (``avro_jvm.staged``) and decode only what it left.
    """
    from pyspark.sql import types as T

    frame = kafka_frame(kafka_df([Msg(None, v) for v in values]))
    if jvm:
        frame = avro_jvm.staged(frame, c, avro_jvm.jvm_writers(frame, c), text=False)  # as run/batch.py
    schema = T.StructType(
        [T.StructField("offset", T.LongType()), T.StructField(FIELDS, c.columns), T.StructField(REASON, T.StringType())]
    )

    def task(batches: Any) -> Any:
        import pyarrow as pa

        readers = schemaful.Readers(c)
        for batch in batches:
            _, decoded, fields, errors = schemaful.decoded_fields(batch, c, readers)
            struct = pa.StructArray.from_arrays(list(fields.values()), names=list(fields))
            reasons = pa.nulls(decoded.num_rows, pa.string())
            yield pa.RecordBatch.from_arrays(
                [decoded.column("offset"), struct, reasons], names=["offset", FIELDS, REASON]
            )
            failed = batch.column("offset").take(pa.array(list(errors), pa.int64()))
            yield pa.RecordBatch.from_arrays(
                [failed, pa.nulls(len(errors), struct.type), pa.array(list(errors.values()), pa.string())],
                names=["offset", FIELDS, REASON],
            )

    got = frame.coalesce(1).mapInArrow(task, schema).select("offset", F.to_json(FIELDS), REASON)
    return [(o, None if f is None else json.loads(f), reason) for o, f, reason in got.collect()]


def settled_as_sparks_side(written: list[Any], spark_side: list[Any]) -> None:
    """The errors the tasks settled are Spark's side's errors, reason for reason; what they decoded decoded there."""
    by_offset = {o: (failed, reason) for o, _, failed, reason in spark_side}
    for offset, _, reason in written:
        assert by_offset[offset] == ((True, reason) if reason is not None else (False, None))


def jvm_took(kafka_df: Any, values: list[bytes | None], c: Codec) -> list[int]:
    """The offsets the JVM decoded."""
    frame = kafka_frame(kafka_df([Msg(None, v) for v in values]))
    writers = avro_jvm.jvm_writers(frame, c)
    assert writers, "the JVM path does not apply to this writer"
    _, good, _ = avro_jvm.split(frame, c, writers, fields="f", flags=[])
    return sorted(r.offset for r in good.select("offset").collect())


def test_well_formed_records_are_decoded_in_the_jvm_as_python_decodes_them(kafka_df, monkeypatch):
    c = codec(EVERY)
    values = [wire(encode(EVERY, record(i))) for i in range(30)]
    assert outcomes(kafka_df, values, c, jvm=True, monkeypatch=monkeypatch) == outcomes(
        kafka_df, values, c, jvm=False, monkeypatch=monkeypatch
    )
    assert jvm_took(kafka_df, values, c) == list(range(30))
    assert where_written(kafka_df, values, c, jvm=True) == where_written(kafka_df, values, c, jvm=False)


def small(**overrides: bytes) -> bytes:
    parts = {
        "ok": b"\x01",
        "name": text(b"caf\xc3\xa9"),
        "day": zigzag(19_000),
        "tags": zigzag(2) + text(b"a") + text(b"b") + b"\x00",
        "note": b"\x02" + text(b"n"),
        "at": zigzag(1_700_000_000_000_000),
    }
    return b"".join((parts | overrides).values())


# Bytes the JVM decodes (or would try to) differently from fastavro: all must go to Python.
DISAGREE = {
    "left-over bytes": small() + b"\x00",
    "boolean byte 2 (Java: false, fastavro: true)": small(ok=b"\x02"),
    "text that is not UTF-8": small(name=text(b"caf\xe9")),
    "text in an array that is not UTF-8": small(tags=zigzag(2) + text(b"a") + text(b"\xff") + b"\x00"),
    "a date past year 9999": small(day=zigzag(3_000_000)),
    "a timestamp before year 1": small(at=zigzag(-62_135_596_800_000_001)),
    "a date before the Gregorian calendar (to_avro refuses it)": small(day=zigzag(-150_000)),
    "a timestamp before 1900 (to_avro refuses it)": small(at=zigzag(-2_208_988_800_000_001)),
    "a corrupt collection count (Java allocates it first)": small(tags=zigzag(1_000_000_000) + b"ab"),
    "a long-winded length": small(name=b"\x88\x00" + b"caf\xc3\xa9"),
    "cut short": small()[:-3],
    "nothing after the header": b"",
    "a union index past its branches": small(note=b"\x04"),
}


def test_what_the_jvm_would_read_differently_goes_to_python(kafka_df, monkeypatch):
    c = codec(SMALL)
    values = [wire(small()), *(wire(v) for v in DISAGREE.values()), wire(small(), 99), b"{}", None]
    assert small() == encode(
        SMALL_PLAIN,
        {"ok": True, "name": "café", "day": 19_000, "tags": ["a", "b"], "note": "n", "at": 1_700_000_000_000_000},
    )
    jvm = outcomes(kafka_df, values, c, jvm=True, monkeypatch=monkeypatch)
    assert jvm == outcomes(kafka_df, values, c, jvm=False, monkeypatch=monkeypatch)
    assert jvm_took(kafka_df, values, c) == [0]  # only the well-formed record
    # the Arrow writer's tasks: the JVM's record and the ones Python decodes, in the batch's order, and
    # every error but the unknown schema id's (the driver fetches it; Spark's side decodes its record)
    written = where_written(kafka_df, values, c, jvm=True)
    assert written == where_written(kafka_df, values, c, jvm=False)
    assert [o for o, _, reason in written if reason is None] == [o for o, _, failed, _ in jvm if not failed]
    assert [o for o, _, reason in written if reason is not None] == [
        o for o, _, failed, reason in jvm if failed and "unknown schema id 99" not in reason
    ]
    settled_as_sparks_side(written, jvm)
    reasons = {name: r[3] for name, r in zip(DISAGREE, jvm[1:], strict=False)}
    assert "bytes left after the record" in reasons["left-over bytes"]
    assert "UnicodeDecodeError" in reasons["text that is not UTF-8"]
    assert reasons["nothing after the header"].endswith("EOFError: cannot read boolean")  # no reader's address
    assert jvm[2][1]["ok"] is True  # fastavro's reading of a boolean byte 2, kept
    assert "unknown schema id 99" in jvm[-3][3]


@st.composite
def mutated(draw: Any) -> bytes | None:
    """A SMALL record, then now and then a byte changed, bytes cut or added."""
    doc = {
        "ok": draw(st.booleans()),
        "name": draw(st.text(max_size=8)),
        "day": draw(st.integers(-719_162, 2_932_896)),  # Python's dates
        "tags": draw(st.lists(st.text(max_size=3), max_size=3)),
        "note": draw(st.none() | st.text(max_size=4)),
        "at": draw(st.integers(-62_135_596_800_000_000, 253_402_300_799_999_999)),  # Python's datetimes
    }
    body = bytearray(encode(SMALL_PLAIN, doc))
    for _ in range(draw(st.integers(0, 2))):
        kind, at = draw(st.sampled_from(["flip", "cut", "add"])), draw(st.integers(0, len(body)))
        if kind == "flip" and at < len(body):
            body[at] = draw(st.integers(0, 255))
        elif kind == "cut":
            del body[at:]
        else:
            body[at:at] = draw(st.binary(min_size=1, max_size=3))
    return wire(bytes(body))


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(mutated(), min_size=20, max_size=40))
def test_any_bytes_get_the_outcome_python_gives_them(kafka_df, monkeypatch, values):
    c = codec(SMALL)
    spark_side = outcomes(kafka_df, values, c, jvm=True, monkeypatch=monkeypatch)
    assert spark_side == outcomes(kafka_df, values, c, jvm=False, monkeypatch=monkeypatch)
    written = where_written(kafka_df, values, c, jvm=True)
    assert written == where_written(kafka_df, values, c, jvm=False)
    settled_as_sparks_side(written, spark_side)


def test_limits_are_read_where_the_tasks_run(spark):
    assert avro_jvm.limits_set(spark)  # session.get_spark sets them on the driver, where local tasks run

    def cluster(options: str) -> Any:
        conf = SimpleNamespace(get=lambda key: options if key == "spark.executor.extraJavaOptions" else None)
        return SimpleNamespace(sparkContext=SimpleNamespace(master="spark://host:7077", getConf=lambda: conf))

    assert avro_jvm.limits_set(cluster(" ".join(avro_jvm.LIMIT_OPTIONS)))
    assert not avro_jvm.limits_set(cluster("-Daws.requestChecksumCalculation=when_required"))


def test_without_the_limits_python_decodes_everything(kafka_df, monkeypatch):
    frame = kafka_frame(kafka_df([Msg(None, wire(small()))]))
    monkeypatch.setattr(avro_jvm, "limits_set", lambda spark: False)
    assert avro_jvm.jvm_writers(frame, codec(SMALL)) == {}


@pytest.mark.parametrize(
    "field_type",
    [
        {"type": "string", "logicalType": "uuid"},  # Python converts it
        ["null", "string", "long"],  # several types: JSON text in Python, a struct in spark-avro
    ],
)
def test_writers_python_converts_are_not_decoded_in_the_jvm(kafka_df, field_type):
    schema = {"type": "record", "name": "R", "fields": [{"name": "x", "type": field_type}]}
    frame = kafka_frame(kafka_df([Msg(None, b"\x00")]))
    assert avro_jvm.jvm_writers(frame, codec(schema)) == {}


def test_text_that_is_not_utf8_is_found_in_the_record_that_holds_it():
    """``avro_jvm.not_utf8``: Arrow's validation finds the records, at any depth, in slices too."""
    import pyarrow as pa

    def strings(*values: bytes) -> pa.Array:  # Java's bytes as Spark hands them to Arrow: not validated
        offsets = [0]
        for v in values:
            offsets.append(offsets[-1] + len(v))
        data = pa.py_buffer(b"".join(values))
        return pa.Array.from_buffers(pa.string(), len(values), [None, pa.array(offsets, pa.int32()).buffers()[1], data])

    names = strings(b"ok", b"caf\xe9", b"fine", b"ok")
    tags = pa.ListArray.from_arrays(pa.array([0, 1, 1, 3, 4], pa.int32()), strings(b"a", b"b", b"\xff", b"c"))
    attrs = pa.MapArray.from_arrays(
        pa.array([0, 1, 2, 2, 3], pa.int32()), strings(b"k", b"\xfe", b"k"), strings(b"v", b"v", b"v")
    )
    records = pa.StructArray.from_arrays([names, tags, attrs], names=["name", "tags", "attrs"])
    assert avro_jvm.not_utf8(records).tolist() == [False, True, True, False]  # name; tags and a map key
    assert avro_jvm.not_utf8(records.slice(2)).tolist() == [True, False]
    assert avro_jvm.not_utf8(records.slice(3)).tolist() == [False]
    assert avro_jvm.not_utf8(pa.array([1, 2])).tolist() == [False, False]
