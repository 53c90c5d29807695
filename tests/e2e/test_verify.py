"""``kafka-iceberg verify`` against real runs: it passes on what a pipeline wrote, and finds a row
appended twice outside the pipeline, an offset range deleted from the table and error records lost
from the error topic, each with its partition and offsets. Two pipelines on one table keep their
markers through compaction and ``expire_snapshots(retain_last=1)``, and verify covers both."""

from __future__ import annotations

import json

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient
from pyiceberg.expressions import And, EqualTo, GreaterThanOrEqual, LessThan

from kafka_iceberg.maintain import TableMaintainer
from kafka_iceberg.observe.verify import read_markers, render_text, verify_pipeline
from kafka_iceberg.run import prepare
from tests.support.kafka import create_topic, produce
from tests.support.project import entry_point, project
from tests.support.run import run_pipeline, unique
from tests.support.verify import assert_verified

pytestmark = [pytest.mark.integration, pytest.mark.slow]

PER_PARTITION = 60


def _pipeline(name, ns, topic, errors_topic, *, quarantine=True):
    quarantine_table = f", quarantine_table: {ns}.events_quarantine" if quarantine else ""
    return f"""
pipeline: {name}
catalog: lake
tables:
  - name: events
    namespace: {ns}
    source: {{topics: [{topic}], format: flatten}}
    schema: {{columns: {{id: long}}}}
    schema_evolution: strict
    partition_window: none
    maintenance: {{expire_snapshots: {{older_than_days: 0, retain_last: 1}}, orphan_files: {{enabled: false}}}}
    errors: {{error_topic: {errors_topic}{quarantine_table}}}
"""


def _produce(stack, topic, offset=0):
    create_topic(stack.kafka_bootstrap, topic, partitions=2)
    for p in (0, 1):
        values = [
            json.dumps({"id": offset + p * 1000 + i}) if i % 10 != 3 else f"bad {i}" for i in range(PER_PARTITION)
        ]
        produce(stack.kafka_bootstrap, topic, [(None, v) for v in values], partition=p)


def test_verify_passes_then_finds_a_duplicate_a_gap_and_a_lost_error_record(stack, lake, tmp_path):
    ns, topic, errors_topic = unique("verify"), unique("verify_in"), unique("verify_errors")
    _produce(stack, topic)
    yaml_text = _pipeline("verified", ns, topic, errors_topic)
    run_pipeline(tmp_path / "run", yaml_text)
    path = tmp_path / "run" / "pipelines" / "p.yml"
    assert_verified(path)
    # The command line, JSON and exit code 0.
    cli = entry_point("kafka-iceberg", "verify", "--pipeline", str(path), "--env", "local", "--json",
                      stack_dir=stack.run_dir)  # fmt: skip
    assert cli.returncode == 0, cli.stdout + cli.stderr[-3000:]
    report = json.loads(cli.stdout)
    assert report["ok"] and [p["expected"] for p in report["tables"][0]["partitions"]] == [PER_PARTITION] * 2

    table = lake.pyiceberg().load_table(f"{ns}.events")
    # A duplicate: one row appended a second time, outside the pipeline.
    row = table.scan(row_filter=And(EqualTo("partition", 0), EqualTo("offset", 5))).to_arrow()
    table.append(row)
    # A gap: offsets 20..29 of partition 1 deleted from the table.
    table.delete(And(EqualTo("partition", 1), And(GreaterThanOrEqual("offset", 20), LessThan("offset", 30))))
    # Lost error records: the error topic's first records deleted from Kafka.
    admin = AdminClient({"bootstrap.servers": stack.kafka_bootstrap})
    for future in admin.delete_records([TopicPartition(errors_topic, 0, 2)]).values():
        future.result(timeout=30)

    (result,) = verify_pipeline(prepare(path, env_name="local"))
    text = render_text([result])
    assert not result.ok
    by_partition = {p.partition: p for p in result.partitions}
    assert by_partition[0].duplicated_offsets == [{"offset": 5, "table": 2}], text
    # 20..29 minus the bad record 23, which is in the error targets, not the table.
    assert by_partition[1].missing_offsets == [[20, 22], [24, 29]], text
    assert f"{topic}[0]: 1 duplicated, offsets 5" in text
    assert f"{topic}[1]: 9 missing, offsets 20-22, 24-29" in text
    lost = [p for p in result.problems if "not in the error topic" in p]
    assert len(lost) == 2 and all(f"{topic}[" in p for p in lost), text
    cli = entry_point("kafka-iceberg", "verify", "--pipeline", str(path), "--env", "local", stack_dir=stack.run_dir)
    assert cli.returncode == 1 and "FAILED" in cli.stdout, cli.stdout + cli.stderr[-3000:]


def test_two_pipelines_keep_their_markers_through_expiry_and_verify_covers_both(stack, lake, spark, tmp_path):
    ns = unique("two")
    paths = {}
    for i, name in enumerate(("left", "right")):
        topic = unique(f"two_{name}")
        _produce(stack, topic, offset=10_000 * i)
        paths[name] = project(
            tmp_path / name, _pipeline(name, ns, topic, unique(f"two_{name}_errors"), quarantine=False)
        )
    run_pipeline(tmp_path / "l", paths["left"].read_text())
    run_pipeline(tmp_path / "r", paths["right"].read_text())  # "right" commits last: its marker is the newest
    prepared = prepare(paths["left"], env_name="local")
    job = prepared.jobs[0]
    for report in TableMaintainer(spark, job.catalog, job.spec, "left").run():
        assert report.error is None, report
    table = lake.pyiceberg().load_table(f"{ns}.events")
    assert len(table.metadata.snapshots) == 1  # every ingest snapshot expired: the markers live in the copy
    for name in ("left", "right"):
        assert read_markers(table, name), f"the marker of {name} did not survive expiry"
        assert_verified(paths[name])
    # A restart of "left" resumes from its surviving marker: nothing is read again.
    again = run_pipeline(tmp_path / "l2", paths["left"].read_text())
    assert sum(r.records_in for r in again.reports) == 0
    for name in ("left", "right"):
        assert_verified(paths[name])
