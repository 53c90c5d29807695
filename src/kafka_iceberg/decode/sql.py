"""SQL text shared by the decoders: literals, UTF-8 and JSON validity, typed conversion of text.

Decoders are written as Spark SQL expressions because ``try_cast`` (the only cast that neither
throws under ANSI mode nor truncates ``'1.5'`` to ``1``) has no Column method in PySpark 3.5.
Every expression here is ANSI-safe: ``try_*`` functions only, never ``cast`` of text, ``[]`` or
``element_at``.

Typed conversion is strict: a present value that does not convert is an error, never NULL. The
message names the field, the expected type and what came (``field id: expected long, got "abc"``).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from kafka_iceberg.spec.types import SPARK_SQL, spark_sql_type

# Spark's JSON reader accepts 'single quotes' and NaN/Infinity tokens by default; neither is JSON.
JSON_OPTIONS_SQL = "map('allowSingleQuotes', 'false', 'allowNonNumericNumbers', 'false')"
MAX_SHOWN = 60


def lit(text: str) -> str:
    """A Spark SQL string literal for ``text`` (backslash escapes are on by default)."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def ident(name: str) -> str:
    """A backquoted Spark SQL identifier."""
    return "`" + name.replace("`", "``") + "`"


def new_nonce() -> str:
    """A random token no producer can have put in a message (see :func:`json_wrap`)."""
    return "ki" + uuid.uuid4().hex


def utf8_ok(binary: str) -> str:
    """True when the bytes are NULL or valid UTF-8.

    Spark 3.5 decodes invalid UTF-8 to U+FFFD without complaint (in ``decode`` and inside
    ``from_json``/``from_csv``); a lossless round trip is the check.
    """
    return f"({binary} IS NULL OR CAST(decode({binary}, 'UTF-8') AS BINARY) = {binary})"


def json_wrap(text: str, sentinel: str) -> str:
    """``[<text>,<sentinel>]``: parsing this proves ``text`` is exactly one JSON document.

    Spark's JSON parser stops at the end of the first document and ignores what follows, so
    ``{"a":1} garbage`` parses. Wrapped in an array with a trailing random sentinel, a parse
    that returns two elements ending with the sentinel can only come from a single complete
    document: trailing content either breaks the array or closes it before the sentinel. The
    sentinel holds a random nonce drawn per decode call, so no message can contain it.
    """
    return f"concat('[', {text}, ',{sentinel}]')"


def object_sentinel(nonce: str) -> str:
    """JSON text of the sentinel object for :func:`json_wrap` with maps."""
    return '{"' + nonce + '":0}'


def string_sentinel(nonce: str) -> str:
    """JSON text of the sentinel string for :func:`json_wrap` with strings."""
    return '"' + nonce + '"'


def parse_object(text: str, nonce: str) -> str:
    """``array<map<string,string>>`` of the wrapped document (see :func:`object_of`)."""
    wrapped = json_wrap(text, object_sentinel(nonce))
    return f"from_json({wrapped}, 'array<map<string,string>>', {JSON_OPTIONS_SQL})"


def object_of(parsed: str, nonce: str) -> str:
    """The top-level object's ``map<string,string>`` when the document was exactly one object.

    Values are the JSON text of each member: strings unquoted, nested objects and arrays as
    compact JSON, numbers and booleans as literals, JSON null as NULL.
    """
    ok = f"(size({parsed}) = 2 AND try_element_at(try_element_at({parsed}, 2), {lit(nonce)}) IS NOT NULL)"
    return f"CASE WHEN coalesce({ok}, false) THEN try_element_at({parsed}, 1) END"


def parse_any(text: str, nonce: str) -> str:
    """``array<string>`` of the wrapped document (see :func:`is_json`, :func:`scalar_of`)."""
    wrapped = json_wrap(text, string_sentinel(nonce))
    return f"from_json({wrapped}, 'array<string>', {JSON_OPTIONS_SQL})"


def is_json(parsed: str, nonce: str) -> str:
    """True when the text behind ``parsed`` (from :func:`parse_any`) is exactly one JSON value."""
    return f"coalesce(size({parsed}) = 2 AND try_element_at({parsed}, 2) = {lit(nonce)}, false)"


def json_problem(text: str, part: str) -> str:
    """Why a text that failed validation is not the JSON expected (evaluated for bad rows only)."""
    first = f"substr(ltrim({text}), 1, 1)"
    after_object = f"from_json({text}, 'map<string,string>', {JSON_OPTIONS_SQL}) IS NOT NULL"
    after_array = f"from_json({text}, 'array<string>', {JSON_OPTIONS_SQL}) IS NOT NULL"
    return (
        f"CASE WHEN ({first} = '{{' AND {after_object}) OR ({first} = '[' AND {after_array}) "
        f"THEN {lit(f'invalid JSON in {part}: unexpected content after the end of the document')} "
        f"ELSE {lit(f'invalid JSON in {part}')} END"
    )


def kind_of_json(text: str) -> str:
    """The kind of a valid JSON value by its first character, for messages."""
    return (
        f"CASE substr(ltrim({text}), 1, 1) WHEN '[' THEN 'an array' WHEN '\"' THEN 'a string' "
        f"WHEN 't' THEN 'a boolean' WHEN 'f' THEN 'a boolean' WHEN 'n' THEN 'null' ELSE 'a number' END"
    )


def shown(text: str) -> str:
    """A value quoted and shortened for an error message."""
    cut = MAX_SHOWN - 3
    return (
        f"concat('\"', CASE WHEN char_length({text}) > {MAX_SHOWN} "
        f"THEN concat(substr({text}, 1, {cut}), '...') ELSE {text} END, '\"')"
    )


def sql_type(col_type: str) -> str:
    """Spark SQL spelling of a column type; a table's type specs cannot declare (``smallint``) as is."""
    return spark_sql_type(col_type) if col_type in SPARK_SQL or col_type.startswith("decimal(") else col_type


def convert(text: str, col_type: str) -> str:
    """The typed value of ``text`` (a column of JSON or CSV text), NULL when it does not convert.

    Strings take any text. Numbers and booleans accept their literal with surrounding spaces;
    booleans only ``true``/``false`` (any case), as Spark's CSV and JSON readers do. Dates are
    ``yyyy-MM-dd``; timestamps need at least a date (Spark alone would read ``10:00`` as today);
    binary is base64.
    """
    t = text
    if col_type == "string":
        return t
    if col_type == "boolean":
        return f"CASE lower(trim({t})) WHEN 'true' THEN true WHEN 'false' THEN false END"
    if col_type == "date":
        return f"CASE WHEN trim({t}) RLIKE '^[0-9]{{4}}-[0-9]{{2}}-[0-9]{{2}}$' THEN try_cast(trim({t}) AS DATE) END"
    if col_type in ("timestamp", "timestamp_ntz"):
        return (
            f"CASE WHEN trim({t}) RLIKE '^[+-]?[0-9]{{4,}}-[0-9]{{2}}-[0-9]{{2}}' "
            f"THEN try_cast({t} AS {sql_type(col_type)}) END"
        )
    if col_type == "binary":
        return f"try_to_binary({t}, 'base64')"
    return f"try_cast({t} AS {sql_type(col_type)})"


def converted_ok(text: str, value: str, col_type: str) -> str:
    """True when ``text`` is NULL or converted to ``value`` without loss."""
    ok = f"{value} IS NOT NULL"
    if col_type in ("double", "float"):
        # Java parses 1e999 (and 1e39 as float) to Infinity instead of failing.
        ok += f" AND (abs({value}) != double('Infinity') OR lower({text}) LIKE '%inf%')"
    elif col_type.startswith("decimal("):
        # try_cast rounds to the scale; refuse any digit it would drop.
        scale = int(col_type[col_type.index(",") + 1 : -1])
        frac = f"regexp_extract(trim({text}), '[.]([0-9]*[1-9])?0*$', 1)"
        exact_exp = f"CAST({value} AS DOUBLE) = try_cast({text} AS DOUBLE)"
        ok += f" AND CASE WHEN {text} RLIKE '[eE]' THEN {exact_exp} ELSE char_length({frac}) <= {scale} END"
    return f"({text} IS NULL OR ({ok}))"


def field_error(label: str, text: str, col_type: str) -> str:
    """``<label>: expected <type>, got "<text>"`` (the caller evaluates it only when conversion failed)."""
    return f"concat({lit(f'{label}: expected {col_type}, got ')}, {shown(text)})"


@dataclass
class Checks:
    """What makes a record an error: record-level rules, then field-level problems.

    Rules are tried in order and the first whose condition holds decides; if none holds, every
    problem whose condition holds is reported, joined with ``; ``. :meth:`fails` is the cheap
    boolean evaluated for every record; :meth:`reason` builds the message and is evaluated for
    error rows only (a large expression on the hot path keeps the JIT from compiling it).
    """

    rules: list[tuple[str, str, str]] = field(default_factory=list)
    problems: list[tuple[str, str]] = field(default_factory=list)

    def rule(self, when: str, reason: str, fails: str = "true") -> None:
        """A record-level rule; ``fails`` says whether a record it matches is an error."""
        self.rules.append((when, reason, fails))

    def problem(self, when: str, reason: str) -> None:
        """A field-level problem."""
        self.problems.append((when, reason))

    def fails(self) -> str:
        """SQL: true when the record is an error."""
        tail = " OR ".join(f"coalesce({when}, false)" for when, _ in self.problems) or "false"
        if not self.rules:
            return tail
        return "CASE " + " ".join(f"WHEN {w} THEN {f}" for w, _, f in self.rules) + f" ELSE {tail} END"

    def reason(self) -> str:
        """SQL: the error message (meaningful where :meth:`fails` holds)."""
        parts = ", ".join(f"CASE WHEN {when} THEN {reason} END" for when, reason in self.problems)
        tail = f"concat_ws('; ', {parts})" if parts else "CAST(NULL AS STRING)"
        if not self.rules:
            return tail
        return "CASE " + " ".join(f"WHEN {w} THEN {r}" for w, r, _ in self.rules) + f" ELSE {tail} END"
