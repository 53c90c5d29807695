"""Count the parses Arrow's reader runs in this process (``decode/arrow.py``), for tests of what a
bad record costs."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest


def counted_parses(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Each parse Arrow's reader runs from now on, in order: whether it succeeded."""
    from kafka_iceberg.decode import arrow

    parses: list[bool] = []
    reader_of = arrow._reader

    def counting(layout: arrow.Layout, nested: tuple[str, ...] = ()) -> Any:
        read = reader_of(layout, nested)

        def counted(buffer: pa.Buffer, block: int) -> Any:
            try:
                out = read(buffer, block)
            except Exception:
                parses.append(False)
                raise
            parses.append(True)
            return out

        return counted

    monkeypatch.setattr(arrow, "_reader", counting)
    return parses
