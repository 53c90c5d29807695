"""Records with no payload: Kafka tombstones (null value) and null keys under ``mode: key``.

Under ``commit_mode: upsert`` a null value deletes a key, so the decoder emits a tombstone row
holding only the key fields, read from the Kafka key: a JSON object holding the key fields, or,
when there is exactly one key field, a scalar (``123``, ``"abc"`` or plain text ``abc``).
Key fields that are Kafka columns (``topic``, ``partition``, ...) or ``pt`` come from the record
itself. For json the Kafka key is the ``key`` column as sent.
"""

from __future__ import annotations

from dataclasses import dataclass

from kafka_iceberg.decode.plan import KEY, VALUE, Plan
from kafka_iceberg.decode.sql import (
    Checks,
    convert,
    converted_ok,
    field_error,
    is_json,
    lit,
    object_of,
    parse_any,
    parse_object,
    utf8_ok,
)
from kafka_iceberg.spec.columns import KAFKA_COLUMNS, PT_COLUMN
from kafka_iceberg.spec.model import TableSpec


@dataclass(frozen=True)
class NullPayload:
    """How a record whose payload bytes are NULL decodes."""

    checks: Checks  # what makes such a record an error (none: a tombstone row)
    values: dict[str, str]  # payload column -> SQL typed value on tombstone rows
    tombstone: str  # SQL: true on tombstone rows

    def field(self, source: str, name: str, value: str) -> str:
        """SQL of a payload column: its tombstone value when ``source`` is NULL, else ``value``."""
        on_tombstone = self.values.get(name)
        return f"CASE WHEN {source} IS NULL THEN {on_tombstone} ELSE {value} END" if on_tombstone else value

    def rule(self, checks: Checks, source: str) -> None:
        """Add the rule deciding records whose ``source`` is NULL to a decoder's checks."""
        checks.rule(f"{source} IS NULL", self.checks.reason(), self.checks.fails())


def _always(reason: str) -> Checks:
    checks = Checks()
    checks.rule("true", lit(reason))
    return checks


def null_payload(plan: Plan, spec: TableSpec, payload: dict[str, str], nonce: str) -> NullPayload:
    """The decoding of records with a NULL payload for json, csv and flatten.

    ``mode: key`` reads the payload from the key: a null key is an error for csv and flatten (json
    writes a NULL key column, handled by its decoder). Otherwise a null value is a tombstone under
    upsert and an error under append and overwrite.
    """
    if spec.source.effective_mode == "key":
        return NullPayload(_always("null key: mode key decodes the message key, which is null"), {}, "false")
    if not spec.upserts:
        return NullPayload(
            _always(f"null value (tombstone) but commit_mode is {spec.commit_mode}, not upsert"), {}, "false"
        )
    checks, values = _key_fields(plan, spec, payload, nonce)
    return NullPayload(checks, values, f"{VALUE} IS NULL")


def _key_fields(plan: Plan, spec: TableSpec, payload: dict[str, str], nonce: str) -> tuple[Checks, dict[str, str]]:
    record_columns = {*KAFKA_COLUMNS, PT_COLUMN}
    from_key = [f for f in spec.key_fields if f not in record_columns]
    raw_key = spec.source.format == "json"
    unreadable = [f for f in from_key if f not in payload or (raw_key and f != "key")]
    if unreadable:
        return _always(f"null value (tombstone) but key field(s) {', '.join(unreadable)} cannot be read from a key"), {}
    checks = Checks()
    if not from_key:
        return checks, {}
    names = ", ".join(from_key)
    text = plan.add(0, "ktext", f"CASE WHEN {VALUE} IS NULL AND {utf8_ok(KEY)} THEN CAST({KEY} AS STRING) END")
    checks.rule(f"{KEY} IS NULL", lit(f"null value (tombstone) with a null key: cannot read key field(s) {names}"))
    checks.rule(f"{text} IS NULL", lit("null value (tombstone) with invalid UTF-8 in key"))
    if raw_key:
        return checks, {"key": text}

    doc = plan.add(1, "kdoc", parse_object(text, nonce))
    obj = plan.add(2, "kobj", object_of(doc, nonce))
    if len(from_key) == 1:
        anydoc = plan.add(1, "kany", parse_any(text, nonce))
        scalar = plan.add(
            2, "kscalar", f"CASE WHEN {is_json(anydoc, nonce)} THEN try_element_at({anydoc}, 1) ELSE {text} END"
        )
        field_of = f"try_element_at({obj}, {lit(from_key[0])})"
        texts = {from_key[0]: plan.add(3, "kt", f"CASE WHEN {obj} IS NOT NULL THEN {field_of} ELSE {scalar} END")}
    else:
        texts = {f: plan.add(3, "kt", f"try_element_at({obj}, {lit(f)})") for f in from_key}
        expected = f"null value (tombstone): expected a JSON object with fields {names} in key, got "
        checks.rule(f"{obj} IS NULL", f"concat({lit(expected)}, substr({text}, 1, 60))")

    values: dict[str, str] = {}
    for name, t in texts.items():
        col_type = payload[name]
        value = plan.add(4, "kv", convert(t, col_type))
        ok = plan.add(5, "kok", converted_ok(t, value, col_type))
        values[name] = value
        checks.problem(f"{t} IS NULL", lit(f"null value (tombstone): key has no field {name}"))
        checks.problem(f"NOT {ok}", field_error(f"tombstone key field {name}", t, col_type))
    return checks, values
