"""Test-only crash injection at named points of a batch's life. Never set it in production.

``KAFKA_ICEBERG_FAULT=point:probability[:seed][,point:probability[:seed]...]`` makes the process
kill itself with SIGKILL (its whole process group when it leads one: Python, spark-submit and the
JVM at once, as a machine failure would) when it reaches ``point``, with that probability. The
chaos test (``tests/e2e/test_exactly_once.py``) uses it to crash where random external kills
rarely land. Points, in the order a batch reaches them:

- ``publish``: in the middle of the error-topic publish (records sent, transaction not committed);
- ``published``: the error-topic transaction committed, the quarantine and table commits not made;
- ``quarantined``: the quarantine table committed, the table not;
- ``written``: the Arrow writer's data files of the batch written, the table not committed;
- ``committed``: the table committed, the batch not yet acknowledged to its source (Spark's
  commit log, the direct reader's consumer group).

Unset, :func:`reached` is one dictionary lookup.
"""

from __future__ import annotations

import functools
import logging
import os
import random
import signal

log = logging.getLogger(__name__)

ENV = "KAFKA_ICEBERG_FAULT"
POINTS = ("publish", "published", "quarantined", "written", "committed")


@functools.cache
def _parse(text: str) -> dict[str, tuple[float, random.Random]]:
    plan = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        point, _, rest = item.partition(":")
        probability, _, seed = rest.partition(":")
        if point not in POINTS:
            raise ValueError(f"{ENV}: unknown point {point!r}; expected one of {', '.join(POINTS)}")
        plan[point] = (float(probability or 1), random.Random(int(seed) if seed else None))
    return plan


def reached(point: str) -> None:
    """Crash here when ``KAFKA_ICEBERG_FAULT`` asks for it (test-only)."""
    chance = _parse(os.environ.get(ENV, "")).get(point)
    if chance is None or chance[1].random() >= chance[0]:
        return
    log.warning("%s: crashing at %s", ENV, point)
    for handler in logging.getLogger().handlers:
        handler.flush()
    if os.getpgrp() == os.getpid():  # a job started in its own session: take its JVM down with it
        os.killpg(os.getpgrp(), signal.SIGKILL)
    os.kill(os.getpid(), signal.SIGKILL)
