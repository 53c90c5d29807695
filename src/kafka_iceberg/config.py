"""Plumbing shared by every configuration file.

The frozen model base, YAML reading, and the translation of pydantic's errors into
:class:`~kafka_iceberg.errors.Problem` entries that name the file, the key path
(``tables[2].partitioning[0]``), the bad value and what is allowed.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from kafka_iceberg.errors import MISSING, ConfigError, Problem

M = TypeVar("M", bound=BaseModel)

IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
IDENTIFIER_EXPECTED = "letters, digits and '_' only, not starting with a digit (S3 Tables and OSS Tables reject '-')"


class Frozen(BaseModel):
    """Base of every configuration model: immutable, unknown keys rejected."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)


def key_path(loc: Iterable[str | int]) -> str:
    """``("tables", 2, "partitioning", 0)`` → ``tables[2].partitioning[0]``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def _lookup(data: Any, loc: Iterable[str | int]) -> Any:
    for part in loc:
        try:
            data = data[part]
        except (KeyError, IndexError, TypeError):
            return MISSING
    return data


_TYPE_NAMES = {
    "string_type": "a string",
    "int_type": "an integer",
    "int_parsing": "an integer",
    "bool_type": "true or false",
    "bool_parsing": "true or false",
    "list_type": "a list",
    "dict_type": "a mapping",
    "model_type": "a mapping",
    "float_type": "a number",
    "float_parsing": "a number",
}


def _expected(err: Mapping[str, Any], allowed_keys: Mapping[tuple[str | int, ...], list[str]]) -> tuple[str, str]:
    kind = err["type"]
    ctx = err.get("ctx") or {}
    if kind == "extra_forbidden":
        parent = tuple(err["loc"][:-1])
        allowed = allowed_keys.get(parent)
        return ("one of: " + ", ".join(allowed) if allowed else "no such key"), "UNKNOWN_KEY"
    if kind == "missing":
        return "a value (this key is required)", "MISSING_KEY"
    if kind == "literal_error":
        return "one of " + str(ctx.get("expected")), "NOT_ALLOWED"
    if kind in _TYPE_NAMES:
        return _TYPE_NAMES[kind], "WRONG_TYPE"
    if kind == "value_error":
        return str(ctx.get("error", err["msg"])), "INVALID_VALUE"
    if kind == "union_tag_invalid":
        return "one of " + str(ctx.get("expected_tags")), "NOT_ALLOWED"  # loc already ends in the tag key
    if kind == "union_tag_not_found":
        return f"a '{ctx.get('discriminator', 'type').strip(chr(39))}' key", "MISSING_KEY"
    if kind.startswith("greater_than") or kind.startswith("less_than"):
        return err["msg"].lower(), "OUT_OF_RANGE"
    return err["msg"], "INVALID_VALUE"


def _allowed_keys(model: type[BaseModel], data: Any) -> dict[tuple[str | int, ...], list[str]]:
    """Map each location in ``data`` that a model validates to that model's allowed keys."""
    found: dict[tuple[str | int, ...], list[str]] = {}

    def walk(mdl: type[BaseModel], value: Any, loc: tuple[str | int, ...]) -> None:
        found[loc] = sorted(f.alias or name for name, f in mdl.model_fields.items() if not f.exclude)
        if not isinstance(value, Mapping):
            return
        for name, field in mdl.model_fields.items():
            key = field.alias or name
            if key not in value:
                continue
            for sub in _submodels(field.annotation):
                child = value[key]
                if isinstance(child, list):
                    for i, item in enumerate(child):
                        walk(sub, item, (*loc, key, i))
                elif isinstance(child, Mapping) and _is_mapping_of_models(field.annotation):
                    for k, item in child.items():
                        walk(sub, item, (*loc, key, k))
                else:
                    walk(sub, child, (*loc, key))

    walk(model, data, ())
    return found


def _submodels(annotation: Any) -> list[type[BaseModel]]:
    out: list[type[BaseModel]] = []
    stack = [annotation]
    while stack:
        ann = stack.pop()
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            out.append(ann)
        stack.extend(getattr(ann, "__args__", ()) or ())
        origin = getattr(ann, "__origin__", None)
        if origin is not None and getattr(origin, "__args__", None):
            stack.extend(origin.__args__)
        meta = getattr(ann, "__metadata__", None)
        if meta:
            stack.append(getattr(ann, "__origin__", None))
    return out


def _is_mapping_of_models(annotation: Any) -> bool:
    origin = getattr(annotation, "__origin__", None)
    return origin in (dict, Mapping) or str(annotation).startswith(("dict[", "typing.Dict"))


def problems_from(
    exc: ValidationError, *, file: str, data: Any, model: type[BaseModel], prefix: tuple[str | int, ...] = ()
) -> list[Problem]:
    """Translate a pydantic ValidationError into Problems anchored in ``file``."""
    allowed = _allowed_keys(model, data)
    problems = []
    seen: set[tuple[str, str]] = set()
    for err in exc.errors(include_url=False):
        loc = tuple(p for p in err["loc"] if not _is_union_member_tag(p))
        if err["type"] == "union_tag_invalid":
            loc = (*loc, str((err.get("ctx") or {}).get("discriminator", "type")).strip("'"))
        value = _lookup(data, loc) if err["type"] != "missing" else MISSING
        expected, code = _expected({**err, "loc": loc}, allowed)
        path = key_path((*prefix, *loc))
        if (path, code) in seen:
            continue
        seen.add((path, code))
        problems.append(Problem(file, path, value, expected, code))
    return problems


def _is_union_member_tag(part: str | int) -> bool:
    # pydantic puts the union member's name into the location ("source.function-after[...]"); drop it.
    return isinstance(part, str) and ("[" in part or part.startswith(("function-", "literal[")))


def parse_model(model: type[M], data: Any, *, file: str, prefix: tuple[str | int, ...] = ()) -> M:
    """Validate ``data`` into ``model`` or raise a ConfigError listing every problem."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(problems_from(exc, file=file, data=data, model=model, prefix=prefix)) from None


class _DuplicateKeyError(yaml.constructor.ConstructorError):
    """A mapping holds the same key twice (PyYAML would silently keep the last one)."""


class _StrictLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses duplicate keys in a mapping."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _value_node in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                duplicate = key in seen
            except TypeError:  # an unhashable key: let PyYAML report it
                continue
            if duplicate:
                raise _DuplicateKeyError(
                    None, None, f"duplicate key {key!r}: each key may appear once per mapping", key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def read_yaml(path: Path) -> Any:
    """Read one YAML file; a syntax error or a duplicate key becomes a ConfigError naming the line."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError.one(str(path), "", MISSING, "a readable file", "UNREADABLE_FILE", hint=str(exc)) from None
    except UnicodeDecodeError as exc:
        raise ConfigError.one(
            str(path), "", MISSING, "a UTF-8 text file", "UNREADABLE_FILE", hint=f"byte {exc.start}: {exc.reason}"
        ) from None
    try:
        return yaml.load(text, Loader=_StrictLoader)  # a SafeLoader subclass
    except _DuplicateKeyError as exc:
        mark = exc.problem_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise ConfigError.one(
            str(path), where, MISSING, "each key once per mapping", "DUPLICATE_KEY", hint=str(exc.problem)
        ) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = str(getattr(exc, "problem", None) or exc)
        line = text.splitlines()[mark.line] if mark and mark.line < len(text.splitlines()) else ""
        if "${" in line and "{" in line.split("${")[0]:
            problem += "; quote ${...} references inside {...} flow mappings"
        raise ConfigError.one(str(path), where, MISSING, "valid YAML", "YAML_SYNTAX", hint=problem) from None
