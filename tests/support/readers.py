"""The two Kafka readers a job can use locally: Spark's Kafka source (``environments/local.yml``)
and the confluent-kafka direct reader (an environment ``direct`` derived from it)."""

from __future__ import annotations

import re

from tests.support.project import REPO

READERS = {"spark": "local", "direct": "direct"}


def reader_env(reader: str) -> dict[str, str]:
    """Extra environment files for :func:`tests.support.project.project` that run ``reader``."""
    if reader == "spark":
        return {}
    local = (REPO / "environments" / "local.yml").read_text()
    direct = re.sub(r"(?m)^  reader: .*$", "  reader: direct", local)
    assert direct != local
    return {"direct": direct}
