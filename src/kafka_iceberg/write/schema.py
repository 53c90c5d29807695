"""Batch schema against table schema: what differs, what each evolution mode allows, and alignment.

Pure functions over pyspark ``StructType`` (no JVM), except :func:`align`, which builds column
expressions. Paths name nested fields the way Spark's ``ALTER TABLE`` does: ``a.b``, ``arr.element.x``,
``m.value.x``. Internal columns (``_ki_*``) are never compared or written.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from pyspark.sql.types import (
    ArrayType,
    ByteType,
    DataType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    NullType,
    ShortType,
    StructField,
    StructType,
)

from kafka_iceberg.records import INTERNAL_PREFIX

if TYPE_CHECKING:
    from pyspark.sql import Column

Mode = Literal["strict", "add_columns", "full"]
Path = tuple[str, ...]

_INTEGRAL_RANK: dict[type[DataType], int] = {ByteType: 0, ShortType: 1, IntegerType: 2, LongType: 3}


def quote(name: str) -> str:
    """A backticked Spark SQL identifier."""
    return "`" + name.replace("`", "``") + "`"


def path_sql(path: Path) -> str:
    """``("a", "b")`` → the backticked, dotted path Spark's ALTER TABLE takes."""
    return ".".join(quote(p) for p in path)


def dotted(path: Path) -> str:
    """``("a", "b")`` → ``a.b`` (for messages)."""
    return ".".join(path)


def sql_type(dt: DataType) -> str:
    """Spark DDL spelling of a type, nested fields quoted, everything nullable."""
    if isinstance(dt, StructType):
        return "STRUCT<" + ", ".join(f"{quote(f.name)}: {sql_type(f.dataType)}" for f in dt.fields) + ">"
    if isinstance(dt, ArrayType):
        return f"ARRAY<{sql_type(dt.elementType)}>"
    if isinstance(dt, MapType):
        return f"MAP<{sql_type(dt.keyType)}, {sql_type(dt.valueType)}>"
    if isinstance(dt, DecimalType):
        return f"DECIMAL({dt.precision},{dt.scale})"
    if isinstance(dt, (ByteType, ShortType)):
        return "INT"  # Iceberg has no narrower integers
    return dt.simpleString().upper()


def writable(schema: StructType) -> StructType:
    """``schema`` without internal ``_ki_*`` columns and without all-NULL (NullType) columns."""
    return StructType(
        [f for f in schema.fields if not f.name.startswith(INTERNAL_PREFIX) and not isinstance(f.dataType, NullType)]
    )


@dataclass(frozen=True)
class AddColumn:
    """A batch field the table lacks: added as an optional column."""

    path: Path
    data_type: DataType

    def __str__(self) -> str:
        return f"add column {dotted(self.path)} {sql_type(self.data_type)}"


@dataclass(frozen=True)
class WidenType:
    """A table column whose type must widen to hold the batch's values (int→long, float→double, decimal)."""

    path: Path
    from_type: DataType
    to_type: DataType

    def __str__(self) -> str:
        return f"widen {dotted(self.path)}: {sql_type(self.from_type)} -> {sql_type(self.to_type)}"


@dataclass(frozen=True)
class MakeOptional:
    """A required table column the batch may leave NULL (or lacks)."""

    path: Path

    def __str__(self) -> str:
        return f"make {dotted(self.path)} optional"


@dataclass(frozen=True)
class Incompatible:
    """A difference no evolution mode can apply (string into long, timestamp into date, ...)."""

    path: Path
    reason: str

    def __str__(self) -> str:
        return f"{dotted(self.path)}: {self.reason}"


@dataclass(frozen=True)
class SchemaDiff:
    """Everything that differs between a table's schema and a batch's."""

    add: tuple[AddColumn, ...] = ()
    widen: tuple[WidenType, ...] = ()
    optional: tuple[MakeOptional, ...] = ()
    incompatible: tuple[Incompatible, ...] = ()

    @property
    def empty(self) -> bool:
        """True when the table can take the batch as it is."""
        return not (self.add or self.widen or self.optional or self.incompatible)

    def refusals(self, mode: Mode) -> list[Incompatible]:
        """Every difference ``mode`` does not allow, with the reason (empty when the diff can be applied)."""
        out = list(self.incompatible)
        need = "schema_evolution: full"
        if mode != "full":
            out += [
                Incompatible(w.path, f"table has {sql_type(w.from_type)}, batch has {sql_type(w.to_type)} ({need})")
                for w in self.widen
            ]
            out += [
                Incompatible(o.path, f"table column is required, batch may leave it NULL (relaxing needs {need})")
                for o in self.optional
            ]
        if mode == "strict":
            out += [
                Incompatible(a.path, "not in the table (adding columns needs schema_evolution: add_columns or full)")
                for a in self.add
            ]
        return out


def diff_schema(table: StructType, batch: StructType) -> SchemaDiff:
    """Compare a batch's schema with the table's.

    Names match case-insensitively (Spark's default). A batch type that fits the table's without a
    change (int into long, float into double, a narrower decimal) is no difference: it is cast on write.
    """
    acc = _Acc()
    _diff_struct(table, writable(batch), (), acc)
    return SchemaDiff(tuple(acc.add), tuple(acc.widen), tuple(acc.optional), tuple(acc.incompatible))


class _Acc:
    def __init__(self) -> None:
        self.add: list[AddColumn] = []
        self.widen: list[WidenType] = []
        self.optional: list[MakeOptional] = []
        self.incompatible: list[Incompatible] = []


def _diff_struct(table: StructType, batch: StructType, prefix: Path, acc: _Acc) -> None:
    by_name = {f.name.lower(): f for f in table.fields}
    seen: set[str] = set()
    for bf in batch.fields:
        if isinstance(bf.dataType, NullType):
            continue
        tf = by_name.get(bf.name.lower())
        if tf is None:
            acc.add.append(AddColumn((*prefix, bf.name), bf.dataType))
            continue
        seen.add(tf.name.lower())
        path = (*prefix, tf.name)
        _diff_type(tf.dataType, bf.dataType, path, acc)
        if bf.nullable and not tf.nullable:
            acc.optional.append(MakeOptional(path))
    for tf in table.fields:
        if tf.name.lower() not in seen and not tf.nullable:
            acc.optional.append(MakeOptional((*prefix, tf.name)))  # the batch leaves it NULL


def _diff_type(t: DataType, b: DataType, path: Path, acc: _Acc) -> None:
    if isinstance(t, StructType) and isinstance(b, StructType):
        _diff_struct(t, b, path, acc)
    elif isinstance(t, ArrayType) and isinstance(b, ArrayType):
        _diff_type(t.elementType, b.elementType, (*path, "element"), acc)
        if b.containsNull and not t.containsNull:
            acc.optional.append(MakeOptional((*path, "element")))
    elif isinstance(t, MapType) and isinstance(b, MapType):
        if type(t.keyType) is not type(b.keyType) or t.keyType != b.keyType:
            keys = f"map keys are {sql_type(t.keyType)} in the table, {sql_type(b.keyType)} in the batch"
            acc.incompatible.append(Incompatible(path, keys))
        _diff_type(t.valueType, b.valueType, (*path, "value"), acc)
        if b.valueContainsNull and not t.valueContainsNull:
            acc.optional.append(MakeOptional((*path, "value")))
    elif fits(b, t):
        return
    elif widens(t, b):
        acc.widen.append(WidenType(path, t, b))
    else:
        acc.incompatible.append(
            Incompatible(path, f"table has {sql_type(t)}, batch has {sql_type(b)} (no evolution mode converts these)")
        )


def fits(batch: DataType, table: DataType) -> bool:
    """Whether a batch value of type ``batch`` is written into a ``table`` column as it is (safe cast)."""
    if batch == table:
        return True
    bi, ti = _INTEGRAL_RANK.get(type(batch)), _INTEGRAL_RANK.get(type(table))
    if bi is not None and ti is not None:
        return bi <= ti
    if isinstance(batch, FloatType) and isinstance(table, DoubleType):
        return True
    if isinstance(batch, DecimalType) and isinstance(table, DecimalType):
        return batch.scale == table.scale and batch.precision <= table.precision
    return False


def widens(table: DataType, batch: DataType) -> bool:
    """Whether Iceberg can promote the table's type to the batch's: int→long, float→double, decimal precision."""
    if isinstance(table, (ByteType, ShortType, IntegerType)) and isinstance(batch, LongType):
        return True
    if isinstance(table, FloatType) and isinstance(batch, DoubleType):
        return True
    if isinstance(table, DecimalType) and isinstance(batch, DecimalType):
        return table.scale == batch.scale and batch.precision > table.precision
    return False


def merged_columns(table: StructType | None, batch: StructType) -> StructType:
    """The top-level columns after evolution: the table's, then the batch's new ones."""
    if table is None:
        return writable(batch)
    names = {f.name.lower() for f in table.fields}
    extra = [f for f in writable(batch).fields if f.name.lower() not in names]
    return StructType([*table.fields, *extra])


# -- alignment -----------------------------------------------------------------------------------
def align(columns: dict[str, Column], batch: StructType, table: StructType) -> list[Column]:
    """Expressions producing the table's columns, in table order, from a batch's columns.

    Missing columns (and missing nested struct fields) become typed NULLs; narrower types are cast.

    Args:
        columns: batch column name → column expression.
        batch: the batch's schema.
        table: the table's schema (after evolution).
    """
    from pyspark.sql import functions as F

    by_name = {f.name.lower(): f for f in batch.fields}
    out = []
    for tf in table.fields:
        bf = by_name.get(tf.name.lower())
        if bf is None or isinstance(bf.dataType, NullType):
            out.append(F.lit(None).cast(tf.dataType).alias(tf.name))
        else:
            out.append(_align_value(columns[bf.name], bf.dataType, tf.dataType).alias(tf.name))
    return out


def _align_value(value: Column, src: DataType, dst: DataType) -> Column:
    from pyspark.sql import functions as F

    if isinstance(src, StructType) and isinstance(dst, StructType):
        if src == dst:
            return value
        by_name = {f.name.lower(): f for f in src.fields}
        fields = []
        for df in dst.fields:
            sf: StructField | None = by_name.get(df.name.lower())
            if sf is None or isinstance(sf.dataType, NullType):
                fields.append(F.lit(None).cast(df.dataType).alias(df.name))
            else:
                fields.append(_align_value(value.getField(sf.name), sf.dataType, df.dataType).alias(df.name))
        return F.when(value.isNull(), F.lit(None).cast(dst)).otherwise(F.struct(*fields))
    if src == dst:
        return value
    return value.cast(dst)
