"""CSV: one record per message, fields mapped left to right onto the configured columns, typed.

Parsing is Spark's ``from_csv`` with every field read as text, then the strict conversions of
:mod:`kafka_iceberg.decode.sql`. Quoting follows RFC 4180 (a quote inside a quoted field is
doubled). An empty unquoted field, or one equal to ``null_value``, is NULL; a quoted empty field
is an empty string.

``from_csv`` pads short records with NULLs and drops extra fields without telling, so a
sentinel field is appended to every message: it must come back exactly in position N+1.
"""

from __future__ import annotations

from kafka_iceberg.decode.plan import Plan, payload_part
from kafka_iceberg.decode.sql import convert, converted_ok, field_error, lit, sql_type, utf8_ok
from kafka_iceberg.decode.tombstone import null_payload
from kafka_iceberg.spec.model import CsvLayout, TableSpec

DIAGNOSE_EXTRA = 64  # how many surplus fields an error message can count exactly


def _sentinel(layout: CsvLayout, nonce: str) -> str:
    return "".join(c for c in nonce if c not in (layout.delimiter, layout.quote))


def _options(layout: CsvLayout, empty: str) -> str:
    options = {
        "sep": layout.delimiter,
        "quote": layout.quote,
        "escape": layout.quote,
        "nullValue": layout.null_value if layout.null_value is not None else "",
        # Spark reads a quoted empty field as "" and then as NULL when nullValue is "" too;
        # a marker keeps it apart so it can become the empty string it is.
        "emptyValue": empty,
        "mode": "PERMISSIVE",
    }
    return "map(" + ", ".join(f"{lit(k)}, {lit(v)}" for k, v in options.items()) + ")"


def _unmark(field: str, empty: str) -> str:
    return f"CASE WHEN {field} = {lit(empty)} THEN '' ELSE {field} END"


def _schema(n: int) -> str:
    return lit(", ".join(f"c{i} STRING" for i in range(n)))


def csv_plan(spec: TableSpec, payload: dict[str, str], order: list[str], required: set[str], nonce: str) -> Plan:
    """Decode the CSV in ``value`` (or ``key`` under mode key) onto ``order``'s columns.

    Args:
        spec: the table spec (csv layout, mode, commit mode, key fields).
        payload: every payload column and its type, in table order.
        order: the payload columns the CSV fields map to, left to right.
        required: columns that must not be NULL (JSON Schema ``required``).
        nonce: the per-call random token.
    """
    layout = spec.source.csv or CsvLayout()
    part, source = payload_part(spec)
    sentinel = _sentinel(layout, nonce)
    n = len(order)
    empty = sentinel + "e"
    options = _options(layout, empty)

    plan = Plan(payload=dict(payload))
    text = plan.add(0, "text", f"CASE WHEN {utf8_ok(source)} THEN CAST({source} AS STRING) END")
    appended = f"concat({text}, {lit(layout.delimiter + sentinel)})"
    parse = f"from_csv({appended}, {_schema(n + 1)}, {options})"
    record = plan.add(1, "rec", f"CASE WHEN octet_length({source}) > 0 THEN {parse} END")
    complete = f"{record}.c{n} = {lit(sentinel)}"
    count_ok = plan.add(2, "count", f"coalesce({complete}, false)")
    texts = {
        name: plan.add(2, "t", f"CASE WHEN {complete} THEN {_unmark(f'{record}.c{i}', empty)} END")
        for i, name in enumerate(order)
    }
    width = n + 1 + DIAGNOSE_EXTRA
    # Counting the fields of a bad record parses it again, for error rows only.
    wide = plan.add_late("wide", f"from_csv({appended}, {_schema(width)}, {options})")
    fields_array = f"array({', '.join(f'{wide}.c{i}' for i in range(width))})"

    null = null_payload(plan, spec, payload, nonce)
    checks = plan.checks
    null.rule(checks, source)
    checks.rule(f"{text} IS NULL", lit(f"invalid UTF-8 in {part}"))
    checks.rule(f"octet_length({source}) = 0", lit(f"empty {part} (0 bytes)"))
    for name, col_type in payload.items():
        if name not in texts:
            plan.fields[name] = null.values.get(name, f"CAST(NULL AS {sql_type(col_type)})")
            continue
        t = texts[name]
        value = plan.add(3, "v", convert(t, col_type))
        ok = plan.add(4, "ok", converted_ok(t, value, col_type))
        plan.fields[name] = null.field(source, name, value)
        checks.problem(f"NOT {ok}", field_error(f"field {name}", t, col_type))
        if name in required:
            checks.problem(f"{t} IS NULL", lit(f"field {name}: required but missing or null"))

    position = f"array_position({fields_array}, {lit(sentinel)})"
    count_problem = (
        f"CASE WHEN {position} > 0 THEN concat({lit(f'expected {n} CSV columns, got ')}, {position} - 1) "
        f"WHEN exists({fields_array}, f -> endswith(f, {lit(sentinel)})) "
        f"THEN {lit(f'unterminated quoted field in CSV {part}')} "
        f"ELSE {lit(f'expected {n} CSV columns, got more than {width - 1}')} END"
    )
    checks.rule(f"NOT {count_ok}", count_problem)
    plan.tombstone = null.tombstone
    return plan
