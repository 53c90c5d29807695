"""Expectations evaluated on Arrow data: the part of Spark SQL whose meaning pyarrow reproduces exactly.

The records the Arrow decoder certifies are written by the task that parses them
(``write/certified.py``), so their expectations must be evaluated there too. Spark's own parser
reads each rule on the driver; a rule built only from what is translated below becomes a small
tree of tuples the task evaluates with ``pyarrow.compute``. Any other rule (functions, arithmetic,
casts, timestamps, a decimal compared with an integer column...) returns None, and the table
keeps Spark's path, where Spark evaluates it.

Translated: column references; integer, double, decimal (against a double column), string and
boolean literals; ``= == <> != < <= > >= <=>``; ``AND OR NOT``; ``IS [NOT] NULL``; ``IN`` of
literals; ``BETWEEN`` (Spark parses it into two comparisons). Nulls follow SQL (Kleene logic) and
a rule that is NULL counts as violated, as in Spark's path (``coalesce(rule, false)``).
Certified doubles are finite and never ``-0`` (``decode/arrow.py``), so IEEE comparison is SQL's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import SparkSession

Rule = tuple[Any, ...]  # ("col", name) | ("lit", value) | (operator, operand...)

_COMPARISONS = {
    "EqualTo": "equal",
    "LessThan": "less",
    "LessThanOrEqual": "less_equal",
    "GreaterThan": "greater",
    "GreaterThanOrEqual": "greater_equal",
}
_INTEGER = frozenset({"int", "bigint", "smallint", "tinyint"})
# Families whose comparisons mean the same in Spark and in pyarrow: Spark widens an integer compared
# with a double to double, and so does pyarrow. Decimals are exact in Spark: only a double column
# may meet one (Spark compares as double then).
_FAMILY = {"int": "number", "bigint": "number", "smallint": "number", "tinyint": "number", "double": "number"}
_FAMILY |= {"string": "string", "boolean": "boolean"}


class _Untranslatable(Exception):
    """The rule uses something outside the translated subset."""


def translate(spark: SparkSession, sql: str, columns: Mapping[str, str]) -> Rule | None:
    """``sql`` as a rule over ``columns`` (name → Spark type, ``simpleString``), or None when it is not translated."""
    by_name: dict[str, list[str]] = {}
    for name in columns:
        by_name.setdefault(name.lower(), []).append(name)  # Spark resolves names case-insensitively
    try:
        parsed = spark._jsparkSession.sessionState().sqlParser().parseExpression(sql)
        rule, kind = _node(parsed, columns, by_name)
    except Exception:  # _Untranslatable, or a rule Spark cannot parse: Spark's path evaluates or reports it
        return None
    return rule if kind == "boolean" else None


def _children(node: Any) -> list[Any]:
    seq = node.children()
    return [seq.apply(i) for i in range(seq.size())]


def _node(node: Any, columns: Mapping[str, str], by_name: Mapping[str, list[str]]) -> tuple[Rule, str]:
    """(rule, its type family) of one Catalyst node."""
    name = node.getClass().getSimpleName()
    kids = _children(node)
    if name == "UnresolvedAttribute":
        parts = node.nameParts()
        matches = by_name.get(str(parts.apply(0)).lower(), []) if parts.size() == 1 else []
        if len(matches) != 1 or _FAMILY.get(columns[matches[0]]) is None:
            raise _Untranslatable(name)
        return ("col", matches[0]), columns[matches[0]]
    if name == "Literal":
        return _literal(node)
    if name in ("And", "Or"):
        left, right = (_boolean(k, columns, by_name) for k in kids)
        return (name.lower(), left, right), "boolean"
    if name == "Not":
        return ("not", _boolean(kids[0], columns, by_name)), "boolean"
    if name in ("IsNull", "IsNotNull"):
        operand = _node(kids[0], columns, by_name)[0]
        if operand[0] != "col":
            raise _Untranslatable(name)
        return (name.lower(), operand), "boolean"
    if name in _COMPARISONS or name == "EqualNullSafe":
        (left, lt), (right, rt) = (_node(k, columns, by_name) for k in kids)
        _comparable(left, lt, right, rt)
        return (_COMPARISONS.get(name, "equal_null_safe"), left, right), "boolean"
    if name == "In":
        value, vt = _node(kids[0], columns, by_name)
        if value[0] != "col":
            raise _Untranslatable(name)
        options = [_node(k, columns, by_name) for k in kids[1:]]
        for option, ot in options:
            if option[0] != "lit" or (vt in _INTEGER and ot not in _INTEGER):
                raise _Untranslatable(name)  # an integer column among fractions is compared as double by Spark
            _comparable(value, vt, option, ot)
        return ("in", value, tuple(o[1] for o, _ in options)), "boolean"
    raise _Untranslatable(name)


def _boolean(node: Any, columns: Mapping[str, str], by_name: Mapping[str, list[str]]) -> Rule:
    rule, kind = _node(node, columns, by_name)
    if kind != "boolean":
        raise _Untranslatable("not a boolean")
    return rule


def _literal(node: Any) -> tuple[Rule, str]:
    spark_type = str(node.dataType().simpleString())
    value = node.value()
    if spark_type in _INTEGER or spark_type in ("double", "boolean"):
        return ("lit", value), spark_type
    if spark_type == "string":
        return ("lit", str(value.toString())), "string"
    if spark_type.startswith("decimal("):
        return ("lit", float(str(value.toString()))), "decimal"
    raise _Untranslatable(spark_type)


def _comparable(left: Rule, lt: str, right: Rule, rt: str) -> None:
    """Refuse comparisons whose meaning differs between Spark and pyarrow."""
    if left[0] == "lit" and right[0] == "lit":
        raise _Untranslatable("constant comparison")
    for a, at, bt in ((left, lt, rt), (right, rt, lt)):
        if at == "decimal" and not (bt == "double" and a[0] == "lit"):
            raise _Untranslatable("decimal")
    if "decimal" in (lt, rt):
        return
    if _FAMILY.get(lt) is None or _FAMILY.get(lt) != _FAMILY.get(rt):
        raise _Untranslatable(f"{lt} and {rt}")


# -- Python side (runs in Spark's Python workers) --------------------------------------------------
def holds(rule: Rule, columns: Mapping[str, pa.Array], length: int) -> Any:
    """Where ``rule`` holds on the ``length`` records of ``columns`` (numpy bool array); NULL counts as not."""
    import pyarrow as pa

    result = _eval(rule, columns)
    if isinstance(result, pa.Scalar):  # a rule whose columns only meet constants, e.g. ``a > 0 OR true``
        result = pa.repeat(result, length)
    return result.fill_null(False).to_numpy(zero_copy_only=False).astype(bool)


def _eval(rule: Rule, columns: Mapping[str, pa.Array]) -> Any:
    import pyarrow as pa
    import pyarrow.compute as pc

    op = rule[0]
    if op == "col":
        return columns[rule[1]]
    if op == "lit":
        return pa.scalar(rule[1])
    if op == "in":
        value = _eval(rule[1], columns)
        found = pc.is_in(value, value_set=pa.array(list(rule[2])).cast(value.type))
        return pc.if_else(pc.is_null(value), pa.scalar(None, pa.bool_()), found)
    args = [_eval(r, columns) for r in rule[1:]]
    if op == "and":
        return pc.and_kleene(*args)
    if op == "or":
        return pc.or_kleene(*args)
    if op == "not":
        return pc.invert(args[0])
    if op == "isnull":
        return pc.is_null(args[0])
    if op == "isnotnull":
        return pc.is_valid(args[0])
    args = _widened(args)
    if op == "equal_null_safe":
        left, right = args
        both_null = pc.and_(_null(left, right), _null(right, left))
        return pc.if_else(both_null, True, pc.fill_null(pc.equal(left, right), False))
    return getattr(pc, op)(*args)  # a comparison: equal, less, less_equal, greater, greater_equal


def _widened(args: list[Any]) -> list[Any]:
    """An integer compared with a double as a double, as Spark casts it (pyarrow refuses beyond 2**53)."""
    import pyarrow as pa

    if len(args) == 2 and any(pa.types.is_floating(a.type) for a in args):
        return [a.cast(pa.float64(), safe=False) if pa.types.is_integer(a.type) else a for a in args]
    return args


def _null(value: Any, other: Any) -> Any:
    """Where ``value`` is null, as long as the records (a literal broadcast against the column ``other``)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(value, pa.Scalar):
        return pa.repeat(pa.scalar(not value.is_valid), len(other))
    return pc.is_null(value)
