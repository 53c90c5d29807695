r"""A decoded row as Spark's ``to_json`` prints it, for error rows a task settles itself.

Spark's side gives an error row its decoded fields as ``to_json`` of the record's fields
(``_decoded``: null fields left out, ``{}`` as NULL; ``decode/plan.py``). A task that settles an
error instead prints that text only for values it prints exactly as Spark's Jackson does, and
raises :class:`Unprintable` for any other, so the record goes back to Spark:

- integers and booleans; strings with Jackson's escapes (``\"``, ``\\``, ``\b \t \n \f \r``,
  other control characters as ``\u00XX`` in upper case, everything else as it is);
- doubles of 0 and from 0.001 to 10^7, which Java's ``Double.toString`` prints as Python's
  ``repr`` does (``250.0``, ``123.45``); outside that range Java switches to ``1.0E7``;
- dates (``2024-05-01``) and, in a UTC session, timestamps (``2024-05-01T10:00:00.123Z``: Spark's
  JSON timestamp format, milliseconds) from year 1000 to 9999.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable

_SHORT = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}


class Unprintable(ValueError):
    """A value whose ``to_json`` text is not certain here."""


_ESCAPED = re.compile(r'[\x00-\x1f"\\]')  # what Jackson escapes: a scan in C, as most text holds none


def _escaped(match: re.Match[str]) -> str:
    ch = match.group()
    return _SHORT.get(ch) or f"\\u{ord(ch):04X}"


def _string(text: str) -> str:
    return '"' + _ESCAPED.sub(_escaped, text) + '"'


def printed_as_repr(value: float) -> bool:
    """Whether Java's ``Double.toString`` prints ``value`` as Python's ``repr`` does."""
    return (value == 0 and str(value) == "0.0") or 1e-3 <= abs(value) < 1e7


def _value(col_type: str, value: object, *, utc: bool) -> str:
    if col_type in ("long", "int") and isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if col_type == "boolean" and isinstance(value, bool):
        return "true" if value else "false"
    if col_type == "string" and isinstance(value, str):
        return _string(value)
    if col_type == "double" and isinstance(value, float) and printed_as_repr(value):
        return repr(value)
    if col_type == "date" and isinstance(value, dt.date) and 1000 <= value.year <= 9999:
        return f'"{value.isoformat()}"'
    if col_type == "timestamp" and utc and isinstance(value, dt.datetime) and value.tzinfo is not None:
        v = value.astimezone(dt.timezone.utc)
        if 1000 <= v.year <= 9999:
            return f'"{v:%Y-%m-%dT%H:%M:%S}.{v.microsecond // 1000:03d}Z"'
    raise Unprintable(f"{col_type} {value!r}")


def spark_json(fields: Iterable[tuple[str, str, object]], *, utc: bool) -> str | None:
    """``nullif(to_json(named_struct(...)), '{}')`` of (name, column type, value) fields, in order.

    ``utc``: Spark's session time zone is UTC (a timestamp is printed in it).

    Raises:
        Unprintable: a value Spark might print otherwise.
    """
    members = [f"{_string(name)}:{_value(t, v, utc=utc)}" for name, t, v in fields if v is not None]
    return "{" + ",".join(members) + "}" if members else None
