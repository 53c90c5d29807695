"""The bad-input corpus: hostile Kafka messages per format, each with the classification the decoder
must give it (issue 9, "Reliability and security hardening").

``tests/corpus/<format>.jsonl`` holds one header line (which fixture pipeline and table the file is
meant for) and then one message per line. Keys and values are base64 so invalid UTF-8, BOMs and NUL
bytes survive; huge values are a unit repeated (``value_repeat``) to keep the files small. The files
are written by ``python -m tests.corpus.generate`` (the generator is the readable source; the test
checks the two agree).

``expect`` is ``good`` (the record lands in the table) or ``error`` (it lands in the error target with
a reason containing ``reason_contains`` when given); ``note`` explains a classification that is not
obvious. ``tests/e2e/test_corpus_end_to_end.py`` checks every classification against a real run.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

CORPUS_DIR = Path(__file__).resolve().parent
FORMATS = ("text", "csv", "json", "flatten", "binary")
Expect = Literal["good", "error"]


@dataclass(frozen=True)
class Target:
    """The fixture pipeline and table a corpus file is written for."""

    format: str
    pipeline: str  # path relative to the repository root
    table: str  # namespace.name in that pipeline
    topic: str


@dataclass(frozen=True)
class Message:
    """One hostile message and its expected classification."""

    id: str
    why: str
    key: bytes | None
    value: bytes | None
    expect: Expect
    reason_contains: str | None = None
    category: str = ""
    note: str | None = None


def _bytes(b64: str | None, repeat: dict[str, object] | None) -> bytes | None:
    if repeat is not None:
        unit = base64.b64decode(str(repeat["unit_b64"]))
        prefix = base64.b64decode(str(repeat.get("prefix_b64", "")))
        suffix = base64.b64decode(str(repeat.get("suffix_b64", "")))
        times = repeat["times"]
        assert isinstance(times, int)
        return prefix + unit * times + suffix
    return None if b64 is None else base64.b64decode(b64, validate=True)


def load_target(fmt: str) -> Target:
    """The header of ``<fmt>.jsonl``."""
    with (CORPUS_DIR / f"{fmt}.jsonl").open(encoding="utf-8") as f:
        head = json.loads(f.readline())
    return Target(head["corpus"], head["pipeline"], head["table"], head["topic"])


def load(fmt: str) -> list[Message]:
    """Every message of ``<fmt>.jsonl``, in file order."""
    out = []
    lines = (CORPUS_DIR / f"{fmt}.jsonl").read_text(encoding="utf-8").splitlines()
    for line in lines[1:]:
        row = json.loads(line)
        out.append(
            Message(
                id=row["id"],
                why=row["why"],
                key=_bytes(row.get("key_b64"), row.get("key_repeat")),
                value=_bytes(row.get("value_b64"), row.get("value_repeat")),
                expect=row["expect"],
                reason_contains=row.get("reason_contains"),
                category=row.get("category", ""),
                note=row.get("note"),
            )
        )
    return out
