"""Certified records written where they are parsed: the Arrow decoder and the Arrow writer in one task.

With ``source.decoder: arrow`` and the Arrow writer's single pass, a batch's records cross from
Spark to Python once. Each task parses its Arrow batches with the Arrow decoder
(:func:`~kafka_iceberg.decode.arrow.certify_batch`), builds the table's rows of the records it
certifies and writes them as data files right there; only the records it did not certify go back
to Spark, whose decoder and checks sort them as usual (:mod:`kafka_iceberg.checks.labels`).
Without this, certified records went Python → Spark rows → Python again before being written,
which cost about as much as parsing them (docs/benchmarks/results.md, "Decoders").

It applies where a certified record needs nothing else from Spark: json, flatten whose
columns Arrow reads as their own type (long, int, double, boolean, string) or converts from their
text (timestamp, date: :func:`~kafka_iceberg.decode.arrow.convert_text`), and csv whose columns
are strings or converted from their text (long, int, double, boolean, timestamp, date); expectations all in
the SQL that :mod:`kafka_iceberg.checks.arrow_rules` translates; no ``include_headers`` (the
headers map is built by Spark SQL). A certified record that misses a value the table or the JSON
Schema requires, or violates a ``fail`` rule, is left to Spark, which routes it as on every other
path; a ``warn`` rule's violations are counted and written; one violating a ``quarantine`` rule
becomes its quarantine row here, as Spark's side builds it (:func:`_routed`), and one violating
only a ``drop`` rule is counted and not written. A json or flatten message that is certainly not
one JSON document, and a csv or flatten record with a field no conversion of Spark's accepts,
becomes its error row here, with the reason Spark's decoder gives it
(:mod:`~kafka_iceberg.decode.not_json`, :mod:`~kafka_iceberg.decode.csv_errors`,
:mod:`~kafka_iceberg.decode.flatten_errors`).

An upsert keeps Spark's MERGE: its tasks hand the certified records back as the table's rows
(:func:`rows_parsed`) instead of writing them, with the error and quarantine rows of what they
settled or routed, and the MERGE takes those rows with the ones Spark's decoder made of the rest
(``run/batch.py``, ``_parse_for_merge``).

The schema-driven formats (Avro, Protobuf, JSON Schema) take :func:`write_parsed` too, with their
codec in place of the layout (``run/batch.py``, ``_decode_where_written``): their decoder is Python
on either path, so a record that decodes is certified, and one whose decode error is settled (the
bytes or the writer schema refused it) becomes its error row here, with Spark's side's reason; any
other that does not decode, or whose schema id the codec does not know (reported back, so the
driver fetches it), is left to Spark.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kafka_iceberg.checks.arrow_rules import Rule, holds
from kafka_iceberg.checks.labels import quarantined_by
from kafka_iceberg.decode import csv_errors, flatten_errors, not_json
from kafka_iceberg.decode.arrow import (
    NATIVE_JSON_TYPES,
    OK,
    Layout,
    certify_batch,
    convert_text,
    mistyped_found,
    nested_found,
)
from kafka_iceberg.decode.as_sent import AS_SENT, certify_as_sent
from kafka_iceberg.decode.as_sent import settled_reasons as not_utf8_reasons
from kafka_iceberg.decode.codec import Codec
from kafka_iceberg.decode.plan import ERROR_STAGE, HEADERS, KEY, VALUE, payload_part
from kafka_iceberg.decode.readable import Unprintable, spark_json
from kafka_iceberg.decode.schemaful import Readers, decoded_fields, unseen_ids
from kafka_iceberg.records import FEW_FAILURE_BYTES, FEW_FAILURES, TOMBSTONE_COLUMN
from kafka_iceberg.source.offsets import arrow_offsets, merge_offsets
from kafka_iceberg.spec.columns import KAFKA_COLUMNS, PT_COLUMN
from kafka_iceberg.spec.model import TableSpec
from kafka_iceberg.tasks import map_in_arrow
from kafka_iceberg.write.arrow_files import (
    AttemptFiles,
    FileTarget,
    WrittenFile,
    data_files,
    leaving,
    sorted_schema,
    task_per_core,
    written_files,
)

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.accumulators import Accumulator
    from pyspark.sql import DataFrame, Row
    from pyspark.sql.types import StructType

log = logging.getLogger(__name__)

_LEFT = "left"  # a record the task did not certify, in the Kafka shape, for Spark's decoder
_LEFT_BYTES = "left_bytes"  # in a task's counts: the Arrow size of the records it left
_UNSEEN = "unseen"  # in a task's counts: schema ids its codec did not know
_NESTED = "nested"  # in a task's counts: flatten string columns it found an object or array in
_KAFKA_SHAPE = ("key", "value", "topic", "partition", "offset", "timestamp", "headers")
_UTC_ZONES = frozenset({"UTC", "ETC/UTC", "GMT", "Z", "+00:00"})
_READABLE = {"bigint": "long"}  # Spark's type names readable.py spells otherwise


def writes_where_parsed(spec: TableSpec, layout: Layout | None, rules: list[Rule | None]) -> bool:
    """Whether the single pass writes ``spec``'s certified records in the task that parses them.

    ``rules``: the table's expectations translated (:func:`~kafka_iceberg.checks.arrow_rules.translate`).
    """
    if layout is None or spec.source.include_headers or any(rule is None for rule in rules):
        return False
    if layout.fmt == "json" or layout.fmt in AS_SENT:
        return True
    read = ("string",) if layout.fmt == "csv" else NATIVE_JSON_TYPES  # what Arrow's reader gives as is
    return all(t in read or layout.converted_where_parsed(t) for _, t in layout.columns)


# Atomic column types a decoded value is cast to as Arrow casts it (the rest must match exactly).
_WIDENINGS = frozenset({("int", "bigint"), ("float", "double")})


def takes_as_is(columns: StructType, table: StructType) -> bool:
    """Whether the table's columns take ``columns``' values through an Arrow cast, name for name.

    A column the table widened (int to long, float to double, a decimal's precision) casts; a
    nested column must have the table's shape exactly (a struct the table holds more fields in is
    aligned by Spark's writer, not here).
    """
    by_name = {f.name: f.dataType for f in table.fields}
    return all(f.name in by_name and _casts(f.dataType, by_name[f.name]) for f in columns.fields)


def _casts(source: Any, target: Any) -> bool:
    from pyspark.sql import types as T

    if isinstance(source, T.StructType):
        return (
            isinstance(target, T.StructType)
            and source.names == target.names
            and all(_casts(a.dataType, b.dataType) for a, b in zip(source.fields, target.fields, strict=True))
        )
    if isinstance(source, T.ArrayType):
        return isinstance(target, T.ArrayType) and _casts(source.elementType, target.elementType)
    if isinstance(source, T.MapType):
        return (
            isinstance(target, T.MapType)
            and _casts(source.keyType, target.keyType)
            and _casts(source.valueType, target.valueType)
        )
    a, b = source.simpleString(), target.simpleString()
    if isinstance(source, T.DecimalType) and isinstance(target, T.DecimalType):
        return target.scale == source.scale and target.precision >= source.precision
    return a == b or (a, b) in _WIDENINGS


@dataclass(frozen=True)
class Part:
    """What the task needs beside the layout and the target (pickled to Spark's Python workers)."""

    part: str  # the payload column a json record's text goes to: ``value``, or ``key`` under mode key
    pt: str | None  # the batch's ``pt`` value, None when the table has no ``pt`` column
    rules: tuple[tuple[str, Rule], ...] = ()  # (on_violation, translated rule) of each expectation, in order
    zoneless_utc: bool = True  # Spark's session time zone is UTC: a timestamp without an offset is read as UTC
    expectations: tuple[tuple[str, str], ...] = ()  # (name, SQL) of each expectation, in order
    # The row's payload columns and their Spark types, in the row's order: a quarantined record's
    # ``_decoded`` (:func:`_routed`). Empty: quarantine and drop rules' violations are Spark's to route.
    payload: tuple[tuple[str, str], ...] = ()


# -- Python side (runs in Spark's Python workers) --------------------------------------------------
Parser = Layout | Codec  # the Arrow decoder's layout, or a schema-driven format's codec


def _rows(
    certified: pa.RecordBatch, parsed: dict[str, pa.Array], text: str | None, part: Part, names: list[str]
) -> dict[str, pa.Array]:
    """The table's columns (by name) of certified records; a column no record fills is all null.

    ``parsed``: the payload's columns by name; ``text``: the column holding a json record's text.
    """
    import pyarrow as pa

    n = certified.num_rows
    out: dict[str, pa.Array] = {}
    for name in names:
        if name in KAFKA_COLUMNS:
            out[name] = certified.column(name)
        elif name == PT_COLUMN and part.pt is not None:
            out[name] = pa.repeat(pa.scalar(part.pt, pa.string()), n)
        elif text is not None and name == part.part:
            out[name] = certified.column(text).cast(pa.string())  # certified text is UTF-8
        elif name in parsed:
            out[name] = parsed[name]
        else:
            out[name] = pa.nulls(n)
    return out


@dataclass
class _Certified:
    """One Arrow batch after certification: the table's columns of the records kept, and the rest."""

    columns: dict[str, pa.Array]  # the table's columns (by name) of the certified records
    written: int  # how many records ``columns`` holds
    left: pa.RecordBatch | None  # the records left to Spark, as they came; None when there are none
    violations: list[int]  # violations of each rule among the records decoded here (written or routed)
    nested: tuple[str, ...] = ()  # flatten string columns read by expressions (decode.arrow.nested_found)
    mistyped: tuple[tuple[str, str], ...] = ()  # (key, JSON type) left out of the parse (decode.arrow.mistyped_found)
    errors: pa.RecordBatch | None = None  # records whose decode error is settled here
    reasons: tuple[str, ...] = ()  # their reasons, in order
    decoded: tuple[str | None, ...] = ()  # their decoded fields as Spark's to_json prints them (csv), in order
    routed: _Routed | None = None  # records routed here by a quarantine or drop rule


@dataclass
class _Routed:
    """Records a quarantine or drop rule takes out of the table, routed by the task (:func:`_routed`)."""

    quarantined: pa.RecordBatch  # the records a quarantine rule took out, as they came
    reasons: list[str]  # of each: the rules it failed
    stages: list[str]  # ``expectation:<the first of them>``
    rows: list[str]  # its row as Spark's ``to_json`` prints it
    dropped: int = 0  # records a drop rule (and no quarantine rule) took out: counted only


def _parsed(
    batch: pa.RecordBatch, layout: Layout, part: Part, names: list[str]
) -> tuple[Any, pa.RecordBatch, dict[str, pa.Array], Any]:
    """The Arrow decoder's pass: ``(certified mask, certified records, their columns, converted exactly)``."""
    import numpy as np
    import pyarrow as pa

    checked = certify_as_sent(batch, layout) if layout.fmt in AS_SENT else certify_batch(batch, layout)
    ok = checked.column(OK).to_numpy(zero_copy_only=False).astype(bool)
    text = layout.source if layout.fmt == "json" else None
    parsed_names = [f"_ki_a{i}" for i in range(len(layout.columns))]
    if ok.all():
        certified = checked  # a clean batch: no copy
    else:  # only what the rows are made of is copied, not the payloads and headers as they came
        made_of = {*KAFKA_COLUMNS, text, *parsed_names}
        certified = checked.drop_columns([c for c in checked.schema.names if c not in made_of]).filter(pa.array(ok))
    parsed = {name: certified.column(column) for (name, _), column in zip(layout.columns, parsed_names, strict=True)}
    columns = _rows(certified, parsed, text, part, names)
    present = np.ones(certified.num_rows, dtype=bool)
    for name, col_type in layout.columns:  # text Arrow cannot convert exactly is Spark's to convert
        if layout.converted_where_parsed(col_type):
            columns[name], converted = convert_text(columns[name], col_type, zoneless_utc=part.zoneless_utc)
            present &= converted
    return ok, certified, columns, present


def _decoded(
    batch: pa.RecordBatch, codec: Codec, readers: Any, part: Part, names: list[str]
) -> tuple[Any, pa.RecordBatch, dict[str, pa.Array], Any, dict[int, str]]:
    """A schema-driven format's decode (:func:`~kafka_iceberg.decode.schemaful.decoded_fields`), as :func:`_parsed`.

    Also the records whose decode error is settled, by row, with their reasons.
    """
    import numpy as np

    ok, decoded, fields, errors = decoded_fields(batch, codec, readers)
    columns = _rows(decoded, fields, None, part, names)
    present = np.ones(decoded.num_rows, dtype=bool)
    return ok.to_numpy(zero_copy_only=False).astype(bool), decoded, columns, present, errors


def _certify(
    batch: pa.RecordBatch,
    parser: Parser,
    part: Part,
    names: list[str],
    required: list[str],
    *,
    readers: Any = None,
) -> _Certified:
    """Certify ``batch`` and build the table's columns ``names`` of what it certifies.

    A record is left to Spark when it was not certified (the Arrow decoder) or did not decode (a
    schema-driven format, ``readers`` its decoders), when text Arrow cannot convert exactly is in
    it, when one of ``required`` is missing (Spark explains it) or when it violates a ``fail``
    rule (Spark reports it), and, without ``part.payload``, a ``quarantine`` or ``drop`` rule
    (Spark routes it); with it, this task routes it (:func:`_routed`). A record whose decode
    error is settled is an error here, with the reason Spark's side would give it: a schema-driven
    record the bytes or the writer schema refused (Spark's side runs the same decoder), and what
    :func:`_settled` settles.
    """
    import numpy as np
    import pyarrow as pa

    errors: dict[int, tuple[str, str | None]] = {}  # row → (reason, decoded fields)
    if isinstance(parser, Codec):
        ok, certified, columns, present, refused = _decoded(batch, parser, readers, part, names)
        errors = {i: (reason, None) for i, reason in refused.items()}
    else:
        ok, certified, columns, present = _parsed(batch, parser, part, names)
    nested, mistyped = (nested_found(certified), mistyped_found(certified)) if isinstance(parser, Layout) else ((), ())
    for name in required:  # a missing required value is Spark's to explain
        if name in columns:
            present &= columns[name].is_valid().to_numpy(zero_copy_only=False)
    verdicts = [holds(rule, columns, certified.num_rows) for _, rule in part.rules]
    broken = {action: np.zeros(certified.num_rows, dtype=bool) for action in ("fail", "quarantine", "drop")}
    for (action, _), held in zip(part.rules, verdicts, strict=True):
        if action in broken:
            broken[action] |= ~held
    kept = present & ~broken["fail"]  # a fail rule's violation is Spark's to report
    routed, out = None, np.zeros(certified.num_rows, dtype=bool)  # out: routed here, neither written nor left
    if part.payload and (broken["quarantine"] | broken["drop"])[kept].any():
        failed = [(name, sql, ~held) for (action, _), (name, sql), held in zip(part.rules, part.expectations, verdicts,
                  strict=True) if action == "quarantine"]  # fmt: skip
        routed, out = _routed(batch, np.flatnonzero(ok), columns, kept & broken["quarantine"], failed, part=part)
        dropped = kept & broken["drop"] & ~broken["quarantine"]
        routed.dropped, out = int(dropped.sum()), out | dropped
    written = kept & ~broken["quarantine"] & ~broken["drop"]
    counted = written | out
    violations = [int((~held[counted]).sum()) for held in verdicts]
    if not written.all():
        ok[np.flatnonzero(ok)[~counted]] = False
        keep = pa.array(written)
        columns = {name: column.filter(keep) for name, column in columns.items()}
    if isinstance(parser, Layout) and not ok.all():
        errors = _settled(batch, parser, part, names, np.flatnonzero(~ok))
    errored = None
    if errors:
        errored = batch.take(pa.array(list(errors), pa.int64()))
        ok[list(errors)] = True  # not left to Spark
    left = None if ok.all() else batch.filter(pa.array(~ok))
    reasons, decoded = (tuple(x) for x in zip(*errors.values(), strict=True)) if errors else ((), ())
    return _Certified(
        columns, int(written.sum()), left, violations, nested, mistyped, errored, reasons, decoded, routed
    )


def _routed(
    batch: pa.RecordBatch,
    rows: Any,
    columns: dict[str, pa.Array],
    quarantine: Any,
    failed: list[tuple[str, str, Any]],
    *,
    part: Part,
) -> tuple[_Routed, Any]:
    """The certified records ``quarantine`` marks, quarantined as Spark's side would, and which were.

    ``rows``: each certified record's row in ``batch``; ``failed``: each quarantine rule's name, SQL
    and where it failed. A quarantined record's error row holds the rules it failed and its row as
    Spark's ``to_json`` prints it; one whose row is not printed here certainly
    (:mod:`~kafka_iceberg.decode.readable`) is left to Spark, as a record failing a fail rule is.
    """
    import numpy as np
    import pyarrow as pa

    picked, reasons, stages, printed = [], [], [], []
    for i in np.flatnonzero(quarantine).tolist():
        fields = [(name, _READABLE.get(t, t), columns[name][i].as_py()) for name, t in part.payload if name in columns]
        try:
            row = spark_json(fields, utc=part.zoneless_utc) or "{}"
        except Unprintable:
            continue
        reason, stage = quarantined_by([(name, sql) for name, sql, where in failed if where[i]])
        picked.append(i)
        reasons.append(reason)
        stages.append(stage)
        printed.append(row)
    out = np.zeros(len(quarantine), dtype=bool)
    out[picked] = True
    quarantined = batch.take(pa.array(rows[picked], pa.int64()))
    return _Routed(quarantined, reasons, stages, printed), out


def _settled(
    batch: pa.RecordBatch, layout: Layout, part: Part, names: list[str], rows: Any
) -> dict[int, tuple[str, str | None]]:
    """Those of ``rows`` that certainly do not decode: Spark's decoder's reason and decoded fields.

    csv (:mod:`~kafka_iceberg.decode.csv_errors`), flatten (:mod:`~kafka_iceberg.decode.flatten_errors`),
    json (:mod:`~kafka_iceberg.decode.not_json`) or text (:mod:`~kafka_iceberg.decode.as_sent`).
    """
    if layout.fmt in AS_SENT:
        return not_utf8_reasons(batch, rows, layout)
    payload = batch.column(layout.source)
    if layout.fmt == "csv":
        return csv_errors.settled_reasons(payload, rows, layout, names, utc=part.zoneless_utc)
    if layout.fmt == "flatten":
        return flatten_errors.settled_reasons(payload, rows, layout, names, part=part.part, utc=part.zoneless_utc)
    return {i: (reason, None) for i, reason in not_json.settled_reasons(payload, rows, part.part).items()}


class _Leaving:
    """A task's records leaving the table as it settles or routes them: error and quarantine rows, drops."""

    def __init__(self, schema: pa.Schema):
        self.schema = schema
        self.errors: list[pa.RecordBatch] = []
        self.quarantined: list[pa.RecordBatch] = []
        self.dropped = 0

    def add(self, done: _Certified) -> None:
        """Those of one certified batch."""
        if done.errors is not None:
            stages = [ERROR_STAGE] * len(done.reasons)
            self.errors.append(_leaving_rows("error", done.errors, self.schema, reasons=done.reasons, stages=stages,
                                             decoded=done.decoded))  # fmt: skip
        if done.routed is not None:
            r = done.routed
            self.quarantined.append(_leaving_rows("quarantine", r.quarantined, self.schema, reasons=r.reasons,
                                                  stages=r.stages, decoded=r.rows))  # fmt: skip
            self.dropped += r.dropped

    def counts(self) -> dict[str, int]:
        """:func:`_stats`' ``errors``, ``quarantined`` and ``dropped``."""
        errors, quarantined = (sum(b.num_rows for b in kind) for kind in (self.errors, self.quarantined))
        return {"errors": errors, "quarantined": quarantined, "dropped": self.dropped}

    def rows(self) -> Iterator[pa.RecordBatch]:
        """The error rows, then the quarantine rows."""
        yield from self.errors
        yield from self.quarantined


def _stats(
    written: int,
    violations: list[int],
    offsets: list[Any],
    left: list[pa.RecordBatch],
    *,
    unseen: set[int],
    nested: set[str],
    errors: int,
    quarantined: int = 0,
    dropped: int = 0,
) -> dict[str, Any]:
    """A task's counts (:func:`~kafka_iceberg.checks.labels.merged_stats`' shape), plus what the driver learns.

    ``left``: the records left to Spark (counted, and their size); ``unseen``: schema ids the codec
    did not know; ``nested``: flatten string columns found holding objects or arrays; ``errors``:
    records the task found to be errors (counted in, not decoded); ``quarantined``, ``dropped``:
    records it routed by a rule (decoded, not written).
    """
    decoded = written + quarantined + dropped
    stats = {"in": decoded + errors, "decoded": decoded, "violations": violations, "quarantined": quarantined}
    stats["first"] = [None] * len(violations)  # a record violating a fail rule is left to Spark
    stats |= {"dropped": dropped, "offsets": merge_offsets(*offsets), _LEFT: sum(b.num_rows for b in left)}
    stats[_LEFT_BYTES] = sum(b.nbytes for b in left)
    return stats | {_UNSEEN: sorted(unseen), _NESTED: sorted(nested)}


def write_parsed(
    batches: Iterator[pa.RecordBatch],
    parser: Parser,
    part: Part,
    target: FileTarget,
    schema: pa.Schema,
    *,
    ledger: Accumulator[list[str]] | None = None,
) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` function: certified records as data files, the others back in the Kafka shape.

    ``parser``: the Arrow decoder's layout, or a schema-driven format's codec (its decoders are
    built once per task).

    Output rows follow SORTED_SCHEMA: one per data file (``file``), one with the counts of the
    certified records (``stats``, plus ``left``: how many were not certified), the error and
    quarantine rows of the records it settled or routed (``error``, ``quarantine``), one per record
    left to Spark (``left``, in its Kafka columns).
    """
    import pyarrow as pa
    from pyiceberg.table.metadata import TableMetadataUtil

    fields = TableMetadataUtil.parse_raw(target.metadata_json).schema().fields
    required = [f.name for f in fields if f.required] + _required(parser)
    readers = Readers(parser) if isinstance(parser, Codec) else None  # per task: schemas parsed once
    tables, left, offsets = [], [], []
    violations = [0] * len(part.rules)
    unseen: set[int] = set()  # schema ids the driver did not know of: their records are left to Spark
    nested: set[str] = set()
    outgoing = _Leaving(schema)
    for batch in batches:
        if not batch.num_rows:
            continue
        done = _certify(batch, parser, part, [f.name for f in fields], required, readers=readers)
        violations = [a + b for a, b in zip(violations, done.violations, strict=True)]
        tables.append(pa.table(done.columns))
        offsets.append(arrow_offsets(batch))  # the records left to Spark's too: no job finds theirs
        nested.update(done.nested)
        if isinstance(parser, Layout):  # the task's next batches start from what this one learned
            parser = _learned(parser, nested, done)
        outgoing.add(done)
        if done.left is not None:
            left.append(done.left)
            if isinstance(parser, Codec):
                unseen |= unseen_ids(done.left, parser)

    out: list[dict[str, Any]] = []
    certified = sum(t.num_rows for t in tables)
    with AttemptFiles(ledger, target) as written:  # an attempt failing past its files deletes them
        if certified:
            out += [
                {"kind": "file", **{f"file_{k}": v for k, v in f.items()}}
                for f in data_files(pa.concat_tables(tables, promote_options="default"), target, written)
            ]
        stats = _stats(certified, violations, offsets, left, unseen=unseen, nested=nested, **outgoing.counts())
        out.append({"kind": "stats", "stats": json.dumps(stats)})
        yield pa.RecordBatch.from_pylist(out, schema=schema)
        yield from outgoing.rows()
        for batch in left:
            yield _left_rows(batch, schema)


def rows_parsed(
    batches: Iterator[pa.RecordBatch],
    layout: Layout,
    part: Part,
    *,
    columns: tuple[str, ...],
    required: tuple[str, ...],
    schema: pa.Schema,
) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` function for a MERGE: certified records as rows of ``columns``, the others in the Kafka shape.

    ``schema`` is SORTED_SCHEMA plus ``columns`` named ``_ki_r<i>`` (the table may have a ``value``
    column; the Kafka shape has one). Output: the certified records' rows (``row``), one row with
    the counts (``stats``, as :func:`write_parsed`'s), the error and quarantine rows of the records
    it settled or routed (``error``, ``quarantine``) and the records left to Spark (``left``).
    ``required``: columns a certified record must have a value in (the table's NOT NULL ones and
    the upsert keys); a record missing one is left to Spark, which rejects it with its reason.
    """
    import pyarrow as pa

    names = [_row(i) for i in range(len(columns))]
    left: list[pa.RecordBatch] = []
    certified, offsets = 0, []
    violations = [0] * len(part.rules)
    nested: set[str] = set()
    outgoing = _Leaving(schema)
    for batch in batches:
        if not batch.num_rows:
            continue
        done = _certify(batch, layout, part, list(columns), [*required, *_required(layout)])
        violations = [a + b for a, b in zip(violations, done.violations, strict=True)]
        certified += done.written
        offsets.append(arrow_offsets(batch))  # the records left to Spark's too: no job finds theirs
        nested.update(done.nested)
        layout = _learned(layout, nested, done)
        outgoing.add(done)
        if done.left is not None:
            left.append(done.left)
        if done.written:
            rows = dict(zip(names, (done.columns[c] for c in columns), strict=True))
            yield _kind_rows("row", done.written, schema, rows)
    stats = _stats(certified, violations, offsets, left, unseen=set(), nested=nested, **outgoing.counts())
    yield pa.RecordBatch.from_pylist([{"kind": "stats", "stats": json.dumps(stats)}], schema=schema)
    yield from outgoing.rows()
    for batch in left:
        yield _left_rows(batch, schema)


def _learned(layout: Layout, nested: set[str], done: _Certified) -> Layout:
    """The layout a task's next batches start from: what its batches so far found.

    It reads ``nested`` as nested from the start and leaves out of the parse the records holding a
    key ``done`` found mistyped.
    """
    return layout.reading_nested(nested).mistyping(done.mistyped)


def _required(parser: Parser) -> list[str]:
    """Columns the parser itself requires a value in (a JSON Schema's ``required``)."""
    return [] if isinstance(parser, Codec) else list(parser.required)


def _row(i: int) -> str:
    """The name of the ``i``-th row column in :func:`rows_parsed`'s output."""
    return f"_ki_r{i}"


def _kind_rows(kind: str, n: int, schema: pa.Schema, arrays: dict[str, pa.Array]) -> pa.RecordBatch:
    """``n`` output rows of ``kind``: ``arrays`` cast to their fields' types, every other field null."""
    import pyarrow as pa

    out = []
    for f in schema:
        if f.name == "kind":
            out.append(pa.repeat(pa.scalar(kind, pa.string()), n))
        elif f.name in arrays:
            out.append(arrays[f.name].cast(f.type))
        else:
            out.append(pa.nulls(n, f.type))
    return pa.RecordBatch.from_arrays(out, schema=schema)


def _kafka_columns(batch: pa.RecordBatch) -> dict[str, pa.Array]:
    """A record's Kafka columns by their error-row names (the frame calls its bytes ``_ki_key`` and so on)."""
    source = {"key": KEY, "value": VALUE, "headers": HEADERS}
    return {f: batch.column(source.get(f, f)) for f in _KAFKA_SHAPE}


def _left_rows(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """Records left to Spark as rows of kind ``left``: their Kafka columns, nothing else."""
    return _kind_rows(_LEFT, batch.num_rows, schema, _kafka_columns(batch))


def _leaving_rows(
    kind: str,
    batch: pa.RecordBatch,
    schema: pa.Schema,
    *,
    reasons: Sequence[str],
    stages: Sequence[str],
    decoded: Sequence[str | None],
) -> pa.RecordBatch:
    """Records leaving the table as rows of ``kind`` (``error``, ``quarantine``), as Spark's side gives them.

    Their Kafka columns, reasons, stages (``decode``, ``expectation:<name>``) and ``_decoded``: the
    fields that decoded or the row, as Spark's ``to_json`` prints them; none for a record that did
    not decode at all (``nullif(to_json(NULL), ...)`` on Spark's side).
    """
    import pyarrow as pa

    columns = {
        "_error": pa.array(reasons, pa.string()),
        "_error_stage": pa.array(stages, pa.string()),
        "_decoded": pa.array(decoded, pa.string()),
    }
    return _kind_rows(kind, batch.num_rows, schema, _kafka_columns(batch) | columns)


# -- Spark side ------------------------------------------------------------------------------------
def _few(count: int, size: int) -> bool:
    """Whether ``count`` records of ``size`` Arrow bytes may come to the driver, as error routing brings its."""
    return count <= FEW_FAILURES and size <= FEW_FAILURE_BYTES


@dataclass(frozen=True, kw_only=True)
class _Parsed:
    """What a job of tasks that parse brought back besides what they made: counts and the records left."""

    stats: dict[str, Any]  # checks.labels.merged_stats of the certified records (warn violations counted)
    left: DataFrame | None  # the records left to Spark's decoder, Kafka-shaped (cached); None when none
    left_count: int  # how many
    nested: frozenset[str] = frozenset()  # flatten string columns found holding objects or arrays
    left_bytes: int = 0  # their size in Arrow
    errors: tuple[Row, ...] = ()  # records the tasks found to be errors (error-row shape), counted in ``stats``
    quarantined: tuple[Row, ...] = ()  # records the tasks quarantined (error-row shape), counted in ``stats``

    @property
    def few_left(self) -> bool:
        """Whether the records left are few enough to be brought to the driver (:func:`_few`)."""
        return _few(self.left_count, self.left_bytes)


@dataclass(frozen=True, kw_only=True)
class ParsedBatch(_Parsed):
    """What the job brought back: the certified records' files (not committed) and counts, and the rest."""

    files: list[WrittenFile]
    unseen: frozenset[int] = frozenset()  # schema ids the codec did not know (their records are in ``left``)


def write_where_parsed(
    frame: DataFrame,
    spec: TableSpec,
    parser: Parser,
    target: FileTarget,
    *,
    pt: str | None,
    rules: list[Rule],
    persist: Any,
    payload: Sequence[tuple[str, str]] = (),
    ledger: Accumulator[list[str]] | None = None,
) -> ParsedBatch:
    """Run :func:`write_parsed` over ``frame`` (:func:`~kafka_iceberg.decode.plan.kafka_frame`); one Spark job.

    Its output is persisted: the records left to Spark are read from it by the next job.
    ``payload``: the row's payload columns and Spark types (:attr:`Part.payload`), for the tasks to
    quarantine records; empty: a quarantine or drop rule's violations are left to Spark.
    ``ledger``: told every file the tasks write (:func:`~kafka_iceberg.write.arrow_files.file_ledger`).
    """
    struct, arrow = sorted_schema()
    part = _part(frame, spec, pt, rules, payload)
    task = functools.partial(write_parsed, parser=parser, part=part, target=target, schema=arrow, ledger=ledger)
    out = persist(map_in_arrow(task_per_core(frame), task, struct))
    head = out.where(f"kind <> '{_LEFT}'").collect()
    stats, rest, left = _counts(spec, out, [r for r in head if r["kind"] == "stats"], len(rules), "written")
    unseen, nested = frozenset(stats.pop(_UNSEEN)), frozenset(stats.pop(_NESTED))
    errors, quarantined = tuple(leaving(head, "error")), tuple(leaving(head, "quarantine"))
    left_bytes = stats.pop(_LEFT_BYTES)
    return ParsedBatch(
        files=written_files(head), stats=stats, left=rest, left_count=left, unseen=unseen, nested=nested,
        left_bytes=left_bytes, errors=errors, quarantined=quarantined,
    )  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class ParsedRows(_Parsed):
    """What the job brought back for a MERGE: the certified records' rows and counts, and the rest."""

    rows: DataFrame  # the certified records as rows of the given columns (cached), ``_ki_tombstone`` false


def rows_where_parsed(
    frame: DataFrame,
    spec: TableSpec,
    layout: Layout,
    columns: StructType,
    *,
    pt: str | None,
    rules: list[Rule],
    required: list[str],
    persist: Any,
    payload: Sequence[tuple[str, str]] = (),
) -> ParsedRows:
    """Run :func:`rows_parsed` over ``frame`` (:func:`~kafka_iceberg.decode.plan.kafka_frame`); one Spark job.

    ``columns``: the rows' columns as Spark's decoder gives them. The output is persisted: the
    MERGE reads the rows from it, Spark's decoder the records left to it. ``payload``: as
    :func:`write_where_parsed`'s.
    """
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.types import StructField, StructType

    struct = StructType(
        [*sorted_schema()[0].fields, *(StructField(_row(i), f.dataType) for i, f in enumerate(columns))]
    )
    task = functools.partial(
        rows_parsed,
        layout=layout,
        part=_part(frame, spec, pt, rules, payload),
        columns=tuple(columns.names),
        required=tuple(required),
        schema=to_arrow_schema(struct),
    )
    out = persist(map_in_arrow(frame, task, struct))
    head = out.where("kind IN ('stats', 'error', 'quarantine')").collect()
    stats, rest, left = _counts(
        spec, out, [r for r in head if r["kind"] == "stats"], len(rules), "parsed for the MERGE"
    )
    stats.pop(_UNSEEN)  # the Arrow decoder reads no schema ids
    rows = out.where("kind = 'row'").select(
        *[F.col(_row(i)).alias(f.name) for i, f in enumerate(columns)], F.lit(False).alias(TOMBSTONE_COLUMN)
    )
    nested, left_bytes = frozenset(stats.pop(_NESTED)), stats.pop(_LEFT_BYTES)
    errors, quarantined = tuple(leaving(head, "error")), tuple(leaving(head, "quarantine"))
    return ParsedRows(
        rows=rows, stats=stats, left=rest, left_count=left, nested=nested, left_bytes=left_bytes, errors=errors,
        quarantined=quarantined,
    )  # fmt: skip


def _part(
    frame: DataFrame, spec: TableSpec, pt: str | None, rules: list[Rule], payload: Sequence[tuple[str, str]] = ()
) -> Part:
    actions = [e.on_violation for e in spec.expectations.values()]
    zone = str(frame.sparkSession.conf.get("spark.sql.session.timeZone"))
    return Part(
        part=payload_part(spec)[0],
        pt=pt,
        rules=tuple(zip(actions, rules, strict=True)),
        zoneless_utc=zone.upper() in _UTC_ZONES,
        expectations=tuple((name, e.expr) for name, e in spec.expectations.items()),
        payload=tuple(payload),
    )


def _counts(
    spec: TableSpec, out: DataFrame, stats_rows: list[Row], rules: int, done: str
) -> tuple[dict[str, Any], DataFrame | None, int]:
    """The tasks' counts added up, the records they left to Spark (None when none) and how many."""
    from kafka_iceberg.checks.labels import merged_stats

    parts = [json.loads(r["stats"]) for r in stats_rows]
    left = sum(int(p.pop(_LEFT)) for p in parts)
    left_bytes = sum(int(p.pop(_LEFT_BYTES)) for p in parts)
    unseen = {i for p in parts for i in p.pop(_UNSEEN)}
    nested = {name for p in parts for name in p.pop(_NESTED)}
    rest = out.where(f"kind = '{_LEFT}'").select(*_KAFKA_SHAPE) if left else None
    stats = merged_stats(parts, rules) | {_UNSEEN: sorted(unseen), _NESTED: sorted(nested), _LEFT_BYTES: left_bytes}
    log.info("table %s: %d records %s where parsed, %d left to Spark", spec.identifier, stats["in"], done, left)
    return stats, rest, left
