"""Benchmark data: realistic messages per format, written as Kafka-shaped Parquet replay files.

Every dataset is one topic of ``PARTITIONS`` partitions, split into files of ``records_per_file``
records (each file is one micro-batch on replay, as ``kafka-iceberg capture`` writes them; the
files are written the way ``capture`` writes them, in row groups of ``ROW_GROUP_RECORDS``). About
0.5 % of the messages are bad in a way the format can tell (broken JSON, wrong types, unknown fields, wrong
CSV column counts, invalid UTF-8, Avro with a wrong magic byte or cut short), so the error path runs;
binary messages cannot be bad. A *clean* dataset (``bad_share=0``, named ``<fmt>_<size>_clean``) is
the same messages with none bad and none violating the expectation: what a healthy topic looks like.

Avro messages are in the Confluent wire format: their schema id is the one the bench's own registry
gave ``AVRO_SCHEMA`` (``Dataset.schema_id``), so they are generated after the stack is up.

Beside the replay files, ``<dataset>/good.parquet`` holds only the good messages' coordinates and
values: the pyarrow baseline parses those (pyarrow's readers have no per-record error path).
"""

from __future__ import annotations

import datetime as dt
import decimal
import functools
import io
import json
import random
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

try:
    from kafka_iceberg.source.capture import ROW_GROUP_RECORDS
except ImportError:  # a checkout from before capture wrote row groups (before/after comparisons)
    ROW_GROUP_RECORDS = 10_000

PARTITIONS = 4
BAD_SHARE = 0.005  # decode errors
VIOLATION_SHARE = 0.002  # flatten: good JSON that fails the quarantine expectation (amount >= 0)
START = dt.datetime(2026, 1, 5, 8, 0, tzinfo=dt.timezone.utc)
FORMATS = ("flatten", "csv", "json", "text", "binary", "avro")
SIZES = ("small", "large")

# The flatten table: 20 columns, one of them (``ctx``) a nested object, one (``tags``) an array.
FLATTEN_COLUMNS: dict[str, str] = {
    "id": "long",
    "ts": "timestamp",
    "uid": "long",
    "sid": "string",
    "ev": "string",
    "pg": "string",
    "amt": "double",
    "qty": "int",
    "cur": "string",
    "cc": "string",
    "city": "string",
    "dev": "string",
    "os": "string",
    "ver": "string",
    "new": "boolean",
    "score": "double",
    "day": "date",
    "tags": "string",
    "ctx": "string",
    "note": "string",
}
CSV_COLUMNS: dict[str, str] = {
    "id": "long",
    "ts": "timestamp",
    "user_id": "long",
    "country": "string",
    "city": "string",
    "amount": "double",
    "qty": "int",
    "status": "string",
    "agent": "string",
    "comment": "string",
}

# The avro topic: the flatten event as an Avro producer would type it (logical types, an enum, a
# nested record, an array, optional fields). Its columns are what the framework derives from it.
AVRO_SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "Event",
    "namespace": "bench",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "uid", "type": "long"},
        {"name": "sid", "type": "string"},
        {"name": "ev", "type": {"type": "enum", "name": "Kind", "symbols": ["view", "click", "add_to_cart",
                                                                            "checkout", "search", "scroll"]}},
        {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}},
        {"name": "qty", "type": "int"},
        {"name": "cur", "type": "string"},
        {"name": "cc", "type": "string"},
        {"name": "city", "type": "string"},
        {"name": "dev", "type": "string"},
        {"name": "os", "type": "string"},
        {"name": "new", "type": "boolean"},
        {"name": "score", "type": "double"},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "ctx", "type": {"type": "record", "name": "Context", "fields": [
            {"name": "ab", "type": "string"},
            {"name": "agent", "type": ["null", "string"], "default": None},
            {"name": "ref", "type": ["null", "string"], "default": None},
        ]}},
        {"name": "note", "type": ["null", "string"], "default": None},
    ],
}  # fmt: skip
AVRO_COLUMNS: dict[str, str] = {  # Spark DDL types of AVRO_SCHEMA's fields
    "id": "BIGINT",
    "ts": "TIMESTAMP",
    "uid": "BIGINT",
    "sid": "STRING",
    "ev": "STRING",
    "amount": "DECIMAL(10,2)",
    "qty": "INT",
    "cur": "STRING",
    "cc": "STRING",
    "city": "STRING",
    "dev": "STRING",
    "os": "STRING",
    "new": "BOOLEAN",
    "score": "DOUBLE",
    "day": "DATE",
    "tags": "ARRAY<STRING>",
    "ctx": "STRUCT<ab: STRING, agent: STRING, ref: STRING>",
    "note": "STRING",
}

_EVENTS = ("view", "click", "add_to_cart", "checkout", "search", "scroll")
_CITIES = (("DE", "Berlin"), ("FR", "Paris"), ("US", "Austin"), ("CN", "Hangzhou"), ("BR", "Recife"), ("IN", "Pune"))
_DEVICES = (("m", "ios"), ("m", "android"), ("d", "windows"), ("d", "macos"), ("t", "ipados"))
_WORDS = (
    "order",
    "shipped",
    "delivered",
    "return",
    "refund",
    "customer",
    "support",
    "ticket",
    "payment",
    "card",
    "declined",
    "retry",
    "warehouse",
    "parcel",
    "courier",
    "address",
    "invoice",
    "discount",
    "coupon",
    "loyalty",
    "points",
    "review",
    "rating",
    "stock",
    "restock",
    "priority",
    "express",
    "standard",
    "pickup",
    "locker",
    "weekend",
    "holiday",
    "promotion",
    "bundle",
    "subscription",
    "renewal",
    "cancel",
    "upgrade",
)
_AGENTS = (
    "Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 Mobile/15E148",
    "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 Chrome/124.0 Mobile Safari/537.36",
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 Chrome/124.0 Safari/537.36",
)


@dataclass(frozen=True)
class Dataset:
    """One topic of generated messages."""

    fmt: str
    size: str
    records: int
    records_per_file: int
    seed: int = 7
    schema_id: int = 0  # avro: the id of AVRO_SCHEMA in the registry the bench runs against
    bad_share: float = BAD_SHARE  # 0: a clean topic (no decode errors, no expectation violations)

    @property
    def name(self) -> str:
        return f"{self.fmt}_{self.size}" + ("_clean" if self.bad_share == 0 else "")

    @property
    def topic(self) -> str:
        return f"bench_{self.name}"

    @property
    def files(self) -> int:
        return -(-self.records // self.records_per_file)


@dataclass
class Generated:
    """What :func:`write_dataset` produced (kept in ``meta.json`` beside the files)."""

    dataset: dict[str, Any]
    records: int
    bad_records: int
    violations: int
    value_bytes: int
    good_records: int
    good_value_bytes: int
    files: list[str] = field(default_factory=list)
    good_file: str = ""
    row_group_records: int = 0

    @property
    def avg_bytes(self) -> float:
        return self.value_bytes / self.records if self.records else 0.0


# -- message generators ----------------------------------------------------------------------------
def _words(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(n))


def flatten_doc(rng: random.Random, i: int, large: bool) -> dict[str, Any]:
    """One event document: 20 top-level keys, ``ctx`` a nested object, ``tags`` an array."""
    cc, city = rng.choice(_CITIES)
    dev, os_ = rng.choice(_DEVICES)
    ts = START + dt.timedelta(milliseconds=i * 7)
    ctx: dict[str, Any] = {"ab": rng.choice("AB")}
    if large:
        ctx.update(
            {
                "agent": rng.choice(_AGENTS),
                "screen": {"w": rng.choice((390, 412, 1920)), "h": rng.choice((844, 915, 1080))},
                "ref": rng.choice(("mail", "ads", "seo", "direct")),
                "lang": rng.choice(("de-DE", "fr-FR", "en-US", "zh-CN")),
                "experiments": [f"exp{rng.randrange(40)}" for _ in range(4)],
            }
        )
    return {
        "id": i,
        "ts": ts.strftime("%Y-%m-%dT%H:%M:%SZ") if not large else ts.isoformat(timespec="milliseconds"),
        "uid": rng.randrange(1, 200_000),
        "sid": f"{rng.getrandbits(32):08x}",
        "ev": rng.choice(_EVENTS),
        "pg": f"/p/{rng.randrange(100_000)}" if not large else f"/catalog/{_words(rng, 3).replace(' ', '-')}/p/{i}",
        "amt": round(rng.uniform(0, 500), 2),
        "qty": rng.randrange(1, 9),
        "cur": "EUR",
        "cc": cc,
        "city": city,
        "dev": dev,
        "os": os_,
        "ver": f"4.{rng.randrange(20)}.{rng.randrange(10)}",
        "new": rng.random() < 0.1,
        "score": round(rng.random(), 3),
        "day": ts.strftime("%Y-%m-%d"),
        "tags": [rng.choice(_WORDS) for _ in range(1 if not large else 6)],
        "ctx": ctx,
        "note": "" if not large else _words(rng, 95),
    }


def _dumps(doc: Any) -> str:
    return json.dumps(doc, separators=(",", ":"))


def flatten_message(rng: random.Random, i: int, large: bool, bad_share: float = BAD_SHARE) -> tuple[bytes, str]:
    """``(value, kind)``: kind is ``good``, ``violation`` (fails the expectation) or ``bad``."""
    doc = flatten_doc(rng, i, large)
    roll = rng.random()
    if roll < bad_share:
        kind = i % 3
        if kind == 0:
            return _dumps(doc)[:-7].encode(), "bad"  # truncated document
        if kind == 1:
            doc["qty"] = "several"  # not an int
        else:
            doc["promo"] = "x"  # unknown field (schema_evolution: strict)
        return _dumps(doc).encode(), "bad"
    if roll < bad_share + (VIOLATION_SHARE if bad_share else 0):
        doc["amt"] = -doc["amt"] - 1  # decodes, but violates amount >= 0
        return _dumps(doc).encode(), "violation"
    return _dumps(doc).encode(), "good"


def json_message(rng: random.Random, i: int, large: bool, bad_share: float = BAD_SHARE) -> tuple[bytes, str]:
    """A JSON document kept as sent (format json); a broken one is an error."""
    text = _dumps(flatten_doc(rng, i, large))
    if rng.random() < bad_share:
        return (text[:-3] if i % 2 else text.replace('":', '" ', 1)).encode(), "bad"
    return text.encode(), "good"


def _csv_field(text: str) -> str:
    if any(c in text for c in ',"\n'):
        return '"' + text.replace('"', '""') + '"'
    return text


def csv_message(rng: random.Random, i: int, large: bool, bad_share: float = BAD_SHARE) -> tuple[bytes, str]:
    """A 10-column CSV line; a quoted comment field holding commas and quotes now and then."""
    cc, city = rng.choice(_CITIES)
    ts = START + dt.timedelta(milliseconds=i * 7)
    comment = _words(rng, 4 if not large else 150)
    if rng.random() < 0.2:
        comment = f'{comment}, "{rng.choice(_WORDS)}"'
    fields = [
        str(i),
        ts.strftime("%Y-%m-%d %H:%M:%S"),
        str(rng.randrange(1, 5_000_000)),
        cc,
        city,
        f"{rng.uniform(0, 500):.2f}",
        str(rng.randrange(1, 9)),
        rng.choice(("new", "paid", "shipped", "returned")),
        rng.choice(_AGENTS),
        comment,
    ]
    kind = "good"
    if rng.random() < bad_share:
        kind = "bad"
        if i % 2:
            fields = fields[:7]  # wrong column count
        else:
            fields[5] = "12,50 EUR"  # not a double
    return ",".join(_csv_field(f) for f in fields).encode(), kind


def text_message(rng: random.Random, i: int, large: bool, bad_share: float = BAD_SHARE) -> tuple[bytes, str]:
    """An access-log line (large: with a long diagnostic tail); invalid UTF-8 is an error."""
    ts = START + dt.timedelta(milliseconds=i * 7)
    line = (
        f"10.{rng.randrange(256)}.{rng.randrange(256)}.{rng.randrange(256)} - - [{ts:%d/%b/%Y:%H:%M:%S} +0000] "
        f'"GET /p/{rng.randrange(100_000)}?q={rng.choice(_WORDS)} HTTP/1.1" {rng.choice((200, 200, 200, 304, 404))} '
        f'{rng.randrange(200, 90_000)} "-" "{rng.choice(_AGENTS)}"'
    )
    if large:
        line += " trace=" + _words(rng, 140)
    data = line.encode()
    if rng.random() < bad_share:
        return data[:40] + b"\xff\xfe" + data[42:], "bad"
    return data, "good"


def binary_message(rng: random.Random, i: int, large: bool, bad_share: float = 0.0) -> tuple[bytes, str]:
    """An opaque record: a fixed binary header, then half-compressible payload bytes."""
    n = 200 if not large else 1200
    head = i.to_bytes(8, "big") + rng.getrandbits(64).to_bytes(8, "big")
    random_half = rng.randbytes((n - 16) // 2)
    pattern = bytes((i + k) % 7 for k in range(8)) * ((n - 16) // 16 + 1)
    return head + random_half + pattern[: n - 16 - len(random_half)], "good"


@functools.cache
def avro_writer_schema() -> Any:
    import fastavro

    return fastavro.parse_schema(AVRO_SCHEMA)


def avro_message(
    rng: random.Random, i: int, large: bool, schema_id: int = 0, bad_share: float = BAD_SHARE
) -> tuple[bytes, str]:
    """The flatten event as Avro in the Confluent wire format; now and then not Avro, or cut short."""
    import fastavro

    doc = flatten_doc(rng, i, large)
    ctx = doc["ctx"]
    record = {
        **{k: doc[k] for k in ("id", "uid", "sid", "ev", "qty", "cur", "cc", "city", "dev", "os", "new", "score")},
        "ts": START + dt.timedelta(milliseconds=i * 7),
        "amount": decimal.Decimal(f"{doc['amt']:.2f}"),
        "day": (START + dt.timedelta(milliseconds=i * 7)).date(),
        "tags": doc["tags"],
        "ctx": {"ab": ctx["ab"], "agent": ctx.get("agent"), "ref": ctx.get("ref")},
        "note": doc["note"] or None,
    }
    out = io.BytesIO()
    fastavro.schemaless_writer(out, avro_writer_schema(), record)
    body = out.getvalue()
    header = b"\x00" + schema_id.to_bytes(4, "big")
    if rng.random() < bad_share:
        if i % 2:
            return _dumps(doc).encode(), "bad"  # a JSON producer on the Avro topic: wrong magic byte
        return header + body[: len(body) // 2], "bad"  # cut short: does not match the writer schema
    return header + body, "good"


GENERATORS: dict[str, Callable[..., tuple[bytes, str]]] = {
    "flatten": flatten_message,
    "json": json_message,
    "csv": csv_message,
    "text": text_message,
    "binary": binary_message,
    "avro": avro_message,
}


def messages(ds: Dataset) -> Iterator[tuple[int, int, int, bytes, bytes, str]]:
    """``(partition, offset, timestamp_ms, key, value, kind)`` for every record of ``ds``, in Kafka order."""
    rng = random.Random(f"{ds.seed}-{ds.fmt}_{ds.size}")  # a clean topic: the same draws, none made bad
    gen = functools.partial(GENERATORS[ds.fmt], bad_share=ds.bad_share)
    if ds.fmt == "avro":
        gen = functools.partial(avro_message, schema_id=ds.schema_id, bad_share=ds.bad_share)
    large = ds.size == "large"
    next_offset = [0] * PARTITIONS
    base_ms = int(START.timestamp() * 1000)
    for i in range(ds.records):
        p = i % PARTITIONS
        value, kind = gen(rng, i, large)
        offset = next_offset[p]
        next_offset[p] += 1
        yield p, offset, base_ms + i * 7, str(i).encode(), value, kind


# -- files -----------------------------------------------------------------------------------------
def kafka_table(ds: Dataset, rows: list[tuple[int, int, int, bytes, bytes, str]]) -> Any:
    """An Arrow table of the Kafka shape (``kafka_iceberg.records.KAFKA_SCHEMA_DDL``)."""
    import pyarrow as pa

    from kafka_iceberg.source.direct import arrow_schema

    columns = {
        "key": [r[3] for r in rows],
        "value": [r[4] for r in rows],
        "topic": [ds.topic] * len(rows),
        "partition": [r[0] for r in rows],
        "offset": [r[1] for r in rows],
        "timestamp": [r[2] * 1000 for r in rows],
        "headers": [None] * len(rows),
    }
    return pa.Table.from_pydict(columns, schema=arrow_schema())


def write_dataset(ds: Dataset, root: Path) -> Generated:
    """Write ``ds`` under ``root/<name>/`` (replay files in ``replay/``, good values in ``good.parquet``).

    Reuses what an earlier call with the same parameters wrote.
    """
    import pyarrow.parquet as pq

    out = root / ds.name
    meta_file = out / "meta.json"
    if meta_file.exists():
        meta = json.loads(meta_file.read_text())
        if meta["dataset"] == asdict(ds) and meta.get("row_group_records") == ROW_GROUP_RECORDS:
            return Generated(**meta)
    replay = out / "replay"
    replay.mkdir(parents=True, exist_ok=True)
    for old in replay.glob("*.parquet"):
        old.unlink()
    gen = Generated(dataset=asdict(ds), records=0, bad_records=0, violations=0, value_bytes=0, good_records=0,
                    good_value_bytes=0, row_group_records=ROW_GROUP_RECORDS)  # fmt: skip
    good_rows: list[tuple[int, int, int, bytes, bytes, str]] = []
    pending: list[tuple[int, int, int, bytes, bytes, str]] = []

    def flush() -> None:
        path = replay / f"capture-{ds.topic}-{len(gen.files):04d}.parquet"
        pq.write_table(kafka_table(ds, pending), path, row_group_size=ROW_GROUP_RECORDS)  # as capture writes them
        gen.files.append(str(path))
        pending.clear()

    for row in messages(ds):
        pending.append(row)
        gen.records += 1
        gen.value_bytes += len(row[4])
        if row[5] == "bad":
            gen.bad_records += 1
        else:
            gen.violations += row[5] == "violation"
            good_rows.append(row)
        if len(pending) >= ds.records_per_file:
            flush()
    if pending:
        flush()
    gen.good_records = len(good_rows)
    gen.good_value_bytes = sum(len(r[4]) for r in good_rows)
    gen.good_file = str(out / "good.parquet")
    pq.write_table(kafka_table(ds, good_rows), gen.good_file)
    meta_file.write_text(json.dumps(asdict(gen), indent=1))
    return gen
