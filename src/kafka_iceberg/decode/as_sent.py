"""Text and binary written by the task that reads them: nothing to parse, so nothing left to Spark.

A text or binary row is its message's key and value as they were sent (``decode/simple.py``): the
bytes themselves for binary, the same bytes as a string for text, where an invalid UTF-8 key or
value makes the record an error. With the Arrow writer's single pass, the task that writes the
rows makes them itself (``write/certified.py``) and settles every error with the reason and decoded
fields Spark's decoder gives it, so a text batch's Spark plan is the Kafka frame alone: no decode
projections for Spark to analyse at every batch and no JVM pass over the values before Python.
``source.decoder: auto`` takes this path for text (measured faster: ``decode/arrow.py``,
``AUTO_ARROW_WHERE_PARSED``) and ``arrow`` for either format; ``spark`` keeps Spark's decode.

The UTF-8 check is Arrow's validation of its cast to a string, which refuses what Java's decoder
replaces (overlong forms, surrogates, code points past U+10FFFF, truncated sequences): the
round trip Spark's side compares (``decode/sql.py``, ``utf8_ok``) and the one the Avro tasks rely on.
A null value is a row's NULL: the single pass never upserts (``spec/load.py``, ``arrow_writer_unsupported``),
so no null value is a tombstone here.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from kafka_iceberg.decode.arrow import OK, Layout, invalid_utf8
from kafka_iceberg.decode.plan import KEY, VALUE
from kafka_iceberg.decode.readable import spark_json

if TYPE_CHECKING:
    import pyarrow as pa

AS_SENT = frozenset({"text", "binary"})
_SOURCE = {"key": KEY, "value": VALUE}


def as_sent_layout(fmt: str, mode: str) -> Layout | None:
    """The layout of a text or binary table (None for other formats): the parts ``mode`` writes."""
    if fmt not in AS_SENT:
        return None
    col_type = "string" if fmt == "text" else "binary"
    parts = [p for p in ("key", "value") if mode in (p, "default")]
    return Layout(fmt=fmt, source=VALUE, columns=tuple((p, col_type) for p in parts))


def certify_as_sent(batch: pa.RecordBatch, layout: Layout) -> pa.RecordBatch:
    """``certify_batch``'s shape for text and binary: ``_ki_certified`` and each part as its row holds it."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    ok = np.ones(batch.num_rows, dtype=bool)
    parts = []
    for name, _ in layout.columns:
        column = batch.column(_SOURCE[name])
        if layout.fmt == "text":
            bad = invalid_utf8(column)  # one validating cast when all are UTF-8
            if len(bad):
                ok[bad] = False
                valid = np.ones(batch.num_rows, dtype=bool)
                valid[bad] = False
                column = pc.if_else(pa.array(valid), column, pa.scalar(None, column.type))
            # validated above: the cast only relabels the buffers
            column = pc.cast(column, options=pc.CastOptions(pa.string(), allow_invalid_utf8=True))
        parts.append(column)
    names = [*batch.schema.names, OK, *[f"_ki_a{i}" for i in range(len(parts))]]
    return pa.RecordBatch.from_arrays([*batch.columns, pa.array(ok), *parts], names=names)


def settled_reasons(batch: pa.RecordBatch, rows: Iterable[int], layout: Layout) -> dict[int, tuple[str, str | None]]:
    """Those of ``rows`` whose key or value is not UTF-8 (text): Spark's decoder's reason and decoded fields.

    The reason names each part that is not (``invalid UTF-8 in key; invalid UTF-8 in value``); the
    decoded fields are the parts that are, as Spark's ``to_json`` prints them (NULL when none is).
    """
    if layout.fmt != "text":
        return {}  # binary cannot fail
    out = {}
    for i in rows:
        reasons: list[str] = []
        fields: list[tuple[str, str, Any]] = []
        for name, _ in layout.columns:
            data = batch.column(_SOURCE[name])[i].as_py()
            try:
                fields.append((name, "string", None if data is None else data.decode("utf-8")))
            except UnicodeDecodeError:
                reasons.append(f"invalid UTF-8 in {name}")
        if reasons:
            out[int(i)] = ("; ".join(reasons), spark_json(fields, utc=True))
    return out
