"""What the writer would create or change before a batch is committed: a :class:`TablePlan`.

:func:`build_plan` is pure: it takes the table's current state (gathered by the writer) and a batch
schema and returns the plan, whose :meth:`TablePlan.statements` are the exact Spark SQL that
:meth:`TableWriter.apply` runs. ``kafka-iceberg plan`` prints :meth:`TablePlan.describe` and stops.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from pyspark.sql.types import StructType

from kafka_iceberg.config import IDENTIFIER, IDENTIFIER_EXPECTED
from kafka_iceberg.errors import ConfigError, Problem, SchemaMismatchError
from kafka_iceberg.spec.model import TableSpec
from kafka_iceberg.spec.partitioning import PartitionField, check_against_columns, parse_partition_field
from kafka_iceberg.spec.types import from_spark_type
from kafka_iceberg.write.jvm import transform_name
from kafka_iceberg.write.properties import changed_properties, table_properties
from kafka_iceberg.write.schema import (
    AddColumn,
    MakeOptional,
    WidenType,
    diff_schema,
    dotted,
    merged_columns,
    path_sql,
    quote,
    sql_type,
    writable,
)


@dataclass(frozen=True)
class TableState:
    """What the catalog holds for the target table right now."""

    namespace_exists: bool
    exists: bool
    schema: StructType | None = None
    partition_fields: tuple[tuple[str, str], ...] = ()  # (Iceberg transform name, source column)
    sort_fields: tuple[tuple[str, str], ...] = ()  # (column, ASC|DESC)
    properties: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class TablePlan:
    """A frozen description of what would be created or evolved; :meth:`statements` carries it out.

    ``desired`` is the batch schema the plan was made for (internal ``_ki_*`` columns left out);
    ``partitioned_by`` is the partition spec of a table to create (in its CREATE statement, or added
    right after it as ``add_partition_fields`` when SeaweedFS would refuse it at CREATE).
    """

    table: str
    desired: StructType
    create_namespace: bool = False
    create_table: str | None = None
    add_columns: tuple[AddColumn, ...] = ()
    widen_types: tuple[WidenType, ...] = ()
    make_optional: tuple[MakeOptional, ...] = ()
    add_partition_fields: tuple[str, ...] = ()
    partitioned_by: tuple[str, ...] = ()
    sort_order: str | None = None
    set_properties: Mapping[str, str] = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    @property
    def namespace(self) -> str:
        """``catalog.namespace`` of the table."""
        return self.table.rsplit(".", 1)[0]

    @property
    def changes(self) -> bool:
        """True when :meth:`statements` is not empty."""
        return bool(self.statements())

    def statements(self) -> tuple[str, ...]:
        """The Spark SQL that carries the plan out, in order."""
        t = _qualified(self.table)
        out: list[str] = []
        if self.create_namespace:
            out.append(f"CREATE NAMESPACE IF NOT EXISTS {_qualified(self.namespace)}")
        if self.create_table:
            out.append(self.create_table)
        if self.add_columns:
            cols = ", ".join(f"{path_sql(a.path)} {sql_type(a.data_type)}" for a in self.add_columns)
            out.append(f"ALTER TABLE {t} ADD COLUMNS ({cols})")
        out += [f"ALTER TABLE {t} ALTER COLUMN {path_sql(w.path)} TYPE {sql_type(w.to_type)}" for w in self.widen_types]
        out += [f"ALTER TABLE {t} ALTER COLUMN {path_sql(o.path)} DROP NOT NULL" for o in self.make_optional]
        out += [f"ALTER TABLE {t} ADD PARTITION FIELD {p}" for p in self.add_partition_fields]
        if self.sort_order:
            out.append(f"ALTER TABLE {t} WRITE ORDERED BY {self.sort_order}")
        if self.set_properties and not self.create_table:
            props = ", ".join(f"{_literal(k)}={_literal(v)}" for k, v in sorted(self.set_properties.items()))
            out.append(f"ALTER TABLE {t} SET TBLPROPERTIES ({props})")
        return tuple(out)

    def describe(self) -> str:
        """Human-readable plan, as ``kafka-iceberg plan`` prints it."""
        lines = [f"table {self.table}"]
        if self.create_namespace:
            lines.append(f"  + create namespace {self.namespace}")
        if self.create_table:
            lines.append("  + create table")
            lines += [f"      {f.name} {sql_type(f.dataType)}" for f in self.desired.fields]
        lines += [f"  + add column {dotted(a.path)} {sql_type(a.data_type)} (optional)" for a in self.add_columns]
        lines += [
            f"  ~ widen {dotted(w.path)}: {sql_type(w.from_type)} -> {sql_type(w.to_type)}" for w in self.widen_types
        ]
        lines += [f"  ~ make {dotted(o.path)} optional" for o in self.make_optional]
        if self.create_table:
            lines.append("  + partitioned by " + (", ".join(self.partitioned_by) or "nothing (unpartitioned)"))
        else:
            lines += [f"  + add partition field {p}" for p in self.add_partition_fields]
        if self.sort_order:
            lines.append(f"  + write ordered by {self.sort_order}")
        mark = "+ property" if self.create_table else "~ set"
        lines += [f"  {mark} {k}={v}" for k, v in sorted(self.set_properties.items())]
        if len(lines) == 1:
            lines.append("  = no changes")
        lines += [f"  ! {n}" for n in self.notes]
        return "\n".join(lines)


def _qualified(name: str) -> str:
    return ".".join(quote(p) for p in name.split("."))


def _literal(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def check_identifiers(spec: TableSpec, catalog: str) -> None:
    """Refuse catalog, namespace and table names that are not plain identifiers.

    The spec validates these already; this keeps a hand-built or ``model_construct``-ed spec from
    slipping a ``-`` (refused by S3 Tables and OSS Tables) past the writer.

    Raises:
        ConfigError: one problem per bad name.
    """
    problems = [
        Problem(spec.declared_in, key, value, IDENTIFIER_EXPECTED, "INVALID_IDENTIFIER")
        for key, value in (("catalog", catalog), ("namespace", spec.namespace), ("name", spec.name))
        if not IDENTIFIER.match(value)
    ]
    if problems:
        raise ConfigError(problems)


def _column_types(schema: StructType) -> dict[str, str]:
    out = {}
    for f in schema.fields:
        name = from_spark_type(f.dataType.simpleString())
        out[f.name] = "int" if name in ("tinyint", "smallint") else name
    return out


def partition_fields(spec: TableSpec, columns: StructType) -> list[PartitionField]:
    """The declared partition fields, each checked against the table's columns.

    Raises:
        ConfigError: an entry does not parse or does not fit its column; never silently unpartitioned.
    """
    types = _column_types(columns)
    problems, out = [], []
    for j, entry in enumerate(spec.partitioning):
        try:
            pf = parse_partition_field(entry)
        except ValueError as exc:
            problems.append(Problem(spec.declared_in, f"partitioning[{j}]", entry, str(exc), "BAD_PARTITION"))
            continue
        why = check_against_columns(pf, types)
        if why:
            problems.append(Problem(spec.declared_in, f"partitioning[{j}]", entry, why, "BAD_PARTITION"))
        out.append(pf)
    if problems:
        raise ConfigError(problems)
    return out


def partition_sql(pf: PartitionField) -> str:
    """DDL of one partition field, column quoted (``partition`` and ``timestamp`` are keywords)."""
    if pf.transform == "identity":
        return quote(pf.column)
    if pf.width is not None:
        return f"{pf.transform}({pf.width}, {quote(pf.column)})"
    return f"{pf.transform}({quote(pf.column)})"


def _sort_entries(spec: TableSpec) -> list[tuple[str, str]]:
    out = []
    for entry in spec.write.sort_order:
        parts = entry.split()
        out.append((parts[0], parts[1].upper() if len(parts) > 1 else "ASC"))
    return out


def _check_upsert_columns(spec: TableSpec, columns: StructType) -> None:
    if not spec.upserts:
        return
    names = {f.name.lower() for f in columns.fields}
    problems = [
        Problem(spec.declared_in, f"key_fields[{j}]", key, "a column of the batch", "UNKNOWN_COLUMN")
        for j, key in enumerate(spec.key_fields)
        if key.lower() not in names
    ]
    if not spec.key_fields:
        problems.append(
            Problem(spec.declared_in, "key_fields", [], "at least one key column for upsert", "MISSING_KEY")
        )
    seq = spec.sequence_field or "offset"
    if seq.lower() not in names:
        problems.append(Problem(spec.declared_in, "sequence_field", seq, "a column of the batch", "UNKNOWN_COLUMN"))
    if problems:
        raise ConfigError(problems)


def build_plan(spec: TableSpec, table: str, state: TableState, batch: StructType) -> TablePlan:
    """Plan what makes ``table`` ready for a batch of ``batch``'s schema under ``spec``.

    Raises:
        SchemaMismatchError: the table's ``schema_evolution`` refuses a difference; nothing changes.
        ConfigError: an invalid partition spec, or upsert keys missing from the batch.
    """
    desired = merged_columns(state.schema if state.exists else None, batch)
    fields = partition_fields(spec, desired)
    _check_upsert_columns(spec, desired)
    notes = []
    if spec.commit_mode == "overwrite" and not fields and not state.partition_fields:
        notes.append("commit_mode overwrite on an unpartitioned table replaces the whole table with each batch")
    declared_sort = _sort_entries(spec)
    sort_sql = ", ".join(f"{quote(c)} {d}" for c, d in declared_sort) or None

    if not state.exists:
        cols = writable(batch)
        first = cols.fields[0].name.lower() if cols.fields else None
        # SeaweedFS 4.48 rejects a partition field on the first column at CREATE: add such specs afterwards.
        deferred = any(pf.column.lower() == first for pf in fields)
        columns = ", ".join(f"{quote(f.name)} {sql_type(f.dataType)}" for f in cols.fields)
        ddl = [f"CREATE TABLE {_qualified(table)} ({columns}) USING iceberg"]
        if fields and not deferred:
            ddl.append("PARTITIONED BY (" + ", ".join(partition_sql(pf) for pf in fields) + ")")
        props = table_properties(spec)
        ddl.append("TBLPROPERTIES (" + ", ".join(f"{_literal(k)}={_literal(v)}" for k, v in props.items()) + ")")
        if deferred:
            notes.append("partition fields are added after CREATE (SeaweedFS refuses one on the first column)")
        return TablePlan(
            table=table,
            desired=cols,
            create_namespace=not state.namespace_exists,
            create_table=" ".join(ddl),
            add_partition_fields=tuple(partition_sql(pf) for pf in fields) if deferred else (),
            partitioned_by=tuple(partition_sql(pf) for pf in fields),
            sort_order=sort_sql,
            set_properties=props,
            notes=tuple(notes),
        )

    assert state.schema is not None
    diff = diff_schema(state.schema, batch)
    refusals = diff.refusals(spec.schema_evolution)
    if refusals:
        lines = "\n".join(f"  - {r}" for r in refusals)
        raise SchemaMismatchError(
            f"batch schema does not fit table {table} under schema_evolution: {spec.schema_evolution}:\n{lines}",
            table=table,
            fields=[dotted(r.path) for r in refusals],
        )
    existing = {(t, c.lower()) for t, c in state.partition_fields}
    missing = [pf for pf in fields if (transform_name(pf.transform, pf.width), pf.column.lower()) not in existing]
    declared = {(transform_name(pf.transform, pf.width), pf.column.lower()) for pf in fields}
    extra = [f"{t}({c})" for t, c in state.partition_fields if (t, c.lower()) not in declared]
    if extra:
        notes.append(f"table has partition fields the spec does not declare (kept): {', '.join(extra)}")
    current_sort = [(c.lower(), d) for c, d in state.sort_fields]
    sort_change = sort_sql if declared_sort and current_sort != [(c.lower(), d) for c, d in declared_sort] else None
    return TablePlan(
        table=table,
        desired=writable(batch),
        add_columns=diff.add,
        widen_types=diff.widen,
        make_optional=diff.optional,
        add_partition_fields=tuple(partition_sql(pf) for pf in missing),
        sort_order=sort_change,
        set_properties=changed_properties(table_properties(spec), state.properties),
        notes=tuple(notes),
    )
