"""Hostile input end to end (issue 9): every corpus message, and hypothesis-generated batches, go
through Kafka and a real run with an error target; each lands as a row or as an error row with a
reason, nothing crashes and the counts add up. Results are read back independently: pyiceberg for
tables, a fresh Kafka consumer for the error topic."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from kafka_iceberg.checks.error_topic import H_OFFSET, H_PARTITION, H_REASON, H_STAGE, H_TOPIC
from tests.corpus import FORMATS, load, load_target
from tests.support import hostile
from tests.support.kafka import consume_all, produce
from tests.support.run import Ran, run_pipeline, unique
from tests.support.spy import returns
from tests.support.verify import assert_verified

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
# Values of about 1 MB: librdkafka refuses messages above 1,000,000 bytes by default.
BIG_MESSAGES = {"message.max.bytes": 4_000_000}

# Which error target each format's run uses: both kinds, alone and together, under both skip_error values.
TARGETS: dict[str, dict[str, Any]] = {
    "text": {"topic": True, "skip_error": False},
    "csv": {"topic": True, "skip_error": True},
    "json": {"quarantine": True, "skip_error": False},
    "flatten": {"topic": True, "quarantine": True, "skip_error": True},
    "binary": {"quarantine": True, "skip_error": False},
}


@dataclass(frozen=True)
class ErrorRow:
    offset: int
    reason: str
    stage: str
    key: bytes | None
    value: bytes | None
    decoded: str | None = None  # a quarantine table's ``_decoded`` (the error topic does not carry it)


@dataclass
class Outcome:
    """What one run made of the messages of one topic, as read back."""

    ran: Ran
    sent: list[tuple[bytes | None, bytes | None]]
    offsets: list[int]  # offset of sent[i]
    rows: dict[int, dict[str, Any]]
    errors: dict[str, dict[int, ErrorRow]]  # per target: "topic" and/or "quarantine"


def _pipeline(
    fmt: str,
    ns: str,
    topic: str,
    target: dict[str, Any],
    writer: str | None = None,
    settings: dict[str, Any] | None = None,
) -> tuple[str, str, str | None, str | None]:
    """The fixture pipeline of ``fmt`` on a fresh namespace and topic, with an error target (and ``writer``, ``settings``)."""
    fixture = load_target(fmt)
    doc = yaml.safe_load((REPO / fixture.pipeline).read_text())
    (table,) = [t for t in doc["tables"] if f"{t['namespace']}.{t['name']}" == fixture.table]
    table["namespace"] = ns
    table["source"]["topics"] = [topic]
    errors: dict[str, Any] = {"skip_error": target["skip_error"]}
    error_topic = unique(f"{fmt}_errors") if target.get("topic") else None
    quarantine = f"{ns}.{table['name']}_quarantine" if target.get("quarantine") else None
    if error_topic:
        errors["error_topic"] = error_topic
    if quarantine:
        errors["quarantine_table"] = quarantine
    table["errors"] = errors
    if writer is not None:
        table["write"] = {"engine": writer}
    for key, value in (settings or {}).items():
        table[key] = {**table.get(key, {}), **value} if isinstance(value, dict) else value
    doc["tables"] = [table]
    return yaml.safe_dump(doc, sort_keys=False), f"{ns}.{table['name']}", error_topic, quarantine


def _scan(lake: Any, identifier: str) -> list[dict[str, Any]]:
    catalog = lake.pyiceberg()
    if not catalog.table_exists(identifier):
        return []
    rows: list[dict[str, Any]] = catalog.load_table(identifier).scan().to_arrow().to_pylist()
    return rows


def _unique_by_offset(rows: list[Any], offset: Any) -> dict[int, Any]:
    out: dict[int, Any] = {}
    for row in rows:
        o = offset(row)
        assert o not in out, f"offset {o} appears twice"
        out[o] = row
    return out


def run_messages(
    tmp_path: Path,
    lake: Any,
    stack: Any,
    fmt: str,
    messages: list[tuple[bytes | None, bytes | None]],
    writer: str | None = None,
    settings: dict[str, Any] | None = None,
    target: dict[str, Any] | None = None,
) -> Outcome:
    """Produce ``messages`` to a fresh topic, run the fixture table of ``fmt`` once, read everything back.

    ``target``: where bad records go, in place of the format's :data:`TARGETS`.
    """
    target = target or TARGETS[fmt]
    ns, topic = unique(f"corpus_{fmt}"), unique(f"corpus_{fmt}")
    yaml_text, identifier, error_topic, quarantine = _pipeline(fmt, ns, topic, target, writer, settings)
    produce(stack.kafka_bootstrap, topic, messages, partition=0, config=BIG_MESSAGES)
    source = consume_all(stack.kafka_bootstrap, topic)
    assert [(r.key, r.value) for r in source] == messages  # the broker kept every byte, in order
    ran = run_pipeline(tmp_path, yaml_text)  # raises if the job fails
    assert_verified(tmp_path / "pipelines" / "p.yml")

    rows = _unique_by_offset([r for r in _scan(lake, identifier) if r["topic"] == topic], lambda r: r["offset"])
    errors: dict[str, dict[int, ErrorRow]] = {}
    if error_topic:
        published = []
        for rec in consume_all(stack.kafka_bootstrap, error_topic):
            h = {k: (v or b"").decode() for k, v in rec.headers}
            assert (h[H_TOPIC], h[H_PARTITION]) == (topic, "0")
            published.append(ErrorRow(int(h[H_OFFSET]), h[H_REASON], h[H_STAGE], rec.key, rec.value))
        errors["topic"] = _unique_by_offset(published, lambda e: e.offset)
    if quarantine:
        quarantined = [
            ErrorRow(r["offset"], r["_error"], r["_error_stage"], r["key"], r["value"], r["_decoded"])
            for r in _scan(lake, quarantine)
            if r["topic"] == topic
        ]
        errors["quarantine"] = _unique_by_offset(quarantined, lambda e: e.offset)
    return Outcome(ran, messages, [r.offset for r in source], rows, errors)


def assert_counts_add_up(out: Outcome) -> None:
    """Every message is a row or an error row in every target, never both, never lost; the run's own
    counts agree; every error row has a reason and the original bytes."""
    assert out.ran.error is None
    every = set(out.offsets)
    by_offset = dict(zip(out.offsets, out.sent, strict=True))
    assert set(out.rows) <= every
    for where, errors in out.errors.items():
        assert set(errors) <= every, where
        assert not set(errors) & set(out.rows), f"{where}: offsets both written and rejected"
        assert len(out.rows) + len(errors) == len(out.sent), where
        for offset, e in errors.items():
            assert e.reason, f"{where}: offset {offset} has no reason"
            assert e.stage == "decode", (offset, e.stage)
            assert (e.key, e.value) == by_offset[offset], f"{where}: offset {offset} lost its original bytes"
    if not out.errors:
        assert len(out.rows) == len(out.sent)
    reports = out.ran.reports
    assert sum(r.records_written for r in reports) == len(out.rows)
    assert sum(r.records_failed for r in reports) == len(out.sent) - len(out.rows)
    assert sum(r.records_skipped for r in reports) == 0  # an error target is set: nothing is dropped
    if "topic" in out.errors:
        assert sum(r.records_published for r in reports) == len(out.errors["topic"])
    if "quarantine" in out.errors:
        assert sum(r.records_quarantined for r in reports) == len(out.errors["quarantine"])


def assert_kept_as_sent(fmt: str, out: Outcome) -> None:
    """Formats that keep the payload as sent: each row holds exactly its message's bytes."""
    if fmt not in ("text", "json", "binary"):
        return
    for offset, (key, value) in zip(out.offsets, out.sent, strict=True):
        row = out.rows.get(offset)
        if row is None:
            continue
        if fmt == "binary":
            assert (row["key"], row["value"]) == (key, value), offset
        else:
            assert row["key"] is None, offset  # mode value
            assert row["value"] == (None if value is None else value.decode("utf-8")), offset


def _utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_corpus_message_lands_in_the_table_or_the_error_target(tmp_path, lake, stack, fmt):
    corpus = load(fmt)
    out = run_messages(tmp_path, lake, stack, fmt, [(m.key, m.value) for m in corpus])
    assert_counts_add_up(out)
    assert_kept_as_sent(fmt, out)
    assert out.errors or fmt == "binary"
    wrong = []
    for m, offset in zip(corpus, out.offsets, strict=True):
        for where, errors in out.errors.items():
            if m.expect == "error":
                e = errors.get(offset)
                if e is None or (m.reason_contains and m.reason_contains not in e.reason):
                    wrong.append(f"{m.id}: expected an error with {m.reason_contains!r} in {where}, got {e or 'a row'}")
        if m.expect == "good" and offset not in out.rows:
            reasons = {w: e[offset].reason for w, e in out.errors.items() if offset in e}
            wrong.append(f"{m.id}: expected a row, got errors {reasons}")
    assert not wrong, "\n".join(wrong)


# Property-based: hypothesis draws the messages (derandomized, so every CI run draws the same bytes)
# and they go through one pipeline run per format, as one batch: a run per example would be too slow.
GENERATED = 200


def draw(strategy: st.SearchStrategy[Any], n: int) -> list[Any]:
    drawn: list[Any] = []

    @settings(
        derandomize=True,
        max_examples=n,
        phases=[Phase.generate],
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(strategy)
    def collect(example: Any) -> None:
        drawn.append(example)

    collect()
    return drawn


@pytest.mark.parametrize("fmt", FORMATS)
def test_generated_hostile_batches_add_up(tmp_path, lake, stack, fmt):
    messages = draw(hostile.messages(fmt), GENERATED)
    assert len(messages) == GENERATED
    out = run_messages(tmp_path, lake, stack, fmt, messages)
    assert_counts_add_up(out)
    assert_kept_as_sent(fmt, out)
    if fmt == "binary":
        assert not any(out.errors.values())  # binary cannot fail
    else:
        assert all(out.errors.values()) and out.rows  # the draws really are mixed
    if fmt == "text":  # an independent oracle: text fails exactly on a value that is not UTF-8
        rejected = {o for o, (_k, v) in zip(out.offsets, messages, strict=True) if v is not None and not _utf8(v)}
        assert set(out.errors["topic"]) == rejected


# Columns that differ between two runs of the same messages: the topic (a fresh one per run), the
# broker's CreateTime and the flush time's partition value.
_PER_RUN = ("topic", "timestamp", "pt")


def rows(out: Outcome) -> dict[int, dict[str, Any]]:
    """The rows of a run by offset, without the columns that differ between runs of the same messages."""
    return {o: {k: v for k, v in r.items() if k not in _PER_RUN} for o, r in out.rows.items()}


@pytest.mark.parametrize("fmt", FORMATS)
def test_both_writers_make_the_same_rows_and_error_rows_of_the_corpus_and_generated_batches(tmp_path, lake, stack, fmt):
    """Issue 20: Spark's writer and the Arrow writer's single pass, value for value, on hostile input."""
    messages = [(m.key, m.value) for m in load(fmt)] + draw(hostile.messages(fmt), 100)
    outs = {w: run_messages(tmp_path / w, lake, stack, fmt, messages, writer=w) for w in ("spark", "arrow")}
    spark_out, arrow_out = outs["spark"], outs["arrow"]
    assert arrow_out.offsets == spark_out.offsets

    assert rows(arrow_out) == rows(spark_out)
    assert arrow_out.errors == spark_out.errors  # per target: offset, reason, stage, original key and value
    assert rows(spark_out) and (any(spark_out.errors.values()) or fmt == "binary")  # the batch really is mixed


BATCH = 90  # records per batch: the corpus and the generated messages span two or more


@pytest.mark.parametrize("fmt", ["json", "flatten"])
def test_records_written_where_the_arrow_decoder_parses_them_match_sparks_decoder_and_writer(
    tmp_path, lake, stack, fmt, monkeypatch
):
    """Issue 20: ``decoder: arrow`` with the Arrow writer writes the records it certifies in the task
    that parses them (write/certified.py) and leaves the rest to Spark's decoder; value for value the
    same rows and error rows as Spark's decoder and writer, on the corpus and generated batches."""
    from kafka_iceberg.write import certified, writer

    parsed: list[certified.ParsedBatch] = returns(
        monkeypatch, writer, "write_where_parsed", certified.write_where_parsed
    )
    # Expectations pyarrow evaluates in the task, and records that violate them: a quarantine rule
    # (the tasks quarantine the violators, or leave them to Spark, which routes them) and a warn rule
    # (counted, written).
    if fmt == "flatten":
        rules = {"id_not_negative": ("id >= 0", "quarantine"), "named": ("name IS NOT NULL", "warn")}
        extra = [b'{"id": -1, "name": "negative"}', b'{"id": 3}', b'{"id": 4, "name": "ok"}']
    else:
        rules = {"not_empty": ("value <> '{}'", "quarantine"), "short": ("value < '{\"z'", "warn")}
        extra = [b"{}", b'{"zz": 1}', b'{"a": 1}']
    expectations = {name: {"expr": sql, "on_violation": action} for name, (sql, action) in rules.items()}
    messages = [(m.key, m.value) for m in load(fmt)] + draw(hostile.messages(fmt), 100)
    messages += [(None, value) for value in extra]
    settings: dict[str, Any] = {"expectations": expectations}
    if fmt == "flatten":
        settings["schema_evolution"] = "strict"  # what the Arrow decoder needs
    runs = {"spark": ("spark", "spark"), "parsed": ("arrow", "arrow")}
    outs = {
        name: run_messages(
            tmp_path / name,
            lake,
            stack,
            fmt,
            messages,
            writer=w,
            settings={"source": {"decoder": d, "max_records_per_batch": BATCH}, **settings},
        )
        for name, (d, w) in runs.items()
    }
    # Only the second run writes where it parses: every one of its batches did, the later ones
    # without planning their decode again (the table's columns are known by then).
    assert len(parsed) == -(-len(messages) // BATCH)
    certified_count = sum(p.stats["decoded"] for p in parsed)
    assert certified_count > 0 and any(p.left is not None for p in parsed)  # some written in the task, some not
    assert sum(len(p.errors) for p in parsed) > 0  # broken documents settled by the tasks (decode/not_json.py)
    assert sum(len(p.quarantined) for p in parsed) > 0  # and violations quarantined there (write/certified.py)
    assert outs["parsed"].offsets == outs["spark"].offsets

    assert rows(outs["parsed"]) == rows(outs["spark"])
    assert outs["parsed"].errors == outs["spark"].errors  # per target: offset, reason, stage, bytes, _decoded
    assert certified_count < len(rows(outs["spark"]))  # Spark's decoder wrote some rows of the second run too

    def failed(out: Outcome) -> dict[str, int]:
        return {name: sum(r.expectations_failed.get(name, 0) for r in out.ran.reports) for name in rules}

    assert failed(outs["parsed"]) == failed(outs["spark"])
    assert all(failed(outs["spark"]).values())  # each rule was violated


@pytest.mark.parametrize("fmt", ["flatten", "csv"])
def test_upsert_rows_made_where_the_arrow_decoder_parses_them_match_sparks_decoder(
    tmp_path, lake, stack, fmt, monkeypatch
):
    """Issue 20: under ``commit_mode: upsert`` the task that parses a record with Arrow builds and
    checks its row for the MERGE (write/certified.py, ``rows_parsed``), and only the records it leaves
    go through Spark's decoder; value for value the same table, error rows and counts as Spark's
    decoder, with keys repeated within and across batches."""
    from kafka_iceberg.run import batch
    from kafka_iceberg.write import certified

    parsed: list[certified.ParsedRows] = returns(monkeypatch, batch, "rows_where_parsed", certified.rows_where_parsed)
    # The csv fixture has no quarantine table: its violators are dropped (counted, not written).
    away = "quarantine" if fmt == "flatten" else "drop"
    # A record without an id meets the first rule: the MERGE's write checks reject it (its key is null).
    rules = {"id_small": ("id IS NULL OR id < 1000000", away), "named": ("name IS NOT NULL", "warn")}
    if fmt == "flatten":
        extra = [b'{"id": 401, "name": "first"}', b'{"id": 2000000, "name": "big"}', b'{"id": 405}']
        extra += [b'{"name": "no id"}', b'{"id": 401, "name": "second"}', b'{"id": 406, "name": "six"}']
        doc = [{"id": i % 40, "name": f"n{i}", "extendinfo": {"i": i}} for i in range(180)]
        clean = [json.dumps(d, separators=(",", ":")).encode() for d in doc]  # compact: as Jackson prints it
        last = b'{"id": 406, "name": "six again"}'
    else:
        extra = [b"401,first,eu", b"2000000,big,eu", b"405,,us", b",no id,us", b"401,second,eu", b"406,six,"]
        clean = [f"{i % 40},n{i},r{i % 3}".encode() for i in range(180)]
        last = b"406,six again,ap"
    # Hostile batches first (Arrow leaves most of them to Spark), then clean ones it parses, the
    # checks' cases among them: keys repeat within and across batches.
    messages = [(m.key, m.value) for m in load(fmt)] + draw(hostile.messages(fmt), 100)
    block = clean[:60] + extra + clean[60:120] + extra + clean[120:] + [last] * 3
    messages += [(None, value) for value in block]
    settings: dict[str, Any] = {
        "commit_mode": "upsert",
        "key_fields": ["id"],
        "expectations": {name: {"expr": sql, "on_violation": action} for name, (sql, action) in rules.items()},
    }
    if fmt == "flatten":
        settings["schema_evolution"] = "strict"  # what the Arrow decoder needs
    outs = {
        decoder: run_messages(
            tmp_path / decoder,
            lake,
            stack,
            fmt,
            messages,
            settings={"source": {"decoder": decoder, "max_records_per_batch": BATCH}, **settings},
        )
        for decoder in ("spark", "arrow")
    }
    assert len(parsed) == -(-len(messages) // BATCH)  # only the second run, every batch of it
    certified_count = sum(p.stats["in"] for p in parsed)
    assert certified_count >= len(clean) and any(p.left is not None for p in parsed)  # by Arrow, and not
    assert outs["arrow"].offsets == outs["spark"].offsets

    assert rows(outs["arrow"]) == rows(outs["spark"])
    assert outs["arrow"].errors == outs["spark"].errors  # per target: offset, reason, stage, original bytes
    by_id = {r["id"]: r for r in rows(outs["spark"]).values()}
    assert len(by_id) == len(rows(outs["spark"]))  # one row per key
    assert by_id[401]["name"] == "second" and by_id[406]["name"] == "six again"  # a key's newest record wins
    assert {by_id[i]["name"] for i in range(40)} == {f"n{i}" for i in range(140, 180)}
    assert 2000000 not in by_id

    def counts(out: Outcome) -> list[Any]:
        reports = out.ran.reports
        failed = {name: sum(r.expectations_failed.get(name, 0) for r in reports) for name in rules}
        passed = {name: sum(r.expectations_passed.get(name, 0) for r in reports) for name in rules}
        per_batch = [(r.records_in, r.records_written, r.records_failed, r.records_dropped) for r in reports]
        return [failed, passed, per_batch]

    assert counts(outs["arrow"]) == counts(outs["spark"])
    assert all(counts(outs["spark"])[0].values())  # each rule was violated


@pytest.mark.parametrize("fmt", ["text", "binary"])
def test_text_and_binary_rows_made_as_sent_by_the_writing_tasks_match_sparks_decoder_and_writer(
    tmp_path, lake, stack, fmt, monkeypatch
):
    """Issue 20: with the Arrow writer the task that writes a text or binary batch makes its rows
    (decode/as_sent.py) and settles every invalid UTF-8 key or value itself; value for value the
    same rows, error rows (reason, decoded fields, original bytes) and counts as Spark's decoder
    and writer, key and value both written, over several batches."""
    from kafka_iceberg.write import certified, writer

    parsed: list[certified.ParsedBatch] = returns(
        monkeypatch, writer, "write_where_parsed", certified.write_where_parsed
    )
    # pyarrow translates no rule over a binary column (checks/arrow_rules.py): binary has none
    rules = {"not_banned": ("value <> 'banned'", "quarantine"), "keyed": ("key IS NOT NULL", "warn")}
    rules = rules if fmt == "text" else {}
    # Keys Jackson escapes beside a value that is not UTF-8 (their error row's decoded fields), keys
    # that are not UTF-8 beside values that are, and both at once.
    keys = [b'q"uote', b"back\\slash", b"line\nfeed", b"ctl\x01", "\u00e9t\u00e9 \U0001f600".encode(), b""]
    extra = [(k, b"\xff\xfe") for k in keys] + [(b"\xc0\xaf", b"fine"), (b"\xed\xa0\x80", b"\x80"), (None, b"banned")]
    extra += [(b"k", b"banned"), (None, None), (b"k", None)]
    messages = [(m.key, m.value) for m in load(fmt)] + draw(hostile.messages(fmt), 100) + extra
    settings = {  # ``auto`` takes it for text, measured faster; binary only when asked (docs/decode.md)
        "source": {"mode": "default", "max_records_per_batch": BATCH, "decoder": "auto" if fmt == "text" else "arrow"},
        "expectations": {name: {"expr": sql, "on_violation": action} for name, (sql, action) in rules.items()},
    }
    target = {"topic": True, "quarantine": True, "skip_error": False}
    outs = {
        w: run_messages(tmp_path / w, lake, stack, fmt, messages, writer=w, settings=settings, target=target)
        for w in ("spark", "arrow")
    }
    # Only the Arrow writer's run writes as sent: every batch, nothing left to Spark's decoder.
    assert len(parsed) == -(-len(messages) // BATCH)
    assert all(p.left is None for p in parsed)
    if fmt == "text":
        assert sum(len(p.errors) for p in parsed) == len(outs["spark"].errors["topic"]) > 10  # settled in the tasks
        assert sum(len(p.quarantined) for p in parsed) > 0  # the rule's violations, routed there too
    assert outs["arrow"].offsets == outs["spark"].offsets

    assert rows(outs["arrow"]) == rows(outs["spark"])
    assert outs["arrow"].errors == outs["spark"].errors  # per target: offset, reason, stage, bytes, _decoded
    decoded = {e.decoded for e in outs["spark"].errors.get("quarantine", {}).values()}
    if fmt == "text":
        assert '{"key":"q\\"uote"}' in decoded and '{"key":"ctl\\u0001"}' in decoded  # printed as Jackson does
        assert '{"value":"fine"}' in decoded  # a key that is not UTF-8 leaves the value decoded

    def counts(out: Outcome) -> list[Any]:
        reports = out.ran.reports
        failed = {name: sum(r.expectations_failed.get(name, 0) for r in reports) for name in rules}
        per_batch = [(r.records_in, r.records_written, r.records_failed, r.records_quarantined) for r in reports]
        return [failed, per_batch]

    assert counts(outs["arrow"]) == counts(outs["spark"])
    assert all(counts(outs["spark"])[0].values())  # each rule was violated
