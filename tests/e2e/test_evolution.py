"""A column that first appears after the first batch of a run lands, on every writer.

The streaming query's batches belong to a Spark session of its own, whose catalog keeps its own
loaded tables; the table is evolved through the job's session. Spark's writer (append, MERGE) must
see the new column in the batch that brought it (``TableWriter._current_in``).
"""

from __future__ import annotations

import json

import pytest

from tests.support.kafka import produce
from tests.support.run import run_pipeline, unique

pytestmark = pytest.mark.integration


@pytest.mark.parametrize(("mode", "engine"), [("upsert", "auto"), ("append", "spark"), ("append", "arrow")])
def test_a_field_first_seen_in_the_second_batch_becomes_a_column_with_its_values(tmp_path, lake, stack, mode, engine):
    ns, topic = unique("evolve"), unique("items")
    first = [{"id": i, "name": f"n{i}"} for i in range(2)]
    second = [{"id": i, "name": f"n{i}", "size": f"s{i}"} for i in (1, 2)]  # id 1 again: an upsert replaces it
    produce(stack.kafka_bootstrap, topic, [(None, json.dumps(v)) for v in first + second], partition=0)
    keys = "\n    key_fields: [id]" if mode == "upsert" else ""
    ran = run_pipeline(
        tmp_path,
        f"""
pipeline: evolve
catalog: lake
tables:
  - name: items
    namespace: {ns}
    source: {{topics: [{topic}], format: flatten, max_records_per_batch: 2}}
    commit_mode: {mode}{keys}
    write: {{engine: {engine}}}
    partition_window: none
""",
    )
    assert [r.committed for r in ran.reports] == [True, True]
    table = lake.pyiceberg().load_table(f"{ns}.items")
    got = sorted(((r["id"], r["name"], r["size"]) for r in table.scan().to_arrow().to_pylist()), key=str)
    if mode == "upsert":
        assert got == sorted([(0, "n0", None), (1, "n1", "s1"), (2, "n2", "s2")], key=str)
    else:
        assert got == sorted([(0, "n0", None), (1, "n1", None), (1, "n1", "s1"), (2, "n2", "s2")], key=str)
