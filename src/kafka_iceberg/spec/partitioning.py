"""Iceberg partition transforms as written in table specs.

``col``, ``bucket(16, id)``, ``truncate(4, name)``, ``years/months/days/hours(ts)``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

TRANSFORMS = ("identity", "bucket", "truncate", "years", "months", "days", "hours")
ALLOWED = "a column name, bucket(N, col), truncate(W, col), years(col), months(col), days(col) or hours(col)"
_SINGULAR = {"year": "years", "month": "months", "day": "days", "hour": "hours"}
_CALL = re.compile(r"^(?P<fn>[a-z_]+)\s*\(\s*(?P<args>[^()]*)\)$")
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_TIME_TYPES = {
    "years": ("date", "timestamp", "timestamp_ntz"),
    "months": ("date", "timestamp", "timestamp_ntz"),
    "days": ("date", "timestamp", "timestamp_ntz"),
    "hours": ("timestamp", "timestamp_ntz"),
}
_NOT_BUCKETABLE = ("float", "double", "boolean")
_TRUNCATABLE = ("string", "int", "long", "binary")


@dataclass(frozen=True)
class PartitionField:
    """One parsed partition field."""

    transform: str
    column: str
    width: int | None = None

    def sql(self) -> str:
        """Spark DDL for ``PARTITIONED BY (...)`` and ``ADD PARTITION FIELD``."""
        if self.transform == "identity":
            return self.column
        if self.width is not None:
            return f"{self.transform}({self.width}, {self.column})"
        return f"{self.transform}({self.column})"


def parse_partition_field(text: str) -> PartitionField:
    """Parse one entry of ``partitioning``.

    Raises:
        ValueError: not a valid transform; the message lists the allowed forms.
    """
    raw = str(text).strip()
    if _IDENT.match(raw):
        return PartitionField("identity", raw)
    match = _CALL.match(raw)
    if not match:
        raise ValueError(ALLOWED)
    fn = _SINGULAR.get(match["fn"], match["fn"])
    args = [a.strip() for a in match["args"].split(",")]
    if fn in ("bucket", "truncate"):
        if len(args) != 2 or not args[0].isdigit() or int(args[0]) <= 0 or not _IDENT.match(args[1]):
            raise ValueError(f"{fn}(N, col) with N a positive integer")
        return PartitionField(fn, args[1], int(args[0]))
    if fn in ("years", "months", "days", "hours"):
        if len(args) != 1 or not _IDENT.match(args[0]):
            raise ValueError(f"{fn}(col)")
        return PartitionField(fn, args[0])
    raise ValueError(ALLOWED)


def check_against_columns(field: PartitionField, columns: Mapping[str, str]) -> str | None:
    """Why ``field`` cannot partition a table with ``columns`` (name → type), or None."""
    if field.column not in columns:
        return f"a column of the table ({', '.join(columns)})"
    col_type = columns[field.column]
    if field.transform in _TIME_TYPES and col_type not in _TIME_TYPES[field.transform]:
        allowed = " or ".join(_TIME_TYPES[field.transform])
        return f"{field.transform}() on a {allowed} column ({field.column} is {col_type})"
    if field.transform == "bucket" and col_type in _NOT_BUCKETABLE:
        return f"bucket() on a column that is not {', '.join(_NOT_BUCKETABLE)} ({field.column} is {col_type})"
    if field.transform == "truncate" and not (col_type in _TRUNCATABLE or col_type.startswith("decimal")):
        return f"truncate() on a string, int, long, binary or decimal column ({field.column} is {col_type})"
    return None
