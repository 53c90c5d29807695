"""Records that go from Kafka before the job reads them: a clear stop, or a logged skip when allowed.

Retention (or ``delete_records``, or a topic deleted and created again) can remove records a stopped
or lagging job has not read. With ``kafka.fail_on_data_loss: true`` (the default) the run stops
naming the partition, the lost offsets and the setting to change; nothing after the last commit is
written. With ``false`` it reads on from what Kafka still holds, and the direct reader counts what it
skipped in the batch's report, the metrics and the event log. Both readers, as users run them.
"""

from __future__ import annotations

import json
import re

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient

from kafka_iceberg.observe.eventlog import EventLog
from tests.support.kafka import produce
from tests.support.project import REPO, entry_point, project
from tests.support.run import run_pipeline, unique

pytestmark = pytest.mark.integration


def environment(reader: str, fail_on_data_loss: bool) -> dict[str, str]:
    """The local environment with ``reader`` and ``fail_on_data_loss``, under its own name (``loss``)."""
    local = (REPO / "environments" / "local.yml").read_text()
    setting = f"  reader: {reader}\n  fail_on_data_loss: {str(fail_on_data_loss).lower()}"
    text = re.sub(r"(?m)^  reader: .*$", setting, local)
    assert text != local
    return {"loss": text}


@pytest.mark.parametrize("reader", ["spark", "direct"])
def test_records_gone_before_they_are_read_stop_the_run_or_are_skipped_when_allowed(tmp_path, lake, stack, reader):
    ns, topic = unique("loss"), unique("items")
    pipeline = f"""
pipeline: loss
catalog: lake
tables:
  - name: items
    namespace: {ns}
    source: {{topics: [{topic}], format: flatten}}
    partition_window: none
"""

    def ids():
        return sorted(r["id"] for r in lake.pyiceberg().load_table(f"{ns}.items").scan().to_arrow().to_pylist())

    produce(stack.kafka_bootstrap, topic, [(None, json.dumps({"id": i})) for i in range(4)], partition=0)
    run_pipeline(tmp_path / "first", pipeline, env_name="loss", extra_env=environment(reader, True))
    assert ids() == [0, 1, 2, 3]

    # While the job is stopped, 4-11 arrive and retention takes 4-7 before it reads them.
    produce(stack.kafka_bootstrap, topic, [(None, json.dumps({"id": i})) for i in range(4, 12)], partition=0)
    admin = AdminClient({"bootstrap.servers": stack.kafka_bootstrap})
    for future in admin.delete_records([TopicPartition(topic, 0, 8)]).values():
        future.result(timeout=30)

    # As users run it: the console entry point, which prints one line and exits 1.
    path = project(tmp_path / "second", pipeline, extra_env=environment(reader, True))
    stopped = entry_point("ingest-flatten", "--pipeline", str(path), "--env", "loss", stack_dir=stack.run_dir)
    lines = [line for line in stopped.stderr.splitlines() if line.startswith("error:")]
    assert stopped.returncode == 1 and len(lines) == 1, stopped.stdout + stopped.stderr[-3000:]
    lost = (
        f"{topic}[0] offsets 4-7 are gone"
        if reader == "direct"
        else f"Cannot fetch offset 4 (TopicPartition: {topic}-0)"
    )
    assert lines[0].startswith("error: DATA LOSS: ") and lost in lines[0], lines[0]
    assert "kafka.fail_on_data_loss: false in " in lines[0] and "environments/loss.yml" in lines[0], lines[0]
    assert "Traceback" not in stopped.stderr and "\tat org." not in stopped.stderr
    assert ids() == [0, 1, 2, 3]  # nothing after the last commit

    event_log = EventLog(lake.spark, "lake", f"{ns}.event_log")
    skipped = run_pipeline(
        tmp_path / "third", pipeline, env_name="loss", extra_env=environment(reader, False), event_log=event_log
    )
    assert ids() == [0, 1, 2, 3, 8, 9, 10, 11]
    # What was skipped is counted where users look: the batch's report, the metrics and the event log.
    # Spark's Kafka source logs that it skipped, but not what: nothing to count there.
    lost = {f"{topic}[0] 4-7": 4} if reader == "direct" else {}
    assert [r.records_lost for r in skipped.reports if r.records_lost] == ([lost] if lost else [])
    labels = {"pipeline": "loss", "table": f"{ns}.items"}
    assert skipped.metrics.registry.get_sample_value("kafka_iceberg_records_lost_total", labels) == sum(lost.values())
    events = lake.pyiceberg().load_table(f"{ns}.event_log").scan().to_arrow().to_pylist()
    details = [json.loads(e["details"]) for e in events if e["kind"] == "batch" and e["details"]]
    assert details == ([{"records_lost": lost}] if lost else [])
