"""A table another client drops while the job runs is created again by the next batch.

Spark's catalog caches the tables it loaded, so for a while it still names a table that is gone;
the batch must find that out and create the table, as a restarted job would, on every writer.
"""

from __future__ import annotations

import json
import logging

import pytest

from tests.support.kafka import produce
from tests.support.run import run_pipeline, unique

pytestmark = pytest.mark.integration


class DropAfterFirstBatch:
    """An event log that drops the table through pyiceberg, another client, once the first batch is in."""

    def __init__(self, catalog, identifier):
        self.catalog, self.identifier, self.dropped = catalog, identifier, []

    def on_batch(self, report):
        if report.batch_id == 0 and report.committed:
            self.dropped.append(self.catalog.load_table(self.identifier).current_snapshot().snapshot_id)
            self.catalog.drop_table(self.identifier)

    def flush(self):
        pass


def run_dropping(tmp_path, dropper, ns, topic, settings):
    """Run table ``items`` of ``topic`` in batches of two, plus ``settings`` (YAML lines), with ``dropper`` watching."""
    yaml = f"""
pipeline: dropped
catalog: lake
tables:
  - name: items
    namespace: {ns}
    source: {{topics: [{topic}], format: flatten, max_records_per_batch: 2}}
    partition_window: none
{settings}"""
    return run_pipeline(tmp_path, yaml, event_log=dropper)


@pytest.mark.parametrize("engine", ["spark", "arrow"])
def test_the_batch_after_a_drop_creates_the_table_again_with_its_records(tmp_path, lake, stack, engine, caplog):
    ns, topic = unique("dropped"), unique("items")
    values = [{"id": i, "name": f"n{i}"} for i in range(4)]
    produce(stack.kafka_bootstrap, topic, [(None, json.dumps(v)) for v in values], partition=0)
    catalog = lake.pyiceberg()
    dropper = DropAfterFirstBatch(catalog, f"{ns}.items")
    with caplog.at_level(logging.WARNING, logger="kafka_iceberg.write.writer"):
        ran = run_dropping(tmp_path, dropper, ns, topic, f"    write: {{engine: {engine}}}\n")
    assert [r.committed for r in ran.reports] == [True, True] and len(dropper.dropped) == 1
    table = catalog.load_table(f"{ns}.items")
    assert sorted(r["id"] for r in table.scan().to_arrow().to_pylist()) == [2, 3]  # the second batch's records
    assert [s.summary.get("kafka-iceberg.batch-id") for s in table.snapshots()] == ["1"]
    assert table.snapshots()[0].summary.get("kafka-iceberg.offsets") == json.dumps(
        {topic: {"0": 4}}, separators=(",", ":")
    )
    assert any("was dropped while the job ran" in r.getMessage() for r in caplog.records)


def test_a_dropped_quarantine_table_is_created_again_with_the_next_batchs_quarantined_records(tmp_path, lake, stack):
    ns, topic = unique("dropped_q"), unique("items")
    values = [{"id": 0}, {"id": -1}, {"id": 2}, {"id": -3}]  # a quarantined record in each batch of two
    produce(stack.kafka_bootstrap, topic, [(None, json.dumps(v)) for v in values], partition=0)
    catalog = lake.pyiceberg()
    dropper = DropAfterFirstBatch(catalog, f"{ns}.items_bad")
    quarantine = f"""    expectations:
      not_negative: {{expr: 'id >= 0', on_violation: quarantine}}
    errors: {{quarantine_table: {ns}.items_bad}}
"""
    ran = run_dropping(tmp_path, dropper, ns, topic, quarantine)
    assert [r.committed for r in ran.reports] == [True, True] and len(dropper.dropped) == 1
    assert sorted(r["id"] for r in catalog.load_table(f"{ns}.items").scan().to_arrow().to_pylist()) == [0, 2]
    quarantine = catalog.load_table(f"{ns}.items_bad").scan().to_arrow().to_pylist()
    assert [(r["offset"], r["_batch_id"]) for r in quarantine] == [(3, 1)]  # the record of batch 1 only
