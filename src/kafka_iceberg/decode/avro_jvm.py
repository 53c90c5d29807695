"""Avro decoded in the JVM (spark-avro's ``from_avro``) for the records it decodes exactly as fastavro does.

fastavro in Spark's Python workers (``decode/schemaful.py``) takes 20-40 µs a record, nearly all of
an Avro batch's time. ``from_avro`` decodes in the JVM, but by other rules: it ignores bytes left
after the record, reads a boolean byte other than 1 as false (fastavro: true), keeps text that is
not UTF-8 and dates past Python's year 9999. So the JVM keeps a record only where none of that
can differ (docs/decode.md, "Avro in the JVM"):

- its header names a writer schema :func:`jvm_writers` accepts (a record of plain values whose
  columns are the table's, type for type, as spark-avro types them too);
- ``from_avro`` decoded it (PERMISSIVE: a record that does not decode comes back all NULL);
- ``to_avro`` of the value gives back the record's bytes exactly (nothing left over, booleans 0 or
  1, shortest lengths: Avro's binary encoding is canonical);
- its strings are UTF-8, its dates between 1582-10-15 and 9999-12-31, its timestamps from 1900 on.

Every other record goes to the Python decoder, which gives it its value or its reason as before.

Java's Avro allocates a collection as long as the count it reads, before reading it: one corrupt
count is an ``OutOfMemoryError`` that takes the executor down. Its system properties
(:data:`LIMITS`) turn that into an error ``from_avro`` catches; the JVM decodes only where the JVMs
that run the tasks have them (:func:`limits_set`): local sessions (``session.get_spark``) and the
bundle's job clusters (``databricks.yml``) set them.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from kafka_iceberg.decode import avro
from kafka_iceberg.decode.arrow import invalid_utf8
from kafka_iceberg.decode.wire import header_sql

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.types import DataType, StructType

    from kafka_iceberg.decode.codec import Codec

log = logging.getLogger(__name__)

# Java Avro's limits: past them a record is left to Python (no limit there), never lost.
LIMITS = {
    "org.apache.avro.limits.collectionItems.maxLength": "1000000",
    "org.apache.avro.limits.bytes.maxLength": "16777216",
    "org.apache.avro.limits.string.maxLength": "16777216",
}
LIMIT_OPTIONS = tuple(f"-D{key}={value}" for key, value in LIMITS.items())
_OPTIONS = {"mode": "PERMISSIVE", "datetimeRebaseMode": "CORRECTED"}  # proleptic Gregorian, as Python's
DECODED = "_ki_avro"
OK = "_ki_avro_ok"
_accepted: dict[tuple[str, str], bool] = {}  # (writer schema, columns) → spark-avro types them as the table


def limits_set(spark: SparkSession) -> bool:
    """Whether the JVMs that run this session's tasks have :data:`LIMITS` (a local master: the driver's)."""
    context = spark.sparkContext
    if str(context.master).startswith("local["):
        system = context._jvm.java.lang.System  # type: ignore[union-attr]
        return all(system.getProperty(key) is not None for key in LIMITS)
    options = context.getConf().get("spark.executor.extraJavaOptions") or ""
    return all(f"-D{key}=" in options for key in LIMITS)


def jvm_writers(frame: DataFrame, codec: Codec) -> dict[int | None, str]:
    """The writer schemas (by schema id; None: plain Avro's file) the JVM decodes for ``codec``.

    Empty where it does not apply: not Avro, a Debezium envelope, no :data:`LIMITS`, or no
    spark-avro on the classpath.
    """
    if codec.fmt != "avro" or codec.envelope != "none" or not limits_set(frame.sparkSession):
        return {}
    texts = {None: codec.plain_schema} if not codec.wire else dict(codec.writers)
    out: dict[int | None, str] = {}
    for schema_id, text in texts.items():
        if text is not None and _accepts(frame, codec.source, text, codec.columns):
            out[schema_id] = text
    return out


def _accepts(frame: DataFrame, source: str, text: str, columns: StructType) -> bool:
    key = (text, columns.json())
    if key not in _accepted:
        ok = avro.plain_record(text, columns)  # what Python hands to Arrow as read (Readers.plain)
        if ok:
            try:
                typed = frame.select(_from_avro(frame[source], text)).schema.fields[0].dataType
            except Exception as exc:  # no spark-avro here: Python decodes
                log.info("Avro decoded in Python: from_avro is not available (%s)", str(exc).splitlines()[0])
                typed = None
            ok = typed is not None and _nullable(typed) == _nullable(columns)
        _accepted[key] = ok
    return _accepted[key]


def _nullable(dtype: DataType) -> DataType:
    """``dtype`` with every field, element and value nullable (spark-avro marks non-union ones not)."""
    from pyspark.sql import types as T

    if isinstance(dtype, T.StructType):
        return T.StructType([T.StructField(f.name, _nullable(f.dataType), True) for f in dtype.fields])
    if isinstance(dtype, T.ArrayType):
        return T.ArrayType(_nullable(dtype.elementType), True)
    if isinstance(dtype, T.MapType):
        return T.MapType(_nullable(dtype.keyType), _nullable(dtype.valueType), True)
    return dtype


def _from_avro(body: Column, text: str) -> Column:
    from pyspark.sql.avro.functions import from_avro

    return from_avro(body, text, _OPTIONS)


def staged(frame: DataFrame, codec: Codec, writers: dict[int | None, str], *, text: bool = True) -> DataFrame:
    """``frame`` with the JVM's decode: its value as :data:`DECODED`, and :data:`OK` where the JVM keeps it.

    ``writers``: :func:`jvm_writers`' for ``codec``. A record the JVM does not keep (``OK`` false)
    is Python's to decode, whatever ``DECODED`` holds. ``text``: whether ``OK`` requires its
    strings to be UTF-8; False where Python reads the value next and checks them itself
    (:func:`not_utf8`: a third of the JVM's checks' cost, in Java, against milliseconds in Arrow).
    """
    from pyspark.sql import functions as F
    from pyspark.sql.avro.functions import to_avro

    source = codec.source
    body = F.expr(f"substring({source}, 6)") if codec.wire else F.col(source)
    checks = F.expr(" AND ".join(_valid(DECODED, codec.columns, 0, top=True, text=text)))
    header, schema_bytes = F.expr(header_sql(source)), F.expr(f"substring({source}, 2, 4)")
    decoded, ok = None, None
    for schema_id, schema in writers.items():
        when = body.isNotNull()
        if schema_id is not None:
            when = header & (schema_bytes == F.lit(schema_id.to_bytes(4, "big")))
        decoded = (F if decoded is None else decoded).when(when, _from_avro(body, schema))
        # to_avro last: it cannot write the all-NULL value of a record that did not decode
        ok = (F if ok is None else ok).when(when & checks, to_avro(F.col(DECODED), schema) == body)
    assert decoded is not None and ok is not None
    out = frame.select("*", decoded.alias(DECODED))
    # A barrier (as decode/plan.py's): without it the checks and the filters after them bring
    # from_avro into each expression that reads the value, evaluated once each.
    out = out.selectExpr("inline(array(struct(*)))")
    return out.withColumn(OK, F.coalesce(ok, F.lit(False)))


def split(
    frame: DataFrame, codec: Codec, writers: dict[int | None, str], *, fields: str, flags: list[Column]
) -> tuple[DataFrame, DataFrame, DataFrame]:
    """(the JVM's pass (:func:`staged`); the records it decoded; the others, as ``frame``).

    The records decoded have ``frame``'s columns, their value as ``fields`` (the codec's columns)
    and ``flags``. Both read the pass: persisted, it runs once (``Decoded.to_persist``).
    """
    from pyspark.sql import functions as F

    out = staged(frame, codec, writers)
    # the decoded value as it is: its fields differ from the codec's columns only where spark-avro
    # says a value cannot be NULL, which the union with Python's outcome takes as is
    good = out.where(OK).select(*frame.columns, F.col(DECODED).alias(fields), *flags)
    left = out.where(f"NOT {OK}").select(*frame.columns)
    return out, good, left


def _valid(expr: str, dtype: DataType, depth: int, *, top: bool = False, text: bool = True) -> list[str]:
    """SQL predicates over ``expr`` that hold where Python reads the value as the JVM did (NULL holds).

    ``text``: whether strings must be UTF-8 (:func:`staged`).
    """
    from pyspark.sql import types as T

    if isinstance(dtype, T.StructType):
        parts = [p for f in dtype.fields for p in _valid(f"{expr}.`{f.name}`", f.dataType, depth, text=text)]
        if top:  # a record that does not decode has every field NULL: leave that to Python
            parts.insert(0, "(" + " OR ".join(f"{expr}.`{f.name}` IS NOT NULL" for f in dtype.fields) + ")")
        return parts
    x = f"_ki_x{depth}"
    if isinstance(dtype, T.ArrayType):
        inner = _valid(x, dtype.elementType, depth + 1, text=text)
        return [f"({expr} IS NULL OR forall({expr}, {x} -> {' AND '.join(inner)}))"] if inner else []
    if isinstance(dtype, T.MapType):
        keys, values = _valid(x, dtype.keyType, depth + 1, text=text), _valid(x, dtype.valueType, depth + 1, text=text)
        out = [f"forall(map_keys({expr}), {x} -> {' AND '.join(keys)})"] if keys else []
        out += [f"forall(map_values({expr}), {x} -> {' AND '.join(values)})"] if values else []
        return [f"({expr} IS NULL OR ({' AND '.join(out)}))"] if out else []
    if isinstance(dtype, T.StringType):  # Java keeps the bytes; fastavro decodes them strictly
        if not text:
            return []
        return [f"({expr} IS NULL OR encode({expr}, 'UTF-8') = CAST({expr} AS BINARY))"]
    # Python's dates and datetimes end in year 9999; to_avro refuses dates before 1582-10-15 and
    # timestamps before 1900 (spark.sql.avro.datetimeRebaseModeInWrite), which Python decodes as well.
    bounds = {
        T.DateType: ("DATE'1582-10-15'", "DATE'9999-12-31'"),
        T.TimestampType: ("TIMESTAMP'1900-01-01 00:00:00+00:00'", "TIMESTAMP'9999-12-31 23:59:59.999999+00:00'"),
        T.TimestampNTZType: ("TIMESTAMP_NTZ'1900-01-01 00:00:00'", "TIMESTAMP_NTZ'9999-12-31 23:59:59.999999'"),
    }
    for kind, (low, high) in bounds.items():
        if isinstance(dtype, kind):
            return [f"({expr} IS NULL OR {expr} BETWEEN {low} AND {high})"]
    return []


# -- Python side (Spark's Python workers) -----------------------------------------------------------
def not_utf8(values: pa.Array) -> np.ndarray[Any, np.dtype[np.bool_]]:
    """Which of ``values`` (the JVM's decoded records, as Arrow) hold a string that is not UTF-8.

    Spark hands Java's bytes to Arrow as they are; a string column's bytes are checked as the Arrow
    decoder checks a payload's (:func:`~kafka_iceberg.decode.arrow.invalid_utf8`: one validation of
    the whole column, then halving among the values with a high byte).
    """
    import numpy as np
    import pyarrow as pa

    n, kind = len(values), values.type
    out = np.zeros(n, dtype=bool)
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        out[invalid_utf8(values.view(pa.large_binary() if pa.types.is_large_string(kind) else pa.binary()))] = True
    elif pa.types.is_struct(kind):
        for child in values.flatten():  # the children of these records only (a slice's)
            out |= not_utf8(child)
    elif pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_map(kind):
        offsets = values.offsets.to_numpy()
        owner = np.repeat(np.arange(n), np.diff(offsets))  # the record each element belongs to
        children = [values.keys, values.items] if pa.types.is_map(kind) else [values.values]
        for child in children:  # not sliced with ``values``: sliced here by its offsets
            out[owner[not_utf8(child.slice(offsets[0], offsets[-1] - offsets[0]))]] = True
    return out
