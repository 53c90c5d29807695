"""The package's import graph stays a straight line (docs/architecture.md): no stage imports a later
stage, no two packages import each other (directly or around a loop), and every shared constant
has one definition."""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

import kafka_iceberg

ROOT = Path(kafka_iceberg.__file__).parent
STAGES = ["spec", "source", "decode", "checks", "write", "observe", "run", "cli"]


def modules() -> dict[str, Path]:
    out = {}
    for path in ROOT.rglob("*.py"):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


def imports(mods: dict[str, Path]) -> set[tuple[str, str]]:
    """(importer, imported) pairs between modules of the package, lazy imports included."""
    edges = set()
    for name, path in mods.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("kafka_iceberg"):
                subs = [f"{node.module}.{a.name}" for a in node.names]
                targets = [s for s in subs if s in mods]
                if len(targets) < len(subs):
                    targets.append(node.module)
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names if a.name.startswith("kafka_iceberg")]
            else:
                continue
            edges |= {(name, t) for t in targets if t in mods and t != name}
    return edges


def package(module: str) -> str:
    """``kafka_iceberg.run.batch`` → ``run``; a top-level module is its own package."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def test_no_stage_imports_a_later_stage():
    back = [
        (a, b)
        for a, b in imports(modules())
        if package(a) in STAGES and package(b) in STAGES and STAGES.index(package(b)) > STAGES.index(package(a))
    ]
    assert back == []


def looping(edges: set[tuple[str, str]]) -> list[tuple[str, str]]:
    """The edges ``(a, b)`` that lie on a loop: ``b`` reaches ``a`` again."""
    graph: dict[str, set[str]] = defaultdict(set)
    for a, b in edges:
        graph[a].add(b)

    def reaches(start: str, goal: str) -> bool:
        seen, todo = set(), [start]
        while todo:
            node = todo.pop()
            if node == goal:
                return True
            if node not in seen:
                seen.add(node)
                todo.extend(graph.get(node, ()))
        return False

    return sorted((a, b) for a, b in edges if reaches(b, a))


def test_no_package_cycles():
    edges = imports(modules())
    assert (
        looping({(package(a), package(b)) for a, b in edges if package(a) and package(b) and package(a) != package(b)})
        == []
    )


def test_no_modules_import_each_other():
    """Not even for a type: two modules that need each other's names share a third (``decode.codec``)."""
    assert looping(imports(modules())) == []


def test_each_shared_constant_is_defined_once():
    definitions: dict[str, list[str]] = defaultdict(list)
    pattern = re.compile(r"^([A-Z][A-Z0-9_]+)(?::[^=]+)? = ", re.MULTILINE)
    for name, path in modules().items():
        for constant in pattern.findall(path.read_text()):
            definitions[constant].append(name)
    shared = ["INTERNAL_PREFIX", "TOMBSTONE_COLUMN", "QUARANTINE_STREAM", "HEADERS_MAP_TYPE", "KAFKA_SCHEMA_DDL",
              "MARKER_PREFIX", "DROPPED_KEY"]  # fmt: skip
    assert {c: definitions[c] for c in shared if len(definitions[c]) != 1} == {}
    assert not [n for n, p in modules().items() if '"_ki_"' in p.read_text() and n != "kafka_iceberg.records"]
