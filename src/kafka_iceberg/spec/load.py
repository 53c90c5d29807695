"""Pipeline files in three steps: find, read (the only step touching the file), parse (pure).

:func:`parse_pipeline` turns a dict into a :class:`~kafka_iceberg.spec.model.Pipeline` and reports
every problem of the file at once: pydantic's per-key errors plus the checks that span several
keys (upsert without ``key_fields``, ``mode: default`` with csv, a partition transform on a
column that does not exist, ...).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kafka_iceberg.config import parse_model, read_yaml
from kafka_iceberg.errors import MISSING, ConfigError, Problem
from kafka_iceberg.locate import make_importable
from kafka_iceberg.spec.columns import FIXED_COLUMNS, payload_columns, table_columns
from kafka_iceberg.spec.model import SCHEMA_FORMATS, Pipeline, SourceLocation, TableSpec
from kafka_iceberg.spec.partitioning import check_against_columns

PIPELINES_DIR = "pipelines"


def find_pipeline_files(path: Path) -> list[Path]:
    """A pipeline file itself, or every ``*.yml`` in a directory (or in its ``pipelines/``)."""
    if path.is_file():
        return [path]
    if path.is_dir():
        directory = path / PIPELINES_DIR if (path / PIPELINES_DIR).is_dir() else path
        return sorted([*directory.glob("*.yml"), *directory.glob("*.yaml")])
    raise ConfigError.one(str(path), "--pipeline", str(path), "an existing pipeline file or directory", "NO_SUCH_FILE")


def read_pipeline_file(path: Path) -> Any:
    """Read the YAML of one pipeline file."""
    return read_yaml(path)


def parse_pipeline(data: Any, *, file: str, base_dir: Path | None = None) -> Pipeline:
    """Pure step: dict → Pipeline, validating every table and reporting all problems together.

    Raises:
        ConfigError: one Problem per mistake, each naming file, key path, value and what is allowed.
    """
    if not isinstance(data, Mapping):
        raise ConfigError.one(file, "", data, "a mapping with keys pipeline and tables", "WRONG_TYPE")
    problems: list[Problem] = []
    raw_tables = data.get("tables", [])
    head = {k: v for k, v in data.items() if k != "tables"}
    pipeline: Pipeline | None = None
    try:
        pipeline = parse_model(Pipeline, {**head, "source_file": file}, file=file)
    except ConfigError as exc:
        problems.extend(exc.problems)
    tables: list[TableSpec] = []
    if not isinstance(raw_tables, list):
        problems.append(Problem(file, "tables", raw_tables, "a list of table specs", "WRONG_TYPE"))
        raw_tables = []
    elif not raw_tables and not data.get("definitions"):
        problems.append(
            Problem(
                file,
                "tables",
                data.get("tables", MISSING),
                "a non-empty list of table specs (or definitions: Python files declaring tables)",
                "MISSING_KEY",
            )
        )
    for i, raw in enumerate(raw_tables):
        try:
            table = parse_model(TableSpec, raw, file=file, prefix=("tables", i))
        except ConfigError as exc:
            problems.extend(exc.problems)
            problems.extend(_problems_beside(exc, raw, file=file, index=i, base_dir=base_dir))
            continue
        if table.defined_at is None:
            table = table.model_copy(update={"defined_at": SourceLocation(file=file)})
        tables.append(table)
        problems.extend(table_problems(table, file=file, key=f"tables[{i}]", base_dir=base_dir))
    problems.extend(_duplicate_problems(tables, file))
    if problems or pipeline is None:
        raise ConfigError(problems)
    return pipeline.model_copy(update={"tables": tables})


def _problems_beside(exc: ConfigError, raw: Any, *, file: str, index: int, base_dir: Path | None) -> list[Problem]:
    """Cross-key problems of a table that also has per-key problems.

    The keys already reported are dropped (falling back to their defaults) and the rest is
    checked, so one run reports every mistake instead of one layer per run.
    """
    if not isinstance(raw, Mapping):
        return []
    prefix = f"tables[{index}]."
    reported = [p.key_path.removeprefix(prefix) for p in exc.problems if p.key_path.startswith(prefix)]
    pruned = _without(raw, reported)
    try:
        table = TableSpec.model_validate(pruned)
    except ValueError:
        return []
    found = table_problems(table, file=file, key=f"tables[{index}]", base_dir=base_dir)
    # Defaults standing in for the dropped keys may trip cross-key checks of their own: keep only the others.
    return [
        p for p in found if not any(p.key_path.startswith(prefix + r.split("[")[0].split(".")[0]) for r in reported)
    ]


def _without(data: Mapping[str, Any], dotted_paths: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {k: (dict(v) if isinstance(v, Mapping) else v) for k, v in data.items()}
    for path in dotted_paths:
        parts = path.split("[")[0].split(".")
        node: Any = out
        for part in parts[:-1]:
            node = node.get(part) if isinstance(node, dict) else None
            if node is None:
                break
        if isinstance(node, dict):
            node.pop(parts[-1], None)
    return out


def _duplicate_problems(tables: list[TableSpec], file: str) -> list[Problem]:
    seen: dict[tuple[str | None, str], int] = {}
    out = []
    for i, t in enumerate(tables):
        key = (t.catalog, t.identifier)
        if key in seen:
            out.append(
                Problem(
                    file,
                    f"tables[{i}].name",
                    t.name,
                    f"a table not already declared (tables[{seen[key]}])",
                    "DUPLICATE_TABLE",
                )
            )
        seen.setdefault(key, i)
    return out


def arrow_decoder_unsupported(table: TableSpec) -> str | None:
    """Why ``source.decoder: arrow`` cannot decode this table (None: it can)."""
    if table.source.format == "flatten" and table.schema_evolution != "strict":
        return (
            "spark or auto (flatten with schema_evolution add_columns or full finds new columns "
            "with Spark's parser first; the arrow decoder needs schema_evolution strict)"
        )
    return None


def arrow_writer_unsupported(table: TableSpec) -> str | None:
    """Why ``write.engine: arrow`` cannot write this table (None: it can)."""
    if table.commit_mode == "upsert":
        return "spark or auto (the arrow writer appends or replaces partitions; commit_mode upsert needs Spark's MERGE)"
    if table.write.sort_order:
        return "spark or auto (the arrow writer does not sort; write.sort_order needs Spark's writer)"
    by_column: dict[str, list[str]] = {}
    for field, text in zip(table.partition_fields, table.partitioning, strict=True):
        by_column.setdefault(field.column.lower(), []).append(text)
    for column, same in by_column.items():
        if len(same) > 1:
            return (
                f"spark or auto (the arrow writer's pyiceberg takes one partition field per column; "
                f"{column} has {len(same)}: {', '.join(same)})"
            )
    return None


def table_problems(table: TableSpec, *, file: str, key: str, base_dir: Path | None) -> list[Problem]:
    """Checks spanning several keys of one table spec."""
    out: list[Problem] = []

    def add(path: str, value: Any, expected: str, code: str = "IMPOSSIBLE_COMBINATION") -> None:
        out.append(Problem(file, f"{key}.{path}", value, expected, code))

    src, fmt = table.source, table.source.format
    if src.decoder == "arrow" and (why := arrow_decoder_unsupported(table)) is not None:
        add("source.decoder", "arrow", why)
    if table.write.engine == "arrow" and (why := arrow_writer_unsupported(table)) is not None:
        add("write.engine", "arrow", why)
    if src.mode == "default" and fmt not in ("text", "binary"):
        add(
            "source.mode",
            src.mode,
            f"key or value (mode default writes key and value, which only text and binary do; format is {fmt})",
        )
    if src.csv is not None and fmt != "csv":
        add("source.csv", "csv layout", f"no csv layout unless source.format is csv (format is {fmt})")
    if table.schema_ is not None and fmt in ("text", "json", "binary"):
        add("schema", "schema", f"no schema for format {fmt}: its columns are fixed (key, value)")
    if fmt == "csv" and table.schema_ is None:
        add("schema", None, "schema.columns (or json_schema) naming the CSV columns and their types", "MISSING_KEY")
    if fmt == "flatten" and table.schema_ is None and table.schema_evolution == "strict":
        add(
            "schema_evolution",
            "strict",
            "add_columns or full, or a declared schema (strict needs columns to compare against)",
        )
    # A registry format without source.schema_registry reads the environment's (project.registry_problems).
    if fmt not in SCHEMA_FORMATS and src.schema_registry is not None:
        add("source.schema_registry", "schema_registry", f"format avro, protobuf or json_schema (format is {fmt})")
    if src.avro is not None and fmt != "avro":
        add("source.avro", "avro", f"no avro settings unless source.format is avro (format is {fmt})")
    if src.avro is not None and src.schema_registry is not None:
        add("source.avro", "avro", "either source.avro.schema_file (plain Avro) or source.schema_registry, not both")
    if fmt in SCHEMA_FORMATS and table.schema_ is not None:
        add("schema", "schema", f"no schema for format {fmt}: its columns come from the message schema")
    if src.envelope == "debezium":
        if fmt not in ("json", "avro"):
            add("source.envelope", "debezium", f"format json or avro for a Debezium envelope (format is {fmt})")
        if not table.upserts:
            add(
                "commit_mode",
                table.commit_mode,
                "upsert for source.envelope debezium (changes become upserts and deletes)",
            )
        if src.effective_mode != "value":
            add("source.mode", src.mode, "value for source.envelope debezium (the change event is the value)")
    if table.upserts and not table.key_fields:
        add("key_fields", [], "a non-empty list of columns when commit_mode is upsert", "MISSING_KEY")
    if table.errors.quarantine_table == table.identifier:
        add("errors.quarantine_table", table.errors.quarantine_table, "a table other than the target itself")
    if src.topics and table.errors.error_topic in src.topics:
        add("errors.error_topic", table.errors.error_topic, "a topic the table does not read (it would loop)")
    for name, exp in table.expectations.items():
        if exp.on_violation == "quarantine" and not table.errors.quarantine_table:
            add(
                f"expectations.{name}.on_violation",
                "quarantine",
                "errors.quarantine_table to be set for on_violation quarantine",
            )

    try:
        payload = payload_columns(table, base_dir)
    except (OSError, ValueError) as exc:
        add(
            "schema.json_schema",
            table.schema_.json_schema if table.schema_ else None,
            f"a readable JSON Schema of an object ({exc})",
            "BAD_JSON_SCHEMA",
        )
        return out
    if payload is None:
        return out
    for name in payload:
        if name in FIXED_COLUMNS and fmt in ("csv", "flatten"):
            add(
                f"schema.columns.{name}",
                name,
                f"a column name other than {', '.join(FIXED_COLUMNS)} (set by kafka-iceberg)",
                "RESERVED_COLUMN",
            )
    if src.csv and src.csv.columns:
        for j, col in enumerate(src.csv.columns):
            if col not in payload:
                add(
                    f"source.csv.columns[{j}]",
                    col,
                    f"one of the schema columns ({', '.join(payload)})",
                    "UNKNOWN_COLUMN",
                )
    columns = table_columns(table, payload)
    for j, col in enumerate(table.key_fields):
        if col not in columns:
            add(f"key_fields[{j}]", col, f"one of the table's columns ({', '.join(columns)})", "UNKNOWN_COLUMN")
    if table.sequence_field and table.sequence_field not in columns:
        add(
            "sequence_field",
            table.sequence_field,
            f"one of the table's columns ({', '.join(columns)})",
            "UNKNOWN_COLUMN",
        )
    for j, pf in enumerate(table.partition_fields):
        why = check_against_columns(pf, columns)
        if why:
            add(f"partitioning[{j}]", table.partitioning[j], why, "BAD_PARTITION")
    for j, entry in enumerate(table.write.sort_order):
        col = entry.split()[0] if entry.split() else entry
        if col not in columns:
            add(
                f"write.sort_order[{j}]",
                entry,
                f"'<column> [ASC|DESC]' with a column of the table ({', '.join(columns)})",
                "UNKNOWN_COLUMN",
            )
    if table.transform and ":" in table.transform and not table.transform.split(":")[0].endswith(".py"):
        module = table.transform.split(":")[0]
        if importlib.util.find_spec(module.split(".")[0]) is None:
            add("transform", table.transform, "module:function of an importable module", "UNKNOWN_TRANSFORM")
    return out


def load_pipeline(path: Path) -> Pipeline:
    """Find, read and parse one pipeline file, then register tables from its ``definitions``.

    The project roots (the current directory's, then the pipeline's) are put on ``sys.path`` first,
    so ``transform:`` and ``definitions`` modules import from the project without PYTHONPATH.

    Raises:
        ConfigError: the file or any table in it (YAML or Python) is invalid.
    """
    from kafka_iceberg.spec.api import load_definitions

    # The one place modules named by `transform:` and `definitions` become importable from the project.
    make_importable(path)
    data = read_pipeline_file(path)
    pipeline = parse_pipeline(data, file=str(path), base_dir=path.parent)
    if not pipeline.definitions:
        return pipeline
    extra = load_definitions(pipeline, base_dir=path.parent)
    problems: list[Problem] = []
    for table in extra:
        where = table.defined_at.file if table.defined_at else str(path)
        problems.extend(table_problems(table, file=where, key=f"table {table.identifier}", base_dir=path.parent))
    tables = [*pipeline.tables, *extra]
    problems.extend(_duplicate_problems(tables, str(path)))
    if problems:
        raise ConfigError(problems)
    return pipeline.model_copy(update={"tables": tables})


def load_pipelines(path: Path) -> list[Pipeline]:
    """Load every pipeline file at ``path``, reporting the problems of all files together."""
    pipelines, errors = [], []
    for file in find_pipeline_files(path):
        try:
            pipelines.append(load_pipeline(file))
        except ConfigError as exc:
            errors.append(exc)
    if errors:
        raise ConfigError.merge(errors)
    return pipelines
