"""Flatten: a JSON object per message, top-level keys matched to columns by name.

Each document is parsed once into ``map<string,string>`` (member name → its JSON text: strings
unquoted, nested objects and arrays as compact JSON, JSON null as NULL) and every column is
converted from its text with the strict conversions of :mod:`kafka_iceberg.decode.sql`. So a
JSON string holding a literal of the column's type is accepted (``"123"`` for a long column) and
anything else that does not convert is an error. Duplicate keys in one object are an error.

Keys without a column are an error under ``schema_evolution: strict``; otherwise they were
turned into new columns by :mod:`kafka_iceberg.decode.discover` before this plan is built, and
only keys that cannot be columns (reserved or invalid names) remain errors.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from kafka_iceberg.decode.plan import Plan, payload_part
from kafka_iceberg.decode.sql import (
    convert,
    converted_ok,
    field_error,
    is_json,
    json_problem,
    kind_of_json,
    lit,
    object_of,
    parse_any,
    parse_object,
    utf8_ok,
)
from kafka_iceberg.decode.tombstone import null_payload
from kafka_iceberg.spec.model import TableSpec


@dataclass(frozen=True)
class Parsed:
    """Quoted names of the helper columns holding the parse of each document."""

    source: str  # the payload bytes (value, or key under mode key)
    part: str  # "value" or "key", for messages
    text: str  # the bytes as a string, NULL when not UTF-8
    obj: str  # map<string,string> of the object, NULL when not exactly one JSON object


def parse_stages(plan: Plan, spec: TableSpec, nonce: str) -> Parsed:
    """Add the parsing stages (0-2) to ``plan``; discovery and decoding share them."""
    part, source = payload_part(spec)
    text = plan.add(0, "text", f"CASE WHEN {utf8_ok(source)} THEN CAST({source} AS STRING) END")
    doc = plan.add(1, "doc", f"CASE WHEN octet_length({source}) > 0 THEN {parse_object(text, nonce)} END")
    obj = plan.add(2, "obj", object_of(doc, nonce))
    return Parsed(source, part, text, obj)


def names_array(names: list[str]) -> str:
    """SQL ``array<string>`` literal of column names."""
    return f"array({', '.join(lit(n) for n in names)})" if names else "CAST(array() AS array<string>)"


def flatten_plan(
    spec: TableSpec,
    payload: dict[str, str],
    required: set[str],
    nonce: str,
    *,
    rejected: Mapping[str, str],
) -> Plan:
    """Decode JSON objects onto ``payload``'s columns.

    Args:
        spec: the table spec (mode, schema evolution, commit mode, key fields).
        payload: every payload column and its type, in table order (new columns included).
        required: columns that must not be NULL (JSON Schema ``required``).
        nonce: the per-call random token.
        rejected: keys found in the batch that cannot become columns, with the reason.
    """
    plan = Plan(payload=dict(payload))
    p = parse_stages(plan, spec, nonce)
    columns = names_array(list(payload))
    keys = plan.add(3, "keys", f"map_keys({p.obj})")
    texts = {name: plan.add(3, "t", f"try_element_at({p.obj}, {lit(name)})") for name in payload}
    # Hot path, for every document: with distinct keys that all are columns, an object has as many
    # keys as columns found. Higher-order functions and JSON parsing (interpreted in Spark 3.5, and
    # forcing row copies) appear only in messages, built for error rows.
    found = " + ".join(f"CAST(map_contains_key({p.obj}, {lit(n)}) AS INT)" for n in payload) or "0"
    odd = plan.add(3, "odd", f"size({p.obj}) != {found}")
    dup = plan.add(4, "dup", f"{odd} AND size({keys}) != size(array_distinct({keys}))")
    if spec.schema_evolution == "strict":
        has_unknown = odd  # once duplicates are ruled out
        unknown = f"filter({keys}, k -> NOT array_contains({columns}, k))"
        unknown_problem = (
            f"concat(CASE WHEN size({unknown}) = 1 THEN 'unknown field ' ELSE 'unknown fields ' END, "
            f"array_join({unknown}, ', '), ' (schema_evolution is strict)')"
        )
    else:
        # Discovery made a column of every key with a value in this batch, except the rejected
        # ones; keys holding only null got none, and nothing of theirs is lost.
        has_unknown = " OR ".join(f"try_element_at({p.obj}, {lit(k)}) IS NOT NULL" for k in rejected) or "false"
        unknown = f"map_keys(map_filter({p.obj}, (k, v) -> v IS NOT NULL AND NOT array_contains({columns}, k)))"
        why = (
            "map(" + ", ".join(f"{lit(k)}, {lit(v)}" for k, v in rejected.items()) + ")"
            if rejected
            else "CAST(map() AS map<string,string>)"
        )
        unknown_problem = (
            f"array_join(transform({unknown}, k -> concat('field ', k, ': ', "
            f"coalesce(try_element_at({why}, k), 'not a column of the table'))), '; ')"
        )

    anydoc = plan.add_late("any", parse_any(p.text, nonce))
    not_object = (
        f"CASE WHEN {is_json(anydoc, nonce)} THEN concat({lit(f'expected a JSON object in {p.part}, got ')}, "
        f"{kind_of_json(p.text)}) ELSE {json_problem(p.text, p.part)} END"
    )
    duplicates = f"array_distinct(filter({keys}, k -> size(filter({keys}, x -> x = k)) > 1))"
    null = null_payload(plan, spec, payload, nonce)
    checks = plan.checks
    null.rule(checks, p.source)
    checks.rule(f"{p.text} IS NULL", lit(f"invalid UTF-8 in {p.part}"))
    checks.rule(f"octet_length({p.source}) = 0", lit(f"empty {p.part} (0 bytes)"))
    checks.rule(f"{p.obj} IS NULL", not_object)
    checks.rule(
        dup, f"concat('duplicate key ', array_join({duplicates}, ', '), {lit(f' in the JSON object in {p.part}')})"
    )
    checks.problem(has_unknown, unknown_problem)
    for name, col_type in payload.items():
        t = texts[name]
        value = plan.add(4, "v", convert(t, col_type))
        ok = plan.add(5, "ok", converted_ok(t, value, col_type))
        plan.fields[name] = null.field(p.source, name, value)
        checks.problem(f"NOT {ok}", field_error(f"field {name}", t, col_type))
        if name in required:
            checks.problem(f"{t} IS NULL", lit(f"field {name}: required but missing or null"))
    plan.tombstone = null.tombstone
    return plan
