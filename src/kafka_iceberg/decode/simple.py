"""Formats with fixed ``key``/``value`` columns: text (UTF-8 strings), binary (bytes), json (documents).

``mode`` picks what is written: ``default`` both, ``value`` the value (key column NULL), ``key``
the key (value column NULL). A null value is a tombstone under upsert when the value is written.
"""

from __future__ import annotations

from kafka_iceberg.decode.plan import KEY, VALUE, Plan, payload_part
from kafka_iceberg.decode.sql import is_json, json_problem, lit, parse_any, utf8_ok
from kafka_iceberg.decode.tombstone import null_payload
from kafka_iceberg.spec.model import TableSpec

NULL_STRING = "CAST(NULL AS STRING)"


def _parts(spec: TableSpec) -> tuple[bool, bool]:
    mode = spec.source.effective_mode
    return mode in ("key", "default"), mode in ("value", "default")


def _tombstone_flag(spec: TableSpec, uses_value: bool) -> str:
    return f"{VALUE} IS NULL" if spec.upserts and uses_value else "false"


def text_plan(spec: TableSpec) -> Plan:
    """``key``/``value`` as UTF-8 strings; invalid UTF-8 is an error, an empty message an empty string."""
    uses_key, uses_value = _parts(spec)
    plan = Plan(payload={"key": "string", "value": "string"})
    for name, column, used in (("key", KEY, uses_key), ("value", VALUE, uses_value)):
        if not used:
            plan.fields[name] = NULL_STRING
            continue
        ok = plan.add(0, f"{name}utf", utf8_ok(column))
        plan.fields[name] = f"CASE WHEN {ok} THEN CAST({column} AS STRING) END"
        plan.checks.problem(f"NOT {ok}", lit(f"invalid UTF-8 in {name}"))
    plan.tombstone = _tombstone_flag(spec, uses_value)
    return plan


def binary_plan(spec: TableSpec) -> Plan:
    """``key``/``value`` as the bytes sent; nothing can fail."""
    uses_key, uses_value = _parts(spec)
    plan = Plan(payload={"key": "binary", "value": "binary"})
    plan.fields["key"] = KEY if uses_key else "CAST(NULL AS BINARY)"
    plan.fields["value"] = VALUE if uses_value else "CAST(NULL AS BINARY)"
    plan.tombstone = _tombstone_flag(spec, uses_value)
    return plan


def json_plan(spec: TableSpec, nonce: str) -> Plan:
    """The document as sent in ``value`` (or ``key`` under mode key), checked to be exactly one JSON value."""
    part, source = payload_part(spec)
    plan = Plan(payload={"key": "string", "value": "string"})
    text = plan.add(0, "text", f"CASE WHEN {utf8_ok(source)} THEN CAST({source} AS STRING) END")
    parsed = plan.add(1, "any", f"CASE WHEN octet_length({source}) > 0 THEN {parse_any(text, nonce)} END")
    valid = plan.add(2, "valid", is_json(parsed, nonce))
    document = f"CASE WHEN {valid} THEN {text} END"

    if part == "key":  # a null key is a NULL key column, as for every format
        plan.checks.rule(f"{source} IS NULL", NULL_STRING, "false")
        plan.fields = {"key": document, "value": NULL_STRING}
    else:
        null = null_payload(plan, spec, plan.payload, nonce)
        null.rule(plan.checks, source)
        key_on_tombstone = null.values.get("key", NULL_STRING)
        plan.fields = {"key": f"CASE WHEN {VALUE} IS NULL THEN {key_on_tombstone} END", "value": document}
        plan.tombstone = null.tombstone
    plan.checks.rule(f"{text} IS NULL", lit(f"invalid UTF-8 in {part}"))
    plan.checks.rule(f"octet_length({source}) = 0", lit(f"empty {part} (0 bytes)"))
    plan.checks.rule(f"NOT {valid}", json_problem(text, part))
    return plan
