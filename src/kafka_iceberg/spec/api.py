"""Python table definitions, Delta Live Tables style.

.. code-block:: python

    import kafka_iceberg as ki

    @ki.table(namespace="sales", source={"topics": ["orders"], "format": "flatten"},
              commit_mode="upsert", key_fields=["id"])
    @ki.expect_or_drop("valid_id", "id IS NOT NULL")
    def orders(df):
        return df.where("name <> 'test'")

Decorators stay thin: they validate their arguments into the same :class:`TableSpec` a YAML file
produces, record where the table was written, and hand it to the active registry. The decorated
function is the table's transform, applied between decode and write. A pipeline file lists such
Python files under ``definitions:``; they are imported inside :func:`registration_context`.
"""

from __future__ import annotations

import importlib
import inspect
import runpy
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from kafka_iceberg.config import parse_model
from kafka_iceberg.errors import ConfigError
from kafka_iceberg.spec.model import Expectation, SourceLocation, TableSpec

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from kafka_iceberg.spec.model import Pipeline

Transform = Callable[["DataFrame"], "DataFrame"]
F = TypeVar("F", bound=Callable[..., Any])

_EXPECTATIONS_ATTR = "__kafka_iceberg_expectations__"
_TABLE_ATTR = "__kafka_iceberg_table__"
_TRANSFORMS: dict[str, Transform] = {}


class Registry(ABC):
    """Receives table definitions while definition files are imported."""

    @abstractmethod
    def register_table(self, spec: TableSpec, transform: Transform) -> None:
        """Add one table."""


@dataclass
class ListRegistry(Registry):
    """Collects definitions in order; needs no Spark, so decorator tests need none either."""

    tables: list[TableSpec] = field(default_factory=list)

    def register_table(self, spec: TableSpec, transform: Transform) -> None:  # noqa: D102
        self.tables.append(spec)


_active: ContextVar[Registry | None] = ContextVar("kafka_iceberg_registry", default=None)


@contextmanager
def registration_context(registry: Registry) -> Iterator[Registry]:
    """Make ``registry`` receive every table decorated inside the block."""
    token = _active.set(registry)
    try:
        yield registry
    finally:
        _active.reset(token)


def _active_registry(name: str) -> Registry:
    registry = _active.get()
    if registry is None:
        raise ConfigError.one(
            "<python>",
            f"@table {name}",
            name,
            "a table declared in a file listed under a pipeline's definitions: (no pipeline is loading)",
            "TABLE_DEFINED_OUTSIDE_OF_PIPELINE",
        )
    return registry


def _location(fn: Callable[..., Any]) -> SourceLocation:
    try:
        return SourceLocation(file=inspect.getsourcefile(fn) or "<python>", line=inspect.getsourcelines(fn)[1])
    except (OSError, TypeError):
        return SourceLocation(file="<python>")


def table(*, name: str | None = None, **keys: Any) -> Callable[[F], F]:
    """Declare the decorated function as a table; its body transforms the decoded DataFrame.

    Args:
        name: table name; defaults to the function name.
        **keys: any table-spec key of PRODUCT.md (``namespace``, ``source``, ``commit_mode``, ...).

    Raises:
        ConfigError: invalid keys, naming the defining file and line.
    """

    def wrap(fn: F) -> F:
        table_name = name or fn.__name__
        where = _location(fn)
        expectations = dict(keys.pop("expectations", {}) or {})
        for exp_name, exp in reversed(getattr(fn, _EXPECTATIONS_ATTR, [])):
            expectations.setdefault(exp_name, exp)
        ref = f"{where.file}:{fn.__qualname__}"
        data = {**keys, "name": table_name, "expectations": expectations, "transform": None, "defined_at": where}
        label = f"{where.file}:{where.line}" if where.line else where.file
        spec = parse_model(TableSpec, data, file=label, prefix=(f"@table {table_name}",))
        spec = spec.model_copy(update={"transform": ref})
        _TRANSFORMS[ref] = fn
        _active_registry(table_name).register_table(spec, fn)
        setattr(fn, _TABLE_ATTR, spec)
        return fn

    return wrap


def _expect(action: str) -> Callable[[str, str], Callable[[F], F]]:
    def decorator(name: str, expr: str) -> Callable[[F], F]:
        def wrap(fn: F) -> F:
            if hasattr(fn, _TABLE_ATTR):
                raise ConfigError.one(
                    _location(fn).file,
                    f"@expect {name}",
                    name,
                    "expectation decorators below @table (they are applied first)",
                    "DECORATOR_ORDER",
                )
            existing = list(getattr(fn, _EXPECTATIONS_ATTR, []))
            existing.append((name, Expectation(expr=expr, on_violation=action)))
            setattr(fn, _EXPECTATIONS_ATTR, existing)
            return fn

        return wrap

    decorator.__doc__ = f"Add an expectation whose violations are handled with ``{action}``."
    return decorator


expect = _expect("warn")
expect_or_drop = _expect("drop")
expect_or_quarantine = _expect("quarantine")
expect_or_fail = _expect("fail")


def load_definitions(pipeline: Pipeline, base_dir: Path) -> list[TableSpec]:
    """Import the pipeline's ``definitions`` files and return the tables they declare."""
    registry = ListRegistry()
    with registration_context(registry):
        for entry in pipeline.definitions:
            path = (base_dir / entry).resolve()
            if not path.is_file():
                raise ConfigError.one(
                    pipeline.source_file, "definitions", entry, "an existing Python file", "NO_SUCH_FILE"
                )
            runpy.run_path(str(path), run_name=f"kafka_iceberg_definitions_{path.stem}")
    catalog = pipeline.catalog
    return [t if t.catalog or not catalog else t.model_copy(update={"catalog": catalog}) for t in registry.tables]


def resolve_transform(ref: str) -> Transform:
    """The callable behind a transform reference (``module:function`` or a decorated function).

    Raises:
        ConfigError: the module or function does not exist.
    """
    if ref in _TRANSFORMS:
        return _TRANSFORMS[ref]
    module_name, _, attr = ref.partition(":")
    try:
        target: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            target = getattr(target, part)
    except (ImportError, AttributeError) as exc:
        raise ConfigError.one(
            "<transform>", "transform", ref, f"an importable module:function ({exc})", "UNKNOWN_TRANSFORM"
        ) from None
    if not callable(target):
        raise ConfigError.one("<transform>", "transform", ref, "a callable", "UNKNOWN_TRANSFORM")
    fn: Transform = target
    return fn
