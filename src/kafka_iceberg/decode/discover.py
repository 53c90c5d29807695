"""New flatten columns: the keys a batch holds that the table has no column for, and their types.

This is the one place decode looks at data (two small aggregations, the second only when new keys
exist), so it needs a batch DataFrame; a streaming query decodes each micro-batch in
``foreachBatch``.

Rules:
- order: first seen, by (topic, partition, offset) of the first record holding the key, then
  the key's position in that document;
- a key whose values in the batch are all JSON null gets no column (nothing of it is lost);
- type from the JSON values: all integers (fitting a long) → long; integers and decimals → double;
  all ``true``/``false`` → boolean; anything else (strings, objects, arrays, mixtures, integers
  beyond a long) → string;
- a key cannot become a column when it is reserved (``topic``, ``partition``, ``offset``,
  ``timestamp``, ``pt``, ``headers``, ``_ki_*``), not an identifier (letters, digits, ``_``), or
  equal ignoring case to another column; records holding it (non-null) are error rows.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kafka_iceberg.config import IDENTIFIER, IDENTIFIER_EXPECTED
from kafka_iceberg.decode.flatten import Parsed, names_array
from kafka_iceberg.decode.sql import JSON_OPTIONS_SQL, ident, lit
from kafka_iceberg.records import INTERNAL_PREFIX, TOMBSTONE_COLUMN
from kafka_iceberg.spec.columns import FIXED_COLUMNS

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

RESERVED = frozenset(c.lower() for c in (*FIXED_COLUMNS, TOMBSTONE_COLUMN))


@dataclass(frozen=True)
class Discovery:
    """What a batch adds: new columns (name → type, first-seen order) and keys refused as columns."""

    new_columns: dict[str, str]
    rejected: dict[str, str]


def discover(frame: DataFrame, parsed: Parsed, columns: Mapping[str, str]) -> Discovery:
    """Find the keys of the batch's valid documents that ``columns`` lacks and type them.

    Args:
        frame: the Kafka frame with the parse stages applied.
        parsed: the parse stages' column names.
        columns: the payload columns already known (table, declared).
    """
    from pyspark.sql import functions as F

    obj = parsed.obj
    valid = f"{obj} IS NOT NULL AND size({obj}) = size(array_distinct(map_keys({obj})))"
    known = names_array(list(columns))
    fresh = f"map_keys(map_filter({obj}, (k, v) -> v IS NOT NULL AND NOT array_contains({known}, k)))"
    # A document whose keys all are columns costs a count; only the others reach map_filter.
    found = " + ".join(f"CAST(map_contains_key({obj}, {lit(n)}) AS INT)" for n in columns) or "0"
    firsts = (
        frame.where(f"{obj} IS NOT NULL AND size({obj}) != {found}")
        .where(valid)
        .select("topic", "partition", "offset", F.posexplode(F.expr(fresh)).alias("pos", "k"))
        .groupBy("k")
        .agg(F.min(F.struct("topic", "partition", "offset", "pos")).alias("first"))
        .collect()
    )
    ordered = [row["k"] for row in sorted(firsts, key=lambda row: tuple(row["first"]))]
    accepted, rejected = _classify(ordered, columns)
    if not accepted:
        return Discovery({}, rejected)
    return Discovery(_types(frame, parsed, valid, accepted), rejected)


def _classify(keys: list[str], columns: Mapping[str, str]) -> tuple[list[str], dict[str, str]]:
    taken = {name.lower(): name for name in columns}
    accepted: list[str] = []
    rejected: dict[str, str] = {}
    for key in keys:
        if key.lower() in RESERVED or key.lower().startswith(INTERNAL_PREFIX):
            rejected[key] = "reserved column name"
        elif not IDENTIFIER.match(key):
            rejected[key] = f"not a valid column name ({IDENTIFIER_EXPECTED})"
        elif key.lower() in taken:
            rejected[key] = f"differs only in case from column {taken[key.lower()]}"
        else:
            taken[key.lower()] = key
            accepted.append(key)
    return accepted, rejected


def _types(frame: DataFrame, parsed: Parsed, valid: str, names: list[str]) -> dict[str, str]:
    from pyspark.sql import functions as F

    def probe(spark_type: str) -> Any:
        # from_json fills the fields it can and leaves the others NULL, so one parse per type
        # tells, per key, which values are JSON integers, numbers or booleans.
        schema = lit(", ".join(f"{ident(n)} {spark_type}" for n in names))
        return F.expr(f"from_json({parsed.text}, {schema}, {JSON_OPTIONS_SQL})")

    holding = f"{valid} AND arrays_overlap(map_keys({parsed.obj}), {names_array(names)})"
    probes = frame.where(holding).select(
        probe("BIGINT").alias("l"),
        probe("DOUBLE").alias("d"),
        probe("BOOLEAN").alias("b"),
        *[F.expr(f"try_element_at({parsed.obj}, {lit(n)})").alias(f"t{i}") for i, n in enumerate(names)],
    )
    aggs = []
    for i, name in enumerate(names):
        text, as_double = F.col(f"t{i}"), F.col("d").getField(name)
        aggs += [
            F.count(text),
            F.count(F.col("l").getField(name)),
            F.count(F.when(as_double.isNotNull() & text.rlike("[.eE]"), 1)),
            F.count(F.col("b").getField(name)),
        ]
    counts = probes.agg(*aggs).collect()[0]
    out = {}
    for i, name in enumerate(names):
        total, longs, decimals, booleans = (int(counts[4 * i + j]) for j in range(4))
        if total == longs:
            out[name] = "long"
        elif total == longs + decimals:
            out[name] = "double"
        elif total == booleans:
            out[name] = "boolean"
        else:
            out[name] = "string"
    return out
