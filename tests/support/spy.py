"""Spies on the framework: what each call of its own functions returned, and the Spark jobs it ran."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
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


@contextmanager
def spark_jobs(spark: Any) -> Iterator[list[int]]:
    """The ids of the Spark jobs run inside the block (a job group of its own), filled in when it ends."""
    group = f"spied-{uuid.uuid4().hex[:8]}"
    jobs: list[int] = []
    spark.sparkContext.setJobGroup(group, "counted by a test")
    try:
        yield jobs
    finally:
        spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)  # the next tests run outside the group
        jobs += spark.sparkContext.statusTracker().getJobIdsForGroup(group)
