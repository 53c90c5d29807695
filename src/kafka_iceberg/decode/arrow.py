"""The Arrow decoder: json, flatten and csv parsed a whole Arrow batch at a time, inside Spark.

Spark hands each partition to Python as Arrow record batches (``mapInArrow``, which Databricks
runs too). The payloads of a batch are joined into one newline-delimited buffer and parsed by
pyarrow's JSON or CSV reader in one call: no Python object per record.

Rows and errors are identical to the Spark decoder's because the Arrow decoder only *certifies*
records. A record is certified when Arrow parsed it and it is not near any edge where the two
parsers could disagree (the pre-checks below). Every other record — bad, unusual or merely
uncertain — is decoded by the Spark decoder, so error rows and reasons have one implementation.
A buffer Arrow cannot parse as a whole is split around the row its error names (or in halves
when it names none) until the records it cannot parse are isolated. JSON is read in blocks of
``_JSON_FIRST_BLOCK`` bytes until a parse fails, then of ``_JSON_BLOCK``; the blocks read before a
failing one are kept, so a bad record costs one extra parse of part of its block, not of
everything before it. A key the reader refuses for holding a value of another type than its
column's (``"qty": "12"`` in an ``int`` column) leaves the records holding it out of the parse, for
the rest of the task (:func:`_raise_if_type_changed`): one failure a task, not one per such record.

What is certified (everything else takes the Spark path):
- json: one JSON object per message, written without surrounding whitespace, without line
  breaks, control characters, ``NaN``/``Infinity`` text, runs of 1000 number characters or 1000
  brackets (Jackson's limits in Spark 3.5), at most 1 MiB.
- flatten (``schema_evolution: strict``): as json, and every key a column; ``long``, ``int``,
  ``double``, ``boolean`` and ``string`` columns hold a JSON value of their type (a double that
  is not finite, or is ``-0``, is not certified); other column types hold a JSON string, which
  Spark then converts with the Spark decoder's own conversion. A nested object or array in a
  ``string`` column is certified where its text is what Jackson's re-serialisation gives
  (:func:`_nested_values`: compact, no backslash, no character outside the BMP, no fraction or
  exponent, no ``-0``); Spark writes
  every other one as Jackson re-serialises it.
- flatten written where parsed (``write/certified.py``): ``timestamp`` and ``date`` columns are
  converted from their JSON text by :func:`convert_text` too, where the text has a canonical ISO
  8601 form (``2024-05-01``, ``2024-05-01T10:00:00.123+02:00``) that reads back unchanged; a
  timestamp without an offset only when the session's time zone is UTC. Other text is Spark's.
- csv: no line breaks, control characters or BOM; either no quote character, or every field
  either unquoted or a well-formed quoted field (RFC 4180), and no quoted empty field. Fields
  are read as text and converted by Spark with the Spark decoder's conversion.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Collection, Iterator
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from kafka_iceberg.decode.plan import FAILED, FIELDS, TOMB, Plan, outcome_of, payload_part
from kafka_iceberg.decode.sql import convert, converted_ok, ident, sql_type
from kafka_iceberg.spec.load import arrow_decoder_unsupported
from kafka_iceberg.spec.model import CsvLayout, TableSpec
from kafka_iceberg.tasks import map_in_arrow

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame

OK = "_ki_certified"  # Arrow parsed the record and its pre- and post-checks passed
_FINAL = "_ki_ok"  # ... and Spark's conversion of the text columns too
# The formats ``decoder: auto`` decodes with Arrow: those where whole runs measured faster with it
# (docs/benchmarks/results.md, "Decoders"). None so far: the Arrow pass itself is about 3x
# cheaper per core than Spark's JSON parser, but moving each batch to Python and back costs
# about as much again.
AUTO_ARROW: frozenset[str] = frozenset()
# The formats ``decoder: auto`` decodes with Arrow where the Arrow writer's single pass writes the
# records it certifies in the task that parses them (write/certified.py), so that they never become
# Spark rows: json measured 1.04-1.26x the Spark decoder's whole run there on clean topics
# (docs/decode.md, "Measured"); flatten once its nested values were certified and csv once its
# numbers were converted there (stop 35, focused runs on clean topics: flatten 1.65x, csv 1.48x
# small and 1.01x large).
# Text joined them in stop 74, its rows made as sent by the writing tasks (decode/as_sent.py): whole
# runs 0.85x the wall and 0.82x the CPU of Spark's decode on small messages, 0.92x the CPU on large
# ones. Binary, with nothing to check, measured within ±7 % either way: it keeps Spark's plan unless
# ``decoder: arrow``.
AUTO_ARROW_WHERE_PARSED = frozenset({"json", "flatten", "csv", "text"})
# Batches ``auto`` decodes with Spark's decoder after one that left Arrow's uncertified records to a
# second job of Python tasks (more than the driver sorts itself, write/certified.py ``few_left``): on
# topics with 0.5 % bad records that job made whole runs 0.77-0.93x Spark's decoder.
AUTO_ARROW_BACKOFF = 10
# Column types the Arrow writer converts from a flatten record's JSON text where it parses it
# (write/certified.py, :func:`convert_text`); Spark converts them everywhere else.
TEXT_CONVERTED = ("timestamp", "date")
# ... and those it converts from a csv field's text (where Spark's conversion is ``try_cast``).
CSV_CONVERTED = ("long", "int", "double", "boolean")
_NUMBER_TEXT = {
    "long": r"^-?(?:0|[1-9][0-9]{0,17})$",  # 18 digits always fit a long
    "int": r"^-?(?:0|[1-9][0-9]{0,8})$",  # 9 digits always fit an int
    "double": r"^-?(?:0|[1-9][0-9]{0,14})(?:[.][0-9]{1,15})?$",
}
_DATE_TEXT = r"^[1-9][0-9]{3}-[0-9]{2}-[0-9]{2}$"
_TIMESTAMP_TEXT = (
    r"^(?P<day>[1-9][0-9]{3}-[0-9]{2}-[0-9]{2})[T ](?P<time>[0-9]{2}:[0-9]{2}:[0-9]{2})"
    r"(?P<fraction>[.][0-9]{1,6})?(?P<zone>Z|[+-][0-9]{2}:[0-9]{2})?$"
)
_MAX_OFFSET_MINUTES = 18 * 60  # java.time.ZoneOffset's range, which Spark's cast enforces
MAX_BYTES = 1 << 20
# Column types Arrow's JSON reader converts exactly as the Spark decoder does; the rest are
# read as JSON strings and converted by Spark.
NATIVE_JSON_TYPES = ("long", "int", "double", "boolean", "string")
_JACKSON_LIMIT = 1000  # Spark 3.5's Jackson refuses longer numbers and deeper nesting
_MAX_FAILURES = 8  # failed parses per batch (plus one per 100 records) before the rest goes to Spark
# JSON read block: what a parse failure costs again. At the benchmark's 0.25 % unparsable records
# (a few hundred KB apart), reading a span in one block re-parsed about all of it once more.
_JSON_BLOCK = 64 << 10
# ... and until a batch's first failure: Arrow's reader has a cost per block, so the 64 KB blocks
# made a clean 14 MB parse 1.2-1.5x slower than 1 MB ones (flatten, small and large documents).
# The first failure costs at most one such block again.
_JSON_FIRST_BLOCK = 1 << 20


@dataclass(frozen=True)
class Layout:
    """What the Python side needs to know (pickled to Spark's Python workers)."""

    fmt: str  # json, flatten or csv; text or binary where written as sent (decode/as_sent.py)
    source: str  # the frame column holding the payload bytes
    columns: tuple[tuple[str, str], ...] = ()  # (name, column type) parsed by Arrow, in output order
    delimiter: str = ","
    quote: str = '"'
    null_value: str = ""
    required: tuple[str, ...] = ()  # columns a JSON Schema requires (their absence is a decode error)
    # flatten ``string`` columns earlier batches held an object or array in (:func:`nested_found`):
    # read by the expressions from the start, so a batch's parse stops and starts again only at new ones
    nested: tuple[str, ...] = ()
    # (key, JSON type) pairs an earlier batch held a value of another type than its column's under
    # (:func:`mistyped_found`): records holding one are left out of the parse from the start
    mistyped: tuple[tuple[str, str], ...] = ()

    def spark_type(self, col_type: str) -> str:
        """The Spark SQL type of the column Arrow hands back for ``col_type``."""
        return "string" if self.fmt == "csv" or col_type not in NATIVE_JSON_TYPES else sql_type(col_type)

    def arrow_type(self, col_type: str) -> pa.DataType:
        """The Arrow type the reader parses ``col_type`` into."""
        import pyarrow as pa

        if self.fmt == "csv" or col_type not in NATIVE_JSON_TYPES:
            return pa.string()
        return _native_arrow_type(col_type)

    def reading_nested(self, names: Collection[str]) -> Layout:
        """The layout reading those of ``names`` that are its flatten ``string`` columns as nested from the start."""
        if self.fmt != "flatten":
            return self
        nested = tuple(name for name, t in self.columns if t == "string" and name in names)
        return self if nested == self.nested else replace(self, nested=nested)

    def mistyping(self, pairs: Collection[tuple[str, str]]) -> Layout:
        """The layout leaving out of the parse the records holding one of ``pairs`` too (:func:`_mistyped`)."""
        mistyped = (*self.mistyped, *(pair for pair in pairs if pair not in self.mistyped))
        return self if mistyped == self.mistyped else replace(self, mistyped=tuple(mistyped))

    def converted_where_parsed(self, col_type: str) -> bool:
        """Whether the Arrow writer converts a ``col_type`` column from its text (:func:`convert_text`)."""
        return col_type in TEXT_CONVERTED or (self.fmt == "csv" and col_type in CSV_CONVERTED)


def _not_moved(parsed: pa.Array, text: pa.Array, *, second: bool) -> pa.Array:
    """Whether strptime kept the day (and with ``second`` the second) of canonical ``text``; null where ``text`` is.

    ``text`` is ``yyyy-MM-dd``, or ``yyyy-MM-dd HH:mm:ss`` with ``second``. strptime rolls a day
    past its month's end into the next month (``02-30`` → ``03-01``) and a 60th or 61st second
    into the next minute, and refuses other fields out of range (null). So the day and second
    parsed against those written find every value moved: the verdict of printing the value back
    and comparing the text (the same on 847,158 generated timestamp texts), at a third to a
    seventh of the cost.
    """
    import pyarrow.compute as pc

    same = pc.equal(pc.day(parsed), _number_at(text, 8))
    return pc.and_(same, pc.equal(pc.second(parsed), _number_at(text, 17))) if second else same


def _number_at(text: pa.Array, start: int) -> pa.Array:
    """The two digits of canonical text at ``start``, as integers."""
    import pyarrow as pa
    import pyarrow.compute as pc

    return pc.utf8_slice_codeunits(text, start, start + 2).cast(pa.int64())


def _native_arrow_type(col_type: str) -> pa.DataType:
    """The Arrow type of a ``long``, ``int``, ``double``, ``boolean`` or ``string`` column."""
    import pyarrow as pa

    types = {"long": pa.int64(), "int": pa.int32(), "double": pa.float64(), "boolean": pa.bool_()}
    return types.get(col_type, pa.string())


def arrow_parses(spec: TableSpec) -> bool:
    """Whether the Arrow decoder can decode the table (text and binary have nothing to parse)."""
    return spec.source.format in ("json", "flatten", "csv") and arrow_decoder_unsupported(spec) is None


def uses_arrow(spec: TableSpec, decoder: str | None = None) -> bool:
    """Whether the table is decoded by the Arrow decoder.

    ``decoder``: ``spark`` or ``arrow`` in place of ``source.decoder`` (the single pass's choice for ``auto``).
    """
    decoder = decoder or spec.source.decoder
    return arrow_parses(spec) and (decoder == "arrow" or (decoder == "auto" and spec.source.format in AUTO_ARROW))


def layout_for(spec: TableSpec, columns: dict[str, str], required: set[str] | None = None) -> Layout:
    """The layout of ``spec`` whose Arrow-parsed columns are ``columns`` (empty for json)."""
    _part, source = payload_part(spec)
    csv = spec.source.csv or CsvLayout()
    return Layout(
        fmt=spec.source.format,
        source=source,
        columns=tuple(columns.items()),
        delimiter=csv.delimiter,
        quote=csv.quote,
        null_value=csv.null_value if csv.null_value is not None else "",
        required=tuple(sorted(required or ())),
    )


# -- Spark side ------------------------------------------------------------------------------------
def decode_with_arrow(
    frame: DataFrame,
    spec: TableSpec,
    plan: Plan,
    layout: Layout,
) -> tuple[DataFrame, DataFrame]:
    """(outcome, parsed): certified records decoded by Arrow (``layout``), the rest by ``plan``.

    ``outcome`` has the shape of the Spark decoder's (:func:`~kafka_iceberg.decode.plan.outcome_of`)
    for every record, so rows and error rows are split from it the same way. Persist ``parsed``
    (the Arrow pass), then ``outcome`` (the Spark decoder's pass over the uncertified records),
    and each runs once per batch.
    """
    from pyspark.sql import functions as F
    from pyspark.sql.types import BooleanType, StructField, StructType, _parse_datatype_string

    names = [f"_ki_a{i}" for i in range(len(layout.columns))]
    fields = [
        StructField(n, _parse_datatype_string(layout.spark_type(t)))
        for n, (_, t) in zip(names, layout.columns, strict=True)
    ]
    schema = StructType([*frame.schema.fields, StructField(OK, BooleanType()), *fields])
    parsed = map_in_arrow(frame, functools.partial(certify, layout=layout), schema)

    # Spark converts what Arrow read as text, with the Spark decoder's conversion and check.
    values: dict[str, str] = {}
    checks = [ident(OK)]
    converted = []
    for i, (name, col_type) in enumerate(layout.columns):
        column = ident(names[i])
        if layout.spark_type(col_type) == "string" and col_type != "string":
            values[name] = ident(f"_ki_c{i}")
            converted.append(F.expr(convert(column, col_type)).alias(f"_ki_c{i}"))
            checks.append(converted_ok(column, values[name], col_type))
        else:
            values[name] = column
    checks += [f"{values[name]} IS NOT NULL" for name in layout.required if name in values]
    if converted:
        parsed = parsed.select("*", *converted)
    parsed = parsed.select("*", F.expr(" AND ".join(f"coalesce({c}, false)" for c in checks)).alias(_FINAL))

    rest = outcome_of(parsed.where(f"NOT {_FINAL}").select(*frame.columns), plan)
    certified = parsed.where(_FINAL)
    out: list[Any] = []
    for f in rest.schema.fields:
        if f.name == FIELDS:
            assert isinstance(f.dataType, StructType)
            sql = {name: _payload_value(spec, name, col_type, values) for name, col_type in plan.payload.items()}
            struct = F.struct(*[F.expr(sql.get(c.name, "NULL")).cast(c.dataType).alias(c.name) for c in f.dataType])
            out.append(struct.alias(FIELDS))
        elif f.name in (FAILED, TOMB):  # null payloads (tombstones) are never certified
            out.append(F.lit(False).alias(f.name))
        elif f.name in frame.columns:
            out.append(F.col(ident(f.name)))
        else:  # the Spark decoder's helper columns, read only for its error rows
            out.append(F.lit(None).cast(f.dataType).alias(f.name))
    return certified.select(*out).unionByName(rest), parsed


def _payload_value(spec: TableSpec, name: str, col_type: str, values: dict[str, str]) -> str:
    """SQL of a payload column on a certified record (never a tombstone: null payloads are not certified)."""
    if spec.source.format == "json":
        part, source = payload_part(spec)
        return f"CAST({source} AS STRING)" if name == part else "CAST(NULL AS STRING)"
    return values.get(name, f"CAST(NULL AS {sql_type(col_type)})")


# -- Python side (runs in Spark's Python workers) --------------------------------------------------
def certify(batches: Iterator[pa.RecordBatch], layout: Layout) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` function: each batch with ``_ki_certified`` and the Arrow-parsed columns."""
    for batch in batches:
        yield certify_batch(batch, layout)


def certify_batch(batch: pa.RecordBatch, layout: Layout) -> pa.RecordBatch:
    """One batch: pre-check, parse the candidates, post-check; aligned with the batch's records."""
    import numpy as np
    import pyarrow as pa

    payload = batch.column(layout.source)
    n = len(payload)
    keep = pre_checked(payload, layout)
    if layout.mistyped:
        keep &= ~_mistyped(payload, layout.mistyped)
    picked = np.flatnonzero(keep)

    types = [layout.arrow_type(t) for _, t in layout.columns]
    columns: list[list[pa.Array]] = [[] for _ in types]
    nested = _readable_nested(layout)
    while True:  # parse again when a string column holds an object or array, or a key a value of another type
        candidates = payload.take(pa.array(picked, pa.int64())) if len(picked) < n else payload
        try:
            spans = _parse(candidates, layout, nested)
            break
        except _NestedFound as found:
            nested = layout.reading_nested({*nested, found.name}).nested
        except _Mistyped as found:
            layout = layout.mistyping([found.pair])
            picked = picked[~_mistyped(candidates, [found.pair])]
    ok = np.zeros(len(picked), dtype=bool)
    fits, texts = _nested_values(candidates, layout, nested) if nested else (None, {})
    for span in spans:
        if span.table is None:
            for i, arrow_type in enumerate(types):
                columns[i].append(pa.nulls(span.hi - span.lo, arrow_type))
            continue
        ok[span.lo : span.hi] = span.ok & _post_check(span.table, layout)
        for i, (name, _) in enumerate(layout.columns):
            if name not in texts:
                columns[i].append(span.table.column(_arrow_name(layout, i, name)).combine_chunks().cast(types[i]))
    if fits is not None:
        ok &= fits
        for i, (name, _) in enumerate(layout.columns):
            if name in texts:
                columns[i] = [texts[name]]

    parsed = [
        parts[0] if len(parts) == 1 else pa.concat_arrays([pa.nulls(0, t), *parts])
        for t, parts in zip(types, columns, strict=True)
    ]
    out = [*batch.columns]
    if len(picked) == n:  # every record a candidate: the rows are the records already (no copy)
        out += [pa.array(ok), *parsed]
    else:
        position = np.full(n, -1, dtype=np.int64)  # record → its row among the candidates
        position[picked] = np.arange(len(picked))
        index = pa.array(position, mask=position < 0)
        out += [pa.array(ok).take(index).fill_null(False), *(column.take(index) for column in parsed)]
    names = [*batch.schema.names, OK, *[f"_ki_a{i}" for i in range(len(layout.columns))]]
    metadata = {_NESTED_KEY: json.dumps(nested), _MISTYPED_KEY: json.dumps(layout.mistyped)}
    return pa.RecordBatch.from_arrays(out, names=names, metadata=metadata)


_NESTED_KEY = "kafka_iceberg.nested"
_MISTYPED_KEY = "kafka_iceberg.mistyped"


def nested_found(certified: pa.RecordBatch) -> tuple[str, ...]:
    """The flatten ``string`` columns :func:`certify_batch` read by the expressions (for ``Layout.nested``)."""
    metadata = certified.schema.metadata or {}
    return tuple(json.loads(metadata.get(_NESTED_KEY.encode(), b"[]")))


def mistyped_found(certified: pa.RecordBatch) -> tuple[tuple[str, str], ...]:
    """The (key, JSON type) pairs :func:`certify_batch` left out of the parse (for ``Layout.mistyped``)."""
    metadata = certified.schema.metadata or {}
    return tuple((key, kind) for key, kind in json.loads(metadata.get(_MISTYPED_KEY.encode(), b"[]")))


def _arrow_name(layout: Layout, i: int, name: str) -> str:
    return f"c{i}" if layout.fmt == "csv" else name


def _candidates(payload: pa.Array, layout: Layout) -> Any:
    """Records worth handing to Arrow: the pre-checks of the module docstring (numpy bool array).

    The checks read the payloads' bytes as one numpy array rather than running a regular expression
    over every payload per check: at about 0.45 GB/s a pass, three passes took 2.6 times the JSON
    parse itself on 1.3 KB messages. A byte sequence found across two payloads marks the first,
    which then ends with part of it, so is no candidate anyway (it does not end with ``}``).
    """
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    n = len(payload)
    if n == 0:
        return np.zeros(0, dtype=bool)
    starts, data = _bytes_of(payload)
    length = np.diff(starts)
    keep = (length > 0) & (length <= MAX_BYTES) & payload.is_valid().to_numpy(zero_copy_only=False)
    control = data < 0x20
    if layout.fmt == "csv":
        if len(layout.delimiter) == 1 and ord(layout.delimiter) < 0x20:
            control &= data != ord(layout.delimiter)
        keep &= ~_holding(starts, np.flatnonzero(control))
        keep &= ~pc.starts_with(payload, "\ufeff").fill_null(False).to_numpy(zero_copy_only=False)
        quoted = np.flatnonzero(keep & _holding_bytes(starts, data, layout.quote.encode()))
        if len(quoted):
            d, q = re.escape(layout.delimiter), re.escape(layout.quote)
            field = f"(?:[^{q}{d}]*|{q}(?:[^{q}]|{q}{q})*{q})"
            texts = payload.take(pa.array(quoted))
            well_formed = pc.and_(
                pc.match_substring_regex(texts, f"^{field}(?:{d}{field})*$"),
                pc.invert(pc.match_substring_regex(texts, f"(?:^|{d}){q}{q}(?:{d}|$)")),
            )
            keep[quoted] = well_formed.to_numpy(zero_copy_only=False)
        return keep
    for ends, brace in ((pc.starts_with, "{"), (pc.ends_with, "}")):
        keep &= ends(payload, brace).fill_null(False).to_numpy(zero_copy_only=False)
    keep &= ~_holding(starts, np.flatnonzero(control & (data != 0x09)))  # tab is the only one JSON allows
    keep &= ~_holding_bytes(starts, data, b"NaN") & ~_holding_bytes(starts, data, b"Infinity")
    long = keep & (length >= _JACKSON_LIMIT)  # only these can hold 1000 number characters or brackets
    if long.any():
        brackets = np.bincount(_records_at(starts, np.flatnonzero((data | 0x20) == ord("{"))), minlength=n)
        keep &= ~(long & (brackets >= _JACKSON_LIMIT))  # (data | 0x20) is { for [ and { only
        # A run of 1000 number characters covers a whole 500-byte block at a multiple of 500 and
        # the byte after it: blocks are tested where their first and next bytes are numbers, and
        # only the payloads holding a block that is all number characters are counted.
        step, numeric = _JACKSON_LIMIT // 2, _number_bytes()
        sampled = numeric[data[::step]]
        block = np.flatnonzero(sampled[:-1] & sampled[1:])
        block = block[numeric[data[: len(data) // step * step].reshape(-1, step)[block]].all(axis=1)]
        maybe = np.flatnonzero(keep & long & _holding(starts, block * step))
        keep[maybe] = ~_long_numbers(starts, data, maybe)
    return keep


def _long_numbers(starts: Any, data: Any, records: Any) -> Any:
    """Which of ``records`` (JSON candidates) hold a run of 1000 number characters.

    Counted with numpy: RE2 takes about 20 ms a record for ``[-+.eE0-9]{1000}`` on long runs of
    digits, where its automaton grows a state per character counted. The records' bytes are
    gathered end to end; no run goes on from one into the next, as each starts with ``{``.
    """
    import numpy as np

    lengths = starts[records + 1] - starts[records]
    first = np.cumsum(lengths) - lengths  # each record's first byte among those gathered
    number = _number_bytes()[data[np.arange(lengths.sum()) + np.repeat(starts[records] - first, lengths)]]
    edges = np.diff(number.astype(np.int8), prepend=0, append=0)
    run_starts, run_ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
    out = np.zeros(len(records), dtype=bool)
    out[np.searchsorted(first, run_starts[run_ends - run_starts >= _JACKSON_LIMIT], side="right") - 1] = True
    return out


def _bytes_of(payload: pa.Array) -> tuple[Any, Any]:
    """``payload``'s offsets (from 0, one more than its records) and bytes, as numpy arrays without a copy."""
    import numpy as np
    import pyarrow as pa

    large = pa.types.is_large_binary(payload.type) or pa.types.is_large_string(payload.type)
    _validity, offsets, data = payload.buffers()
    window = slice(payload.offset, payload.offset + len(payload) + 1)
    starts = np.frombuffer(offsets, dtype=np.int64 if large else np.int32)[window].astype(np.int64)
    raw = np.frombuffer(data, dtype=np.uint8) if data is not None else np.zeros(0, dtype=np.uint8)
    return starts - starts[0], raw[starts[0] : starts[-1]]


def _records_at(starts: Any, positions: Any) -> Any:
    """The record holding each byte position."""
    import numpy as np

    return np.searchsorted(starts, positions, side="right") - 1


def _holding(starts: Any, positions: Any) -> Any:
    """Which records hold any of the byte ``positions`` (numpy bool array)."""
    import numpy as np

    out = np.zeros(len(starts) - 1, dtype=bool)
    out[_records_at(starts, positions)] = True
    return out


def _holding_bytes(starts: Any, data: Any, word: bytes) -> Any:
    """Which records hold ``word``; one whose last bytes begin it is marked too (see :func:`_candidates`)."""
    return _holding(starts, _found(data, word))


def _found(data: Any, word: bytes) -> Any:
    """Where ``word`` starts in ``data``, in order (numpy int64 array).

    A word of two bytes or more is looked for by its first two as one 16-bit number, at even then
    odd positions: two passes over the bytes, where looking for its first byte alone found a letter
    common in text many times a record.
    """
    import numpy as np

    fits = len(data) - len(word) + 1  # starts below this leave room for the word
    if fits <= 0:
        return np.zeros(0, dtype=np.int64)
    if len(word) == 1:
        return np.flatnonzero(data[:fits] == word[0])
    n, pair = len(data), word[0] | word[1] << 8
    even = np.flatnonzero(data[: n // 2 * 2].view("<u2") == pair) * 2
    odd = np.flatnonzero(data[1 : 1 + (n - 1) // 2 * 2].view("<u2") == pair) * 2 + 1
    at = np.sort(np.concatenate((even, odd)))
    at = at[at < fits]
    for k in range(2, len(word)):
        at = at[data[at + k] == word[k]]
    return at


@functools.cache
def _number_bytes() -> Any:
    """A lookup table: which bytes Jackson's number length limit counts."""
    import numpy as np

    table = np.zeros(256, dtype=bool)
    table[list(b"-+.eE0123456789")] = True
    return table


# A flatten ``string`` column holding an object or array: Spark's decoder writes it as Jackson's
# ``copyCurrentStructure`` re-serialises it. Its text as sent is that text when it is compact, has no
# backslash (no escape to rewrite), no character outside the BMP (written as an escaped surrogate
# pair), no number with a fraction or exponent (Jackson prints doubles
# with Java's ``Double.toString``) and no ``-0`` (printed ``0``). Those columns are read by regular
# expressions over the message (RE2, linear time) instead of by Arrow's reader, which refuses an
# object where it expects a string; a message they cannot read is left to Spark.
_WS = "[ \\t]*"
_STRING = r'"(?:[^"\\]|\\.)*"'
_SCALAR = r"[-+.0-9a-zA-Z]+"  # a number, true, false or null (Arrow's parse checks their syntax)
_NESTING = 6  # levels of nested objects and arrays the expressions follow; deeper values are Spark's
_PLAIN_KEY = re.compile(r'[^"\\\x00-\x1f]+')  # a name JSON spells without escapes
# Outside strings (walked over: with no backslash, a string is quotes around non-quotes): a space or
# tab, a fraction or exponent, a -0 (in valid JSON, no digit stands before the - of a number).
_UNLIKE_JACKSON = r'^(?:[^"]|"[^"]*")*?(?:[ \t]|[0-9][.eE]|-0(?:[^0-9]|$))'
_JACKSON_SCALAR = r"^(?:true|false|-?[1-9][0-9]*|0)$"  # a scalar Jackson prints back unchanged
_ESCAPED_BY_JACKSON = r"[\\\x{10000}-\x{10FFFF}]"  # a backslash; a character outside the BMP (printed \uD83D\uDE00)


def _nested(depth: int) -> str:
    """An object or array (syntax already checked) nested at most ``depth`` levels."""
    inner = rf'(?:{_STRING}|[^"\[\]{{}}])*'
    for _ in range(depth - 1):
        inner = rf'(?:{_STRING}|[^"\[\]{{}}]|[\[{{]{inner}[\]}}])*'
    return rf"[\[{{]{inner}[\]}}]"


_VALUE = f"(?:{_STRING}|{_SCALAR}|{_nested(_NESTING)})"


def _reads_nested(layout: Layout) -> bool:
    """Whether the expressions can read nested values: flatten, every column name spelled without escapes."""
    return layout.fmt == "flatten" and all(_PLAIN_KEY.fullmatch(name) for name, _ in layout.columns)


def _readable_nested(layout: Layout) -> tuple[str, ...]:
    """The flatten ``string`` columns an earlier batch found holding an object or array (``layout.nested``).

    Empty where the expressions cannot read nested values (:func:`_reads_nested`).
    """
    return tuple(name for name, _ in layout.columns if name in layout.nested) if _reads_nested(layout) else ()


class _NestedFound(Exception):
    """Arrow's reader met an object or array in ``name``, a flatten ``string`` column not yet read as nested."""

    def __init__(self, name: str):
        super().__init__(name)
        self.name = name


class _Mistyped(Exception):
    """Arrow's reader met, under ``pair``'s key, a value of ``pair``'s JSON type where its column holds another."""

    def __init__(self, pair: tuple[str, str]):
        super().__init__(pair)
        self.pair = pair


# How Arrow's reader refuses a value of another JSON type than its column's (pyarrow 26): the
# column's path, the type it held, the type met.
_TYPE_CHANGED = re.compile(r"Column\(/(.+)\) changed from (\w+) to (\w+) in row \d+$")
# What starts a value of each JSON type, after its key's colon.
_VALUE_START = {"string": '"', "number": "[-0-9]", "boolean": "(?:true|false)", "object": r"\{", "array": r"\["}
_MAX_MISTYPED = 16  # pairs a task learns: each costs one parse again of the batch it is found in


def _raise_if_type_changed(error: Exception, layout: Layout, nested: tuple[str, ...]) -> None:
    """Raise what ``error`` teaches the parse, when it is Arrow's reader refusing a value of another type.

    - :class:`_NestedFound`: an object or array in a flatten ``string`` column not yet read as
      nested. Such columns are found by the parse itself rather than looked for: a regular
      expression pass over every batch for keys holding ``{`` or ``[`` took about an eighth of the
      tasks' CPU on the benchmark's flatten documents (benchmarks/fixes.md, stop 64).
    - :class:`_Mistyped`: a key (the path's last part) holding a value of a type not yet in
      ``layout.mistyped``. A key that changes type in one record (``"qty": "12"`` in an ``int``
      column) usually does in others of the batch: each made the parse fail, split its span and
      read the rest in small blocks again, which doubled the parse of the benchmark's flatten
      documents at 0.5 % bad records (benchmarks/fixes.md, stop 78). Left out before the parse,
      those records take the path of any other record Arrow does not certify; one left out
      wrongly (the key nested elsewhere) too.
    """
    match = _TYPE_CHANGED.search(str(error))
    if match is None:
        return
    path, held, met = match.groups()
    reads_nested = _reads_nested(layout)
    found_nested = held == "string" and met in ("object", "array") and path not in nested
    if reads_nested and found_nested and (path, "string") in layout.columns:
        raise _NestedFound(path) from error
    key = path.rsplit("/", 1)[-1]
    if (key, "string") in layout.columns and reads_nested:
        return  # read by the expressions once found nested, its scalars of any type are certified
    if not key or met not in _VALUE_START or len(layout.mistyped) >= _MAX_MISTYPED:
        return
    if (key, met) not in layout.mistyped:  # one known and met again is spelled otherwise: split as before
        raise _Mistyped((key, met)) from error


def _mistyped(payload: pa.Array, pairs: Collection[tuple[str, str]]) -> Any:
    """Which records hold a key of ``pairs`` followed by a value of its JSON type (numpy bool array).

    A raw ``"`` only delimits in JSON, so ``"key"`` then a colon is a key at some depth, never text.
    """
    import pyarrow.compute as pc

    def literal(key: str) -> str:  # RE2 reads \x{..} for any ASCII punctuation or space
        return "".join(c if c.isalnum() or ord(c) > 0x7F else f"\\x{{{ord(c):02x}}}" for c in key)

    pattern = "|".join(f'"{literal(key)}"[ \\t\\r\\n]*:[ \\t\\r\\n]*{_VALUE_START[kind]}' for key, kind in pairs)
    return pc.match_substring_regex(payload, pattern).fill_null(False).to_numpy(zero_copy_only=False)


def _nested_values(candidates: pa.Array, layout: Layout, nested: tuple[str, ...]) -> tuple[Any, dict[str, pa.Array]]:
    """(fits, texts): which candidates the expressions read, and each nested column's values.

    A candidate fits when its top level is exactly the table's keys, spelled without escapes (so
    no unknown key, which Arrow's reader now ignores), each ``nested`` key is in the message at
    most once and, when there, holds null, a string without backslash, an object or array Jackson
    prints back unchanged (:data:`_UNLIKE_JACKSON`), or an integer or boolean (:data:`_JACKSON_SCALAR`). A value is
    taken where its key is; that is the top level because no nested value holds a ``nested`` key
    (checked): every other place a nested value could be fails Arrow's parse (a typed column) or
    the top-level check (an unknown key), and no string can hold ``"key":`` unescaped.

    The keys are found with numpy and each value read by a regular expression anchored at its key
    (:func:`_at_keys`): searching every message for the keys, then for each value, took three
    quarters of this function's time on the benchmark's small flatten documents (benchmarks/fixes.md,
    stop 76).
    """
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    keys = "|".join(re.escape(name) for name, _ in layout.columns)
    pair = f'"(?:{keys})"{_WS}:{_WS}{_VALUE}'
    fits = pc.match_substring_regex(candidates, f"^\\{{{_WS}(?:{pair}{_WS}(?:,{_WS}{pair}{_WS})*)?\\}}$")
    fits = fits.fill_null(False).to_numpy(zero_copy_only=False).copy()
    any_key = f'"(?:{"|".join(re.escape(name) for name in nested)})"{_WS}:'
    starts, data = _bytes_of(candidates)
    # Each nested key at most once: as many keys as values found (a key whose value the
    # expression does not read is counted but not found).
    keys_seen = np.zeros(len(candidates), dtype=np.int64)
    values_found = np.zeros(len(candidates), dtype=np.int64)
    texts: dict[str, pa.Array] = {}
    for name in nested:
        seen, at_key = _at_keys(starts, data, name)
        keys_seen += seen
        key = f'"{re.escape(name)}"{_WS}:'
        value = pc.struct_field(pc.extract_regex(at_key, f"^{key}{_WS}(?P<v>{_VALUE})"), [0])
        value = value.cast(pa.string())  # candidates are valid UTF-8
        escaped = pc.match_substring_regex(value, f"{_ESCAPED_BY_JACKSON}|{any_key}")
        structure = pc.or_(pc.starts_with(value, "{"), pc.starts_with(value, "["))
        quoted = pc.starts_with(value, '"')
        exact = pc.and_(
            pc.invert(escaped),
            pc.if_else(
                structure,
                pc.invert(pc.match_substring_regex(value, _UNLIKE_JACKSON)),
                pc.or_(quoted, pc.or_(pc.equal(value, "null"), pc.match_substring_regex(value, _JACKSON_SCALAR))),
            ),
        )
        found = value.is_valid().to_numpy(zero_copy_only=False)
        values_found += found
        fits &= ~found | exact.fill_null(False).to_numpy(zero_copy_only=False)
        text = pc.if_else(quoted, pc.utf8_slice_codeunits(value, 1, -1), value)
        texts[name] = pc.if_else(pc.equal(value, "null"), pa.scalar(None, pa.string()), text)
    fits &= keys_seen == values_found
    return fits, texts


def _at_keys(starts: Any, data: Any, name: str) -> tuple[Any, pa.Array]:
    """(seen, at_key): how often each record holds ``"name"`` as a key, and its bytes from the first one.

    A key is ``"name"`` followed by spaces or tabs and a colon, at any depth (no string holds it
    unescaped). ``at_key`` is a view of ``data`` without a copy: a record's value runs from its
    first key to the next record's (from its end when it has none, so it does not start with the
    key); an expression anchored at the start reads the key's value and stops, where one searching
    the whole record reads every byte before it.
    """
    import numpy as np
    import pyarrow as pa

    word, end = f'"{name}"'.encode(), len(data)
    at = _found(data, word)
    at = at[at + len(word) < end]  # a byte follows the name
    after = at + len(word)  # candidates end with }: spaces never run to the end
    while True:
        spaces = (data[after] == 0x20) | (data[after] == 0x09)
        if not spaces.any():
            break
        after += spaces
    at = at[data[after] == ord(":")]
    records = _records_at(starts, at)
    seen = np.bincount(records, minlength=len(starts) - 1)
    offsets = np.append(starts[1:], end)  # one more than the records: a view of n values
    first = np.flatnonzero(np.diff(records, prepend=-1))  # ``at`` is in order: each record's first key
    offsets[records[first]] = at[first]
    view = pa.Array.from_buffers(pa.large_binary(), len(starts) - 1, [None, pa.py_buffer(offsets), pa.py_buffer(data)])
    return seen, view


def invalid_utf8(values: pa.Array) -> Any:
    """Positions of binary values that are not UTF-8: one cast when all are (the usual case), else halves.

    Only a value holding a byte of 0x80 or more can be invalid, so the halving searches those alone:
    on mostly ASCII text a few bad values cost a pass over the bytes, not a dozen casts of the batch.
    """
    import numpy as np
    import pyarrow as pa

    try:
        values.cast(pa.string())
        return np.array([], dtype=np.int64)
    except pa.ArrowInvalid:
        pass
    wide = pa.types.is_large_binary(values.type)
    offsets = np.frombuffer(values.buffers()[1], dtype=np.int64 if wide else np.int32)
    offsets = offsets[values.offset : values.offset + len(values) + 1].astype(np.int64)
    data = np.frombuffer(values.buffers()[2], dtype=np.uint8, count=int(offsets[-1]))
    starts, lengths = offsets[:-1], np.diff(offsets)
    filled = np.flatnonzero(lengths > 0)
    at = np.asarray(starts[filled], dtype=np.intp)
    top = np.maximum.reduceat(data, at) if len(filled) else np.zeros(0, dtype=np.uint8)
    suspects = filled[top >= 0x80]  # each value's highest byte: reduceat over the starts of the filled ones
    candidates = values.take(pa.array(suspects, pa.int64()))
    found: list[int] = []
    todo = [(0, len(candidates))]
    while todo:
        lo, hi = todo.pop()
        try:
            candidates.slice(lo, hi - lo).cast(pa.string())
        except pa.ArrowInvalid:
            if hi - lo == 1:
                found.append(lo)
            else:
                mid = (lo + hi) // 2
                todo += [(lo, mid), (mid, hi)]
    return np.sort(suspects[np.array(found, dtype=np.int64)])


_ROW = re.compile(r" in row (\d+)$")


class _PartialParse(Exception):
    """A parse that failed after reading its first ``rows`` rows (``table``, ``ok``); ``cause`` says where."""

    def __init__(self, table: pa.Table, ok: Any, cause: Exception):
        super().__init__(str(cause))
        self.table, self.ok, self.cause = table, ok, cause

    @property
    def rows(self) -> int:
        return int(self.table.num_rows)


@dataclass(frozen=True)
class Span:
    """Candidates ``lo`` to ``hi``: their parse (one row each) and which rows passed, or None."""

    lo: int
    hi: int
    table: pa.Table | None
    ok: Any  # numpy bool array, or None


def _parse(candidates: pa.Array, layout: Layout, nested: tuple[str, ...] = ()) -> list[Span]:
    """Spans covering ``candidates`` in order; a span without a table is left to Spark.

    ``nested``: columns read by :func:`_nested_values`, which the parse skips. Raises
    :class:`_NestedFound` when Arrow's reader meets an object or array in another ``string``
    column: the caller parses again, reading it as nested too.

    A failed parse that names its row (JSON syntax errors) splits the span around that row;
    other failures (a value that does not convert, two documents on one line making more rows
    than lines) split it in halves. Input that keeps failing stops being parsed (see
    ``_MAX_FAILURES``), so the cost of a batch Arrow cannot certify stays bounded.
    """
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    n = len(candidates)
    if n == 0:
        return []
    lines = pc.binary_join_element_wise(candidates, pa.scalar(b"\n"), pa.scalar(b""))
    data = lines.buffers()[2]
    ends = np.cumsum(pc.binary_length(lines).to_numpy(zero_copy_only=False).astype(np.int64))
    starts = np.concatenate(([0], ends[:-1]))
    reader = _reader(layout, nested)

    out: list[Span] = []
    todo = [(0, n)]
    failures = 0
    while todo:
        lo, hi = todo.pop()
        if failures > _MAX_FAILURES + n // 100:  # mostly uncertifiable input: leave it to Spark at once
            out.append(Span(lo, hi, None, None))
            continue
        bad_row: int | None = None
        try:
            block = _JSON_FIRST_BLOCK if failures == 0 else _JSON_BLOCK
            table, ok = reader(data.slice(int(starts[lo]), int(ends[hi - 1] - starts[lo])), block)
        except _PartialParse as partial:  # the blocks before the failing one are read: keep them
            _raise_if_type_changed(partial.cause, layout, nested)
            table, ok, match = None, None, _ROW.search(str(partial.cause))
            if match and partial.rows > 0 and partial.rows + int(match.group(1)) < hi - lo:
                out.append(Span(lo, lo + partial.rows, partial.table, partial.ok))
                lo, bad_row = lo + partial.rows, int(match.group(1))  # the row counts from its block
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
            _raise_if_type_changed(exc, layout, nested)
            table, ok, match = None, None, _ROW.search(str(exc))
            bad_row = int(match.group(1)) if match else None
        if table is not None and table.num_rows == hi - lo:
            out.append(Span(lo, hi, table, ok))
            continue
        failures += 1
        if hi - lo == 1:
            out.append(Span(lo, hi, None, None))
        elif bad_row is not None and 0 <= bad_row < hi - lo:
            out.append(Span(lo + bad_row, lo + bad_row + 1, None, None))
            todo += [span for span in ((lo + bad_row + 1, hi), (lo, lo + bad_row)) if span[0] < span[1]]
        else:  # no row named, or two documents on one line made more rows than lines
            mid = (lo + hi) // 2
            todo += [(mid, hi), (lo, mid)]
    out.sort(key=lambda span: span.lo)
    return out


def _reader(layout: Layout, nested: tuple[str, ...] = ()) -> Any:
    """A function parsing a buffer of lines in blocks of a given size (JSON): (table, which of its rows passed).

    ``nested``: flatten columns the parse skips (with any other unknown key: :func:`_nested_values`
    has checked the keys of every candidate it lets through).
    """
    import numpy as np
    import pyarrow as pa
    import pyarrow.json as pjson

    if layout.fmt == "csv":
        return lambda buffer, _block: read_csv(buffer, layout)  # one block: the whole buffer

    strict = layout.fmt == "flatten" and not nested
    schema = pa.schema([(name, layout.arrow_type(t)) for name, t in layout.columns if name not in nested])
    # Unknown keys are inferred rather than refused: an error would not say which row holds one.
    options = pjson.ParseOptions(explicit_schema=schema, unexpected_field_behavior="infer" if strict else "ignore")

    def read_json(buffer: pa.Buffer, block: int) -> tuple[pa.Table, Any]:
        # Blocks one after the other: an error's row counts from the start of its block.
        read = pjson.ReadOptions(use_threads=False, block_size=block)
        batches: list[pa.RecordBatch] = []
        try:
            for batch in pjson.open_json(pa.BufferReader(buffer), read_options=read, parse_options=options):
                batches.append(batch)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
            if not batches:
                raise  # the first block failed: its row counts from the buffer's start
            try:
                table, ok = checked(pa.Table.from_batches(batches))
            except pa.ArrowInvalid:  # the blocks read cannot be kept, and the row names no place in the buffer
                raise pa.ArrowInvalid("a later block failed after blocks that cannot be kept") from exc
            raise _PartialParse(table, ok, exc) from exc
        return checked(pa.Table.from_batches(batches))

    def checked(table: pa.Table) -> tuple[pa.Table, Any]:
        ok = np.ones(table.num_rows, dtype=bool)
        extra = [table.column(i) for i in range(len(schema), table.num_columns)]
        if any(pa.types.is_null(column.type) for column in extra):
            raise pa.ArrowInvalid("a key holding only null: which rows hold it is not known")
        for column in extra:  # keys that are no column: the Spark decoder explains them
            ok &= column.is_null().to_numpy(zero_copy_only=False)
        return table, ok

    return read_json


def read_csv(buffer: pa.Buffer, layout: Layout, counts: dict[int, int] | None = None) -> tuple[pa.Table, Any]:
    """Csv lines as text columns ``c0``, ``c1``...: (table, which of its rows have the layout's field count).

    A row with another count is a row of nulls there; ``counts``, when given, receives its line → its count.
    """
    import numpy as np
    import pyarrow as pa
    import pyarrow.csv as pcsv

    names = [f"c{i}" for i in range(len(layout.columns))]
    convert_options = pcsv.ConvertOptions(
        column_types={n: pa.string() for n in names},
        null_values=sorted({"", layout.null_value}),
        strings_can_be_null=True,
        quoted_strings_can_be_null=True,
    )
    skipped: list[int] = []

    def invalid(row: Any) -> str:
        skipped.append(row.number - 1)  # 1-based
        if counts is not None:
            counts[row.number - 1] = row.actual_columns
        return "skip"

    parse = pcsv.ParseOptions(
        delimiter=layout.delimiter,
        quote_char=layout.quote,
        double_quote=True,
        escape_char=False,
        newlines_in_values=False,
        ignore_empty_lines=False,
        invalid_row_handler=invalid,
    )
    read = pcsv.ReadOptions(column_names=names, use_threads=False, block_size=buffer.size + 1)
    table = pcsv.read_csv(pa.BufferReader(buffer), read, parse, convert_options)
    lines = table.num_rows + len(skipped)
    ok = np.ones(lines, dtype=bool)
    if skipped:  # a row with the wrong field count: realign the others with their lines
        ok[skipped] = False
        position = np.full(lines, -1, dtype=np.int64)
        position[ok] = np.arange(table.num_rows)
        table = table.take(pa.array(position, mask=~ok))
    return table, ok


def pre_checked(payload: pa.Array, layout: Layout) -> Any:
    """Which records pass the pre-checks and are valid UTF-8: those Arrow parses (numpy bool array)."""
    import numpy as np
    import pyarrow as pa

    keep = _candidates(payload, layout)
    picked = np.flatnonzero(keep)
    if len(picked):
        keep[picked[invalid_utf8(payload.take(pa.array(picked)))]] = False
    return keep


def _post_check(table: pa.Table, layout: Layout) -> Any:
    """Rows of a parsed span that stay certified: doubles must be finite and not ``-0``."""
    import numpy as np

    ok = np.ones(table.num_rows, dtype=bool)
    if layout.fmt != "flatten":
        return ok
    for name, col_type in layout.columns:
        if col_type == "double":
            column = table.column(name)
            values = column.to_numpy(zero_copy_only=False).astype(np.float64)
            present = ~np.isnan(values) | column.is_null().to_numpy(zero_copy_only=False)
            ok &= present & ~np.isinf(values) & ~((values == 0) & np.signbit(values))
    return ok


def convert_text(text: pa.Array, col_type: str, *, zoneless_utc: bool) -> tuple[pa.Array, Any]:
    """A column's values from its JSON or CSV text, and which records keep them.

    ``timestamp`` and ``date`` for both; for csv also ``long``, ``int``, ``double`` and ``boolean``
    (:data:`CSV_CONVERTED`). Numbers are converted only in their canonical decimal form (``-12``,
    ``0.5``; no sign ``+``, space, exponent or leading zero, at most 18 digits for long, 9 for
    int, 15 on each side of the point for double; not a negative zero), booleans only as ``true``
    or ``false``.

    Only canonical ISO 8601 text is converted: a date ``yyyy-MM-dd``; a timestamp ``yyyy-MM-dd``,
    ``T`` or a space, ``HH:mm:ss``, up to six fraction digits, then ``Z``, ``+HH:mm`` or nothing
    (read as UTC: only when ``zoneless_utc``, the session time zone Spark would read it in).
    Each is parsed and checked not moved (:func:`_not_moved`), so a date or time that does not exist (``02-30``,
    ``23:59:60``), which the parser would roll over, is refused rather than moved. Spark's
    conversion (``decode/sql.py``, ``convert``) reads every text converted here to the same value
    (``tests/decode/test_arrow_decoder.py`` compares them); every other text is not kept (numpy
    bool False), so Spark's decoder converts or refuses it. Null text is kept as null.
    """
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    if col_type == "date":
        canonical = pc.match_substring_regex(text, _DATE_TEXT)
        seconds = pc.strptime(text, format="%Y-%m-%d", unit="s", error_is_null=True)
        exact = pc.and_(canonical, _not_moved(seconds, pc.if_else(canonical, text, None), second=False))
        values = seconds.cast(pa.date32())
    elif col_type in _NUMBER_TEXT:  # csv: canonical numbers, which any correctly rounded parser reads alike
        exact = pc.match_substring_regex(text, _NUMBER_TEXT[col_type])
        values = pc.cast(pc.if_else(exact, text, "0"), _native_arrow_type(col_type))
        if col_type == "double":  # -0 and -0.0 (which both read as -0.0): kept simple, Spark's to convert
            exact = pc.and_(exact, pc.invert(pc.and_(pc.starts_with(text, "-"), pc.equal(values, 0.0))))
    elif col_type == "boolean":
        exact = pc.or_(pc.equal(text, "true"), pc.equal(text, "false"))
        values = pc.equal(text, "true")
    elif col_type == "timestamp":
        parts = pc.extract_regex(text, _TIMESTAMP_TEXT)
        day_time = pc.binary_join_element_wise(pc.struct_field(parts, "day"), pc.struct_field(parts, "time"), " ")
        seconds = pc.strptime(day_time, format="%Y-%m-%d %H:%M:%S", unit="s", error_is_null=True)
        exact = _not_moved(seconds, day_time, second=True)
        fraction = pc.utf8_rpad(pc.utf8_slice_codeunits(pc.struct_field(parts, "fraction"), 1), width=6, padding="0")
        zone = pc.struct_field(parts, "zone")
        if not zoneless_utc:
            exact = pc.and_(exact, pc.not_equal(zone, ""))
        offset = pc.if_else(pc.equal(pc.utf8_length(zone), 6), zone, "+00:00")
        minute = pc.utf8_slice_codeunits(offset, 4, 6).cast(pa.int64())
        minutes = pc.add(pc.multiply(pc.utf8_slice_codeunits(offset, 1, 3).cast(pa.int64()), 60), minute)
        exact = pc.and_(exact, pc.and_(pc.less_equal(minutes, _MAX_OFFSET_MINUTES), pc.less(minute, 60)))
        east = pc.if_else(pc.starts_with(offset, "-"), pc.negate(minutes), minutes)
        micros = pc.add(pc.multiply(seconds.cast(pa.int64()), 1_000_000), fraction.cast(pa.int64()))
        values = pc.subtract(micros, pc.multiply(east, 60_000_000)).cast(pa.timestamp("us", tz="UTC"))
    else:
        raise ValueError(f"no Arrow conversion from text to {col_type}")
    exact = exact.fill_null(False)
    keep = pc.or_(pc.is_null(text), exact).to_numpy(zero_copy_only=False)
    return pc.if_else(exact, values, pa.nulls(len(values), values.type)), np.asarray(keep, dtype=bool)
