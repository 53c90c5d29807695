"""Exactly once across crashes: the direct reader is SIGKILLed at random moments and restarted;
in the end every good record is in the table once, every bad one in the error topic once, lag 0.
Replaying a capture of the same topics yields the same table."""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import AdminClient

from kafka_iceberg.source.capture import capture
from tests.support.kafka import consume_all, create_topic, produce
from tests.support.project import BIN, REPO, project
from tests.support.run import run_pipeline, unique

pytestmark = [pytest.mark.integration, pytest.mark.slow]

PER_PARTITION = 25_000  # 2 topics x 4 partitions x 25k = 200k records
PARTITIONS = 4
BAD_EVERY = 50  # 2% bad records
KILLS = 5
SEED = int(os.environ.get("KAFKA_ICEBERG_CHAOS_SEED", str(random.randrange(1 << 30))))


def payload(topic_index, partition, i):
    if i % BAD_EVERY == 7:
        return f"not json {topic_index}-{partition}-{i}"
    return json.dumps({"id": (topic_index * PARTITIONS + partition) * PER_PARTITION + i, "note": f"n{i % 97}"})


def pipeline(ns, topics, errors_topic, batch):
    return f"""
pipeline: chaos
catalog: lake
tables:
  - name: events
    namespace: {ns}
    source: {{topics: [{", ".join(topics)}], format: flatten, max_records_per_batch: {batch}}}
    schema: {{columns: {{id: long, note: string}}}}
    schema_evolution: strict
    partition_window: none
    errors: {{error_topic: {errors_topic}}}
"""


@dataclass
class Chaos:
    ns: str
    topics: list[str]
    errors_topic: str
    pipeline_file: Path
    kills: list[float]
    progress: list[int]
    good: set[tuple[str, int, int]]
    bad: set[tuple[str, int, int]]


@pytest.fixture(scope="module")
def chaos(stack, lake, tmp_path_factory):
    ns, errors_topic = unique("chaos"), unique("chaos_errors")
    topics = [unique("chaos_a"), unique("chaos_b")]
    good, bad = set(), set()
    threads = []
    for t_index, topic in enumerate(topics):
        create_topic(stack.kafka_bootstrap, topic, partitions=PARTITIONS)
        for p in range(PARTITIONS):
            records = [(f"k{i}", payload(t_index, p, i)) for i in range(PER_PARTITION)]
            for i, (_k, v) in enumerate(records):
                (bad if v.startswith("not json") else good).add((topic, p, i))
            threads.append(
                threading.Thread(target=produce, args=(stack.kafka_bootstrap, topic, records), kwargs={"partition": p})
            )
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    path = project(tmp_path_factory.mktemp("chaos"), pipeline(ns, topics, errors_topic, batch=20_000))
    env = {**os.environ, "KAFKA_ICEBERG_RUN_DIR": stack.run_dir, "PYTHONPATH": str(REPO / "src")}
    command = [str(BIN / "ingest-flatten"), "--pipeline", str(path), "--env", "local"]
    rng = random.Random(SEED)
    kills, progress = [], []
    for attempt in range(KILLS):
        proc = subprocess.Popen(command, env=env, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True)  # fmt: skip
        # Odd attempts die at a random moment (start-up included); even ones at a random moment just
        # after the next commit lands, so some crashes always fall between commits whatever the load.
        if attempt % 2:
            deadline = time.monotonic() + rng.uniform(3, 40)
        else:
            before = committed_records(lake, ns)
            deadline = time.monotonic() + 300
            while time.monotonic() < deadline and proc.poll() is None and committed_records(lake, ns) == before:
                time.sleep(0.5)
            deadline = time.monotonic() + rng.uniform(0, 4)
        try:
            proc.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # python, spark-submit and the JVM at once: a hard crash
            proc.wait(30)
            kills.append(attempt)
            progress.append(committed_records(lake, ns))
    final = subprocess.run(command, env=env, cwd=REPO, capture_output=True, text=True, timeout=900, check=False)
    assert final.returncode == 0, f"seed {SEED}: {final.stdout}\n{final.stderr[-4000:]}"
    return Chaos(ns, topics, errors_topic, path, kills, progress, good, bad)


def committed_records(lake, ns):
    """Records covered by the table's last commit marker (0 before the first commit)."""
    catalog = lake.pyiceberg()
    if not catalog.table_exists(f"{ns}.events"):
        return 0
    snapshot = catalog.load_table(f"{ns}.events").current_snapshot()
    if snapshot is None:
        return 0
    offsets = json.loads(snapshot.summary.additional_properties.get("kafka-iceberg.offsets", "{}"))
    return sum(sum(parts.values()) for parts in offsets.values())


def test_crashes_neither_lose_nor_duplicate(chaos, lake, stack):
    assert len(chaos.kills) >= KILLS - 1, f"seed {SEED}: runs finished before they could be killed: {chaos.kills}"
    total = 2 * PARTITIONS * PER_PARTITION
    # The crashes landed between commits, not only before the first or after the last one.
    assert any(0 < done < total for done in chaos.progress), f"seed {SEED}: progress at kills {chaos.progress}"
    rows = (
        lake.pyiceberg()
        .load_table(f"{chaos.ns}.events")
        .scan(selected_fields=("topic", "partition", "offset"))
        .to_arrow()
    )
    coordinates = list(zip(*(rows.column(c).to_pylist() for c in ("topic", "partition", "offset")), strict=True))
    assert len(coordinates) == len(set(coordinates)), f"seed {SEED}: duplicates in the table"
    assert set(coordinates) == chaos.good, f"seed {SEED}: table differs from the good records"

    published = consume_all(stack.kafka_bootstrap, chaos.errors_topic, timeout=60)
    bad = [
        (
            h["kafka_iceberg.errors.topic"].decode(),
            int(h["kafka_iceberg.errors.partition"]),
            int(h["kafka_iceberg.errors.offset"]),
        )
        for h in (dict(m.headers) for m in published)
    ]
    assert len(bad) == len(set(bad)), f"seed {SEED}: duplicates in the error topic"
    assert set(bad) == chaos.bad

    admin = AdminClient({"bootstrap.servers": stack.kafka_bootstrap})
    group = f"kafka-iceberg.chaos.{chaos.ns}.events"
    request = ConsumerGroupTopicPartitions(
        group, [TopicPartition(t, p) for t in chaos.topics for p in range(PARTITIONS)]
    )
    committed = admin.list_consumer_group_offsets([request])[group].result(timeout=10).topic_partitions
    assert {(tp.topic, tp.partition): tp.offset for tp in committed} == {
        (t, p): PER_PARTITION for t in chaos.topics for p in range(PARTITIONS)
    }, "lag is not 0"


def test_replay_of_a_capture_yields_the_same_table(chaos, lake, stack, tmp_path):
    captured = tmp_path / "captured"
    for topic in chaos.topics:
        capture({"bootstrap.servers": stack.kafka_bootstrap}, topic, captured, records_per_file=50_000)
    local = (REPO / "environments" / "local.yml").read_text()
    replay_env = re.sub(r"(?m)^  reader: .*$", f"  reader: replay\n  replay_path: {captured}", local)
    assert replay_env != local
    ns = unique("replayed")
    text = pipeline(ns, chaos.topics, unique("replay_errors"), batch=20_000)
    run_pipeline(tmp_path / "p", text.replace("pipeline: chaos", "pipeline: replayed"), env_name="replay",
                 extra_env={"replay": replay_env})  # fmt: skip
    fields = ("topic", "partition", "offset", "id", "note")
    direct = lake.pyiceberg().load_table(f"{chaos.ns}.events").scan(selected_fields=fields).to_arrow()
    replayed = lake.pyiceberg().load_table(f"{ns}.events").scan(selected_fields=fields).to_arrow()
    key = lambda t: sorted(zip(*(t.column(c).to_pylist() for c in fields), strict=True))  # noqa: E731
    assert key(replayed) == key(direct)
