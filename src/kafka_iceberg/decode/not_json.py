"""Messages that are not one JSON document, told apart where the Arrow writer parses them.

A json or flatten record the Arrow decoder did not certify goes back to Spark's decoder, which
gives every record that is not exactly one JSON document the same error (``decode/sql.py``,
``json_problem``): ``invalid JSON in value``, or ``invalid JSON in value: unexpected content after
the end of the document`` when the text starts (after spaces) with ``{`` or ``[`` and Spark's
parser reads a whole object or array there before what follows. Nothing of the table plays a part
in that reason, so the task that parsed the batch can give it itself (:func:`settled_reasons`), and
a batch whose only bad records are such messages needs no second Spark job.

Python's ``json`` decides, only where it cannot disagree with Spark's Jackson parser (with the
options Spark's decoder sets: no single quotes, comments, unquoted names, leading zeros, ``NaN``):
valid UTF-8, not empty, no control character or byte order mark, at most 1 MiB, no run of 500
number characters (Jackson refuses 1000) and fewer than 500 brackets (Jackson refuses 1000 levels
of nesting; Python's recursion limit is about as deep). Any message outside those bounds, and any
message Python reads as one valid JSON value, is left to Spark's decoder as before.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import TYPE_CHECKING

from kafka_iceberg.decode.arrow import MAX_BYTES

if TYPE_CHECKING:
    import pyarrow as pa

_UNCERTAIN = re.compile(r"[\x00-\x1f\ufeff]|[-+.0-9eE]{500}")
_MAX_BRACKETS = 500


def refuse(token: str) -> None:
    """``parse_constant`` of a decoder reading as Spark's does: NaN and Infinity are not JSON there either."""
    raise ValueError(f"{token} is not JSON")


_DECODER = json.JSONDecoder(parse_constant=refuse)


def uncertain(text: str) -> bool:
    """Whether ``text`` is outside the bounds where Python's ``json`` and Spark's parser cannot disagree."""
    return bool(_UNCERTAIN.search(text)) or text.count("[") + text.count("{") >= _MAX_BRACKETS


def checked_text(data: bytes | None) -> str | None:
    """``data`` as text where Python's ``json`` reads it as Spark's parser would; None otherwise.

    None for a null or empty payload and invalid UTF-8 (each has its own rule on Spark's side), and
    for text outside the bounds where the two parsers cannot disagree (:func:`uncertain`).
    """
    if not data or len(data) > MAX_BYTES:
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return None if uncertain(text) else text


def settled_reason(data: bytes | None, part: str) -> str | None:
    """The reason Spark's decoder gives ``data`` when it is certainly not one JSON document, else None.

    ``part``: ``value``, or ``key`` under mode key (the reason names it).
    """
    text = checked_text(data)
    if text is None:
        return None
    try:
        _DECODER.decode(text)
        return None  # one valid JSON value: Spark's decoder decides what it is
    except RecursionError:
        return None
    except ValueError:
        pass
    start = text.lstrip(" ")  # Spark's ltrim: spaces only (no other whitespace gets this far)
    if start[:1] in ("{", "["):
        try:
            _DECODER.raw_decode(start)
            return f"invalid JSON in {part}: unexpected content after the end of the document"
        except RecursionError:
            return None
        except ValueError:
            pass
    return f"invalid JSON in {part}"


def settled_reasons(payload: pa.Array, rows: Iterable[int], part: str) -> dict[int, str]:
    """Those of ``rows`` (positions in ``payload``) that are certainly not one JSON document, with their reason."""
    out = {}
    for i in rows:
        reason = settled_reason(payload[i].as_py(), part)
        if reason is not None:
            out[int(i)] = reason
    return out
