"""Flatten records that certainly do not decode, told apart where the Arrow writer parses them.

The flatten decoder (``decode/flatten.py``, ``schema_evolution: strict``) reads each message as a
JSON object into a map of texts (Spark's ``from_json`` into ``map<string,string>``) and refuses it
with reasons that depend on nothing but the message and the table's columns: ``unknown field
promo (schema_evolution is strict)``, then one ``field qty: expected int, got "several"`` per
column whose text does not convert, joined with ``; ``. A task can give those reasons itself
(:func:`settled_reasons`), with the error row's ``_decoded``, where it is certain of:

- the message: one JSON object that Python's ``json`` reads within :mod:`not_json`'s bounds, with
  no key twice at its top level (a message that is not JSON at all gets :mod:`not_json`'s reason);
- each field's text as Spark's map holds it: a string as it reads, ``true``/``false``, an integer
  as Jackson writes it back (not ``-0``), a fraction in a ``double`` column (its value is the
  same), or in a ``string`` column where Java prints it as Python's ``repr`` does
  (``readable.py``), and an object or array Jackson writes back as Python's compact ``json.dumps``
  does (no fraction, no ``-0``, no string needing an escape or outside the BMP);
- each field's verdict: converted where parsed (``decode.arrow.convert_text``), or a ``long``,
  ``int``, ``double`` or ``boolean`` text holding a character no Spark conversion accepts
  (``csv_errors``), or NULL and not required by a JSON Schema;
- the decoded fields printed as Spark's ``to_json`` prints them (``decode/readable.py``).

Any other record goes back to Spark's decoder as before.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kafka_iceberg.decode import not_json
from kafka_iceberg.decode.arrow import Layout, convert_text
from kafka_iceberg.decode.csv_errors import refused, shown
from kafka_iceberg.decode.readable import Unprintable, printed_as_repr, spark_json

if TYPE_CHECKING:
    import pyarrow as pa


class _Int(str):
    """An integer as the message spells it."""


class _Float(str):
    """A number with a fraction or exponent as the message spells it."""


class _Object(list):  # type: ignore[type-arg]
    """An object's (key, value) pairs in message order, duplicates kept."""


class _Uncertain(Exception):
    """Spark might read or print this value otherwise: the record is Spark's to decode."""


_DECODER = json.JSONDecoder(
    parse_int=_Int, parse_float=_Float, parse_constant=not_json.refuse, object_pairs_hook=_Object
)
_CONVERTED = ("long", "int", "double", "boolean", "timestamp", "date")  # convert_text's types


def _plain(text: str) -> str:
    """``text`` quoted, where Jackson writes it unescaped (else :class:`_Uncertain`)."""
    if any(c in '"\\' or c < " " or c > "\uffff" for c in text):
        raise _Uncertain
    return f'"{text}"'


def _written_back(value: Any) -> str:
    """An object or array as Jackson's re-serialisation (Spark's map text of it) writes it."""
    if isinstance(value, _Object):
        return "{" + ",".join(f"{_plain(k)}:{_written_back(v)}" for k, v in value) + "}"
    if isinstance(value, list):
        return "[" + ",".join(_written_back(v) for v in value) + "]"
    return _scalar(value)


def _scalar(value: Any) -> str:
    if isinstance(value, _Int) and value != "-0":
        return str(value)
    if value is True or value is False or value is None:
        return json.dumps(value)
    if isinstance(value, str) and not isinstance(value, (_Int, _Float)):
        return _plain(value)
    raise _Uncertain  # a fraction (Java prints doubles its own way) or -0


def _text(value: Any, col_type: str) -> tuple[str | None, float | None]:
    """Spark's map text of a top-level value, and the value itself where it is a fraction in a ``double`` column."""
    if value is None:
        return None, None
    if isinstance(value, _Float):
        number = float(value)
        if not math.isfinite(number):
            raise _Uncertain
        if col_type == "double":
            return repr(number), number
        if col_type == "string" and printed_as_repr(number):
            return repr(number), None
        raise _Uncertain
    if isinstance(value, _Int):
        if value == "-0":
            raise _Uncertain
        return str(value), None
    if value is True or value is False:
        return json.dumps(value), None
    if isinstance(value, list):  # an object or array: its re-serialisation
        return _written_back(value), None
    return str(value), None


def _document(data: bytes | None) -> _Object | None:
    """The message as a top-level object with distinct keys, where that is certain; else None."""
    text = not_json.checked_text(data)
    if text is None:
        return None
    try:
        doc = _DECODER.decode(text)
    except (ValueError, RecursionError):
        return None
    if not isinstance(doc, _Object) or len({k for k, _ in doc}) != len(doc):
        return None  # not an object, or a duplicate key: Spark's rules have their own reasons
    return doc


@dataclass
class _Read:
    """A message read as Spark's map would hold it."""

    row: int
    unknown: list[str]  # its keys that are no column, in message order
    texts: dict[str, str | None]  # each column's text (None: missing or null)
    fractions: dict[str, float]  # the values of ``double`` columns given as a fraction


def _read(data: bytes | None, types: dict[str, str], order: list[str], row: int) -> _Read | None:
    doc = _document(data)
    if doc is None:
        return None
    values = dict(doc)
    try:
        read = {name: _text(values.get(name), types[name]) for name in order}
    except _Uncertain:
        return None
    fractions = {name: v for name, (_, v) in read.items() if v is not None}
    return _Read(row, [k for k, _ in doc if k not in types], {n: t for n, (t, _) in read.items()}, fractions)


def settled_reasons(
    payload: pa.Array, rows: Sequence[int], layout: Layout, names: Sequence[str], *, part: str, utc: bool
) -> dict[int, tuple[str, str | None]]:
    """Those of ``rows`` (positions in ``payload``) that certainly do not decode: their reason and ``_decoded``.

    ``names``: the table's columns in order (the order of the problems and of ``_decoded``);
    ``part``: ``value``, or ``key`` under mode key; ``utc``: Spark's session time zone is UTC.
    """
    import pyarrow as pa

    types = dict(layout.columns)
    order = [name for name in names if name in types]
    out: dict[int, tuple[str, str | None]] = {}
    found: list[_Read] = []
    for i in rows:
        data = payload[i].as_py()
        if (read := _read(data, types, order, int(i))) is not None:  # one JSON object: parsed once
            found.append(read)
        elif (reason := not_json.settled_reason(data, part)) is not None:
            out[int(i)] = (reason, None)
    converted = {  # name → (values, exact) over the records found: one conversion per column
        name: convert_text(pa.array([r.texts[name] for r in found], pa.string()), types[name], zoneless_utc=utc)
        for name in order
        if types[name] in _CONVERTED and found
    }
    python = {name: (values.to_pylist(), exact) for name, (values, exact) in converted.items()}  # at once, not each
    for j, read in enumerate(found):
        settled = _settled(read, {name: (v[j], exact[j]) for name, (v, exact) in python.items()}, layout, order,
                           utc=utc)  # fmt: skip
        if settled is not None:
            out[read.row] = settled
    return out


def _settled(
    read: _Read, converted: dict[str, tuple[Any, bool]], layout: Layout, order: list[str], *, utc: bool
) -> tuple[str, str | None] | None:
    """The reason and ``_decoded`` of a record read, or None when it decodes or is not certain.

    ``converted``: each converted column's value and whether it is exact; ``order``: the layout's
    columns in the table's order.
    """
    types = dict(layout.columns)
    problems = []
    if read.unknown:
        label = "unknown field" if len(read.unknown) == 1 else "unknown fields"
        problems.append(f"{label} {', '.join(read.unknown)} (schema_evolution is strict)")
    fields: list[tuple[str, str, object]] = []
    for name in order:
        col_type, text = types[name], read.texts[name]
        if text is None:
            if name in layout.required:
                return None  # a JSON Schema's required field: Spark's to explain
            continue
        if name in read.fractions:
            fields.append((name, col_type, read.fractions[name]))
        elif col_type == "string":
            fields.append((name, col_type, text))
        elif name in converted and converted[name][1]:
            fields.append((name, col_type, converted[name][0]))
        elif refused(col_type, text):
            problems.append(f"field {name}: expected {col_type}, got {shown(text)}")
        else:
            return None  # Spark might convert it: Spark's to decide
    if not problems:
        return None
    try:
        return "; ".join(problems), spark_json(fields, utc=utc)
    except Unprintable:
        return None
