"""Spies on the framework's own functions: what each call returned, read back by a test."""

from __future__ import annotations

from typing import Any

import pytest


def returns(monkeypatch: pytest.MonkeyPatch, module: Any, name: str, function: Any) -> list[Any]:
    """What each call of ``module.name`` (which is ``function``) returns from now on, in order."""
    out: list[Any] = []

    def spy(*args: Any, **kwargs: Any) -> Any:
        result = function(*args, **kwargs)
        out.append(result)
        return result

    monkeypatch.setattr(module, name, spy)
    return out
