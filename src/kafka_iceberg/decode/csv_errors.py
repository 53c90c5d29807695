"""CSV records that certainly do not decode, told apart where the Arrow writer parses them.

The csv decoder (``decode/csv.py``) refuses a line with the wrong number of fields, and a field
whose text does not convert to its column's type, with reasons that depend on nothing but the
line: ``expected 10 CSV columns, got 7``; ``field amount: expected double, got "12,50 EUR"`` (the
problems of one line joined with ``; ``). A task can give those reasons itself, for the lines
the Arrow decoder parses (the pre-checks make their fields unambiguous), where it is certain:

- the field count, which Arrow's reader and Spark's read alike on such lines;
- a field no conversion of Spark's accepts (:func:`refused`): for ``long``/``int`` one holding a
  printable ASCII character other than a digit, sign or point; for ``double`` one other than
  those, an exponent, the letters of ``NaN``, ``Infinity`` and Java's hexadecimal and suffix
  forms; for ``boolean`` a letter outside ``true``/``false``; for those four a blank field; for
  ``date`` and ``timestamp`` one that does not start with a date (``string`` takes any text);
- every other field of the line converted where parsed (``decode.arrow.convert_text``) or NULL,
  and their values printable as Spark's ``to_json`` prints them (``decode/readable.py``), for the
  error row's ``_decoded``.

Any other line goes back to Spark's decoder as before.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from kafka_iceberg.decode.arrow import Layout, convert_text, pre_checked, read_csv
from kafka_iceberg.decode.csv import DIAGNOSE_EXTRA
from kafka_iceberg.decode.readable import Unprintable, spark_json
from kafka_iceberg.decode.sql import MAX_SHOWN

if TYPE_CHECKING:
    import pyarrow as pa

_PRINTABLE = {chr(c) for c in range(0x21, 0x7F)}
# What a text Spark converts to the type can hold, of the printable ASCII characters: Java's
# Double.parseDouble reads hexadecimal (0x1.8p1) and a d/f suffix, Spark also inf and nan.
_ACCEPTED = {
    "long": "0123456789+-.",
    "int": "0123456789+-.",
    "double": "0123456789+-.abcdefinptxyABCDEFINPTXY",
    "boolean": "trueflsTRUEFLS",
}
_REFUSED = {t: re.compile("[" + re.escape("".join(sorted(_PRINTABLE - set(ok)))) + "]") for t, ok in _ACCEPTED.items()}
# What Spark's conversion needs at the start of a date or timestamp text, once trimmed of spaces.
_DATED = {
    "date": re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}"),
    "timestamp": re.compile(r"[+-]?[0-9]{4,}-[0-9]{2}-[0-9]{2}"),
}


def shown(text: str) -> str:
    """``text`` as a reason shows it: quoted, cut to ``MAX_SHOWN`` characters (``decode/sql.py``, ``shown``)."""
    return '"' + (text[: MAX_SHOWN - 3] + "..." if len(text) > MAX_SHOWN else text) + '"'


def refused(col_type: str, text: str) -> bool:
    """Whether no conversion of Spark's accepts ``text`` as ``col_type`` (False: it might, or no judge here).

    Refused: a number or boolean text that is empty, blank or holds a character outside
    :data:`_ACCEPTED`; a date or timestamp text that does not start as ``decode/sql.py``'s
    ``convert`` requires.
    """
    if col_type in _ACCEPTED:
        return not text.strip(" ") or _REFUSED[col_type].search(text) is not None
    dated = _DATED.get(col_type)
    return dated is not None and dated.match(text.strip(" ")) is None


def _count_reason(n: int, got: int) -> str:
    if got > n + DIAGNOSE_EXTRA:
        return f"expected {n} CSV columns, got more than {n + DIAGNOSE_EXTRA}"
    return f"expected {n} CSV columns, got {got}"


def settled_reasons(
    payload: pa.Array, rows: Sequence[int], layout: Layout, names: Sequence[str], *, utc: bool
) -> dict[int, tuple[str, str | None]]:
    """Those of ``rows`` (positions in ``payload``) that certainly do not decode: their reason and ``_decoded``.

    ``names``: the table's columns in order (the order of the problems and of ``_decoded``);
    ``utc``: Spark's session time zone is UTC.
    """
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    if not len(rows):
        return {}
    lines = payload.take(pa.array(rows, pa.int64()))
    parsed = np.flatnonzero(pre_checked(lines, layout))
    if not len(parsed):
        return {}
    joined = pc.binary_join_element_wise(lines.take(pa.array(parsed, pa.int64())), pa.scalar(b"\n"), pa.scalar(b""))
    counts: dict[int, int] = {}
    table, whole = read_csv(pa.py_buffer(b"".join(joined.to_pylist())), layout, counts)
    n = len(layout.columns)
    types = dict(layout.columns)
    texts = {name: table.column(f"c{i}") for i, (name, _) in enumerate(layout.columns)}
    values, exact = {}, {}
    for name, col_type in layout.columns:
        if layout.converted_where_parsed(col_type):
            values[name], exact[name] = convert_text(texts[name], col_type, zoneless_utc=utc)
        else:  # a string takes any text; another type Spark converts is Spark's to judge
            values[name], exact[name] = texts[name], np.full(len(parsed), col_type == "string")
    order = [name for name in names if name in types]
    text_of = {name: column.to_pylist() for name, column in texts.items()}  # Python values at once, not one by one
    value_of = {name: column.to_pylist() for name, column in values.items()}
    out: dict[int, tuple[str, str | None]] = {}
    for j, i in enumerate(parsed.tolist()):
        if not whole[j]:
            out[int(rows[i])] = (_count_reason(n, counts[j]), None)
            continue
        problems, fields = [], []
        for name in order:
            text = text_of[name][j]
            if text is not None and not exact[name][j]:
                if not refused(types[name], text):
                    break  # Spark might convert it: Spark's to decide
                problems.append(f"field {name}: expected {types[name]}, got {shown(text)}")
                fields.append((name, types[name], None))
            elif text is None and name in layout.required:
                break  # a JSON Schema's required field: Spark's to explain
            else:
                fields.append((name, types[name], value_of[name][j]))
        else:
            if not problems:
                continue
            try:
                out[int(rows[i])] = ("; ".join(problems), spark_json(fields, utc=utc))
            except Unprintable:
                continue
    return out
