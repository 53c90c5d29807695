"""Exactly once across dense crashes, for both readers: the job is killed at least ``KILLS`` times —
by random external SIGKILLs within 20 s of its start or of a commit, and by itself at named points
of a batch (``KAFKA_ICEBERG_FAULT``: during the error-topic publish, between it and the table
commit, between the quarantine and the table commit, between the table commit and the source's
acknowledgement) — and restarted; in the end every good record is in the table once, every bad one
in the error topic and the quarantine table once, and lag is 0. Replaying a capture of the same
topics yields the same table.

Size: ``KAFKA_ICEBERG_CHAOS_RECORDS`` records over 2 topics of 4 partitions (CI: 24,000 in batches of
1,500; ``make chaos``: 200,000 in batches of 10,000, as in the run that found issue 21's duplicate),
``KAFKA_ICEBERG_CHAOS_SEED`` the seed (random when unset, printed on failure), ``KAFKA_ICEBERG_CHAOS_KILLS``
the least number of kills per reader (CI: each named point once then an external kill, 6; ``make chaos``: 8,
the extra ones a random mix). When a fast machine drains the topics before that many
kills, another round of records (half the first) is produced, so the kills never run out of work.
"""

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
from tests.support.jobs import coordinates, props, snapshots
from tests.support.kafka import consume_all, create_topic, produce
from tests.support.project import BIN, REPO, project
from tests.support.readers import READERS, reader_env
from tests.support.run import run_pipeline, unique
from tests.support.verify import assert_verified

pytestmark = [pytest.mark.integration, pytest.mark.slow]

PARTITIONS = 4
RECORDS = int(os.environ.get("KAFKA_ICEBERG_CHAOS_RECORDS", "24000"))
PER_PARTITION = RECORDS // (2 * PARTITIONS)
BATCH = 10_000 if RECORDS >= 100_000 else 1_500
BAD_EVERY = 50  # 2% bad records
# The table's write.engine (``make chaos WRITER=spark|arrow|auto``). ``auto``, the default and what CI
# runs, is the Arrow writer's single pass for this flatten table; it also dies between writing a
# batch's data files and routing its bad records ("written").
WRITER = os.environ.get("KAFKA_ICEBERG_CHAOS_WRITER", "auto")
POINTS = ("publish", "published", "quarantined", "committed", *(("written",) if WRITER != "spark" else ()))
# The first attempts die at each named point once, then by an external SIGKILL; later ones at random.
SCHEDULE = (*POINTS, "external")
# At least this many SIGKILLs per reader: by default the schedule, which CI runs (each attempt is a
# JVM start, ~45 s on a busy 2-core machine); ``make chaos`` asks for 8.
KILLS = int(os.environ.get("KAFKA_ICEBERG_CHAOS_KILLS", str(len(SCHEDULE))))
SEED = int(os.environ.get("KAFKA_ICEBERG_CHAOS_SEED", str(random.randrange(1 << 30))))
# `make test` (CI) runs one seed per reader; `make chaos` many (tests/e2e/chaos.py).
READERS_UNDER_TEST = os.environ.get("KAFKA_ICEBERG_CHAOS_READERS", "spark,direct").split(",")


def payload(topic_index, partition, i):
    if i % BAD_EVERY == 7:
        return f"not json {topic_index}-{partition}-{i}"
    return json.dumps({"id": (topic_index * PARTITIONS + partition) * 10_000_000 + i, "note": f"n{i % 97}"})


def pipeline(ns, topics, errors_topic, batch, quarantine=True):
    quarantine_table = f", quarantine_table: {ns}.events_quarantine" if quarantine else ""
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
    errors: {{error_topic: {errors_topic}{quarantine_table}}}
    write: {{engine: {WRITER}}}
"""


@dataclass
class Chaos:
    reader: str
    ns: str
    topics: list[str]
    errors_topic: str
    pipeline_file: Path
    kills: list[str]
    progress: list[int]
    good: set[tuple[str, int, int]]
    bad: set[tuple[str, int, int]]
    per_partition: int  # records produced into each partition, over every round
    seconds: float


def _produce(stack, topics, start, count, good, bad):
    """``count`` more records into each partition of ``topics``, from offset ``start``, in parallel."""
    threads = []
    for t_index, topic in enumerate(topics):
        for p in range(PARTITIONS):
            records = [(f"k{i}", payload(t_index, p, i)) for i in range(start, start + count)]
            for i, (_k, v) in zip(range(start, start + count), records, strict=True):
                (bad if v.startswith("not json") else good).add((topic, p, i))
            threads.append(
                threading.Thread(target=produce, args=(stack.kafka_bootstrap, topic, records), kwargs={"partition": p})
            )
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def run_chaos(reader, stack, lake, tmp):
    started = time.monotonic()
    ns, errors_topic = unique("chaos"), unique("chaos_errors")
    topics, good, bad = [unique("chaos_a"), unique("chaos_b")], set(), set()
    for topic in topics:
        create_topic(stack.kafka_bootstrap, topic, partitions=PARTITIONS)
    _produce(stack, topics, 0, PER_PARTITION, good, bad)
    produced = PER_PARTITION
    path = project(tmp, pipeline(ns, topics, errors_topic, batch=BATCH), extra_env=reader_env(reader))
    env = {**os.environ, "KAFKA_ICEBERG_RUN_DIR": stack.run_dir, "PYTHONPATH": str(REPO / "src")}
    command = [str(BIN / "ingest-flatten"), "--pipeline", str(path), "--env", READERS[reader]]
    rng = random.Random(f"{SEED}-{reader}")
    kills, progress = [], []
    for attempt in range(4 * KILLS):
        if len(kills) >= KILLS:
            break
        if committed_records(lake, ns) == 2 * PARTITIONS * produced:
            # A fast machine drained the topics before enough kills: another round keeps the job busy.
            _produce(stack, topics, produced, PER_PARTITION // 2, good, bad)
            produced += PER_PARTITION // 2
        how = SCHEDULE[attempt] if attempt < len(SCHEDULE) else rng.choice((*POINTS, "external", "external"))
        fault = {} if how == "external" else {"KAFKA_ICEBERG_FAULT": f"{how}:0.5:{rng.randrange(1 << 30)}"}
        with (tmp / f"attempt-{attempt}.log").open("w") as log:  # kept for a failure's diagnosis
            proc = subprocess.Popen(command, env={**env, **fault}, cwd=REPO, stdout=log, stderr=subprocess.STDOUT,
                                    start_new_session=True)  # fmt: skip
        if how == "external" and rng.random() < 0.5:
            deadline = time.monotonic() + rng.uniform(3, 20)  # a death within 20 s of the start
        else:  # within 20 s of the next commit (a backstop for the fault points, which kill themselves)
            before = committed_records(lake, ns)
            deadline = time.monotonic() + 300
            while time.monotonic() < deadline and proc.poll() is None and committed_records(lake, ns) == before:
                time.sleep(0.3)
            deadline = time.monotonic() + rng.uniform(0, 20 if how == "external" else 60)
        try:
            code = proc.wait(max(0.0, deadline - time.monotonic()))
            if code == -signal.SIGKILL:
                kills.append(how)  # the fault hook fired
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # python, spark-submit and the JVM at once: a hard crash
            proc.wait(30)
            kills.append(f"external after {how}" if how != "external" else how)
        progress.append(committed_records(lake, ns))
    final = subprocess.run(command, env=env, cwd=REPO, capture_output=True, text=True, timeout=1800, check=False)
    assert final.returncode == 0, f"seed {SEED} ({reader}): {final.stdout}\n{final.stderr[-4000:]}"
    return Chaos(reader, ns, topics, errors_topic, path, kills, progress, good, bad, produced,
                 time.monotonic() - started)  # fmt: skip


@pytest.fixture(scope="module")
def chaos_runs(stack, lake, tmp_path_factory):
    cache = {}

    def get(reader):
        if reader not in cache:
            cache[reader] = run_chaos(reader, stack, lake, tmp_path_factory.mktemp(f"chaos_{reader}"))
        return cache[reader]

    return get


def committed_offsets(lake, ns):
    """``{(topic, partition): next offset}`` of the table's newest commit marker."""
    catalog = lake.pyiceberg()
    if not catalog.table_exists(f"{ns}.events"):
        return {}
    snapshot = catalog.load_table(f"{ns}.events").current_snapshot()
    if snapshot is None:
        return {}
    offsets = json.loads(snapshot.summary.additional_properties.get("kafka-iceberg.offsets", "{}"))
    return {(t, int(p)): o for t, parts in offsets.items() for p, o in parts.items()}


def committed_records(lake, ns):
    """Records covered by the table's last commit marker (0 before the first commit)."""
    return sum(committed_offsets(lake, ns).values())


def _diagnosis(chaos, lake, records, published):
    """Where the duplicates sit in the error topic, the table's markers, and what each attempt logged."""
    counts = {c: published.count(c) for c in set(published)}
    twice = sorted(c for c, n in counts.items() if n > 1)
    at = {c: [r.offset for r, rc in zip(records, published, strict=True) if rc == c] for c in twice[:5]}
    markers = [
        (props(s).get("kafka-iceberg.batch-id"), props(s).get("kafka-iceberg.error-offsets"), s.snapshot_id)
        for s in snapshots(lake.pyiceberg(), f"{chaos.ns}.events")
        if "kafka-iceberg.batch-id" in props(s)
    ]
    logs = []
    for log in sorted(chaos.pipeline_file.parents[1].glob("attempt-*.log")):
        lines = [line for line in log.read_text(errors="replace").splitlines()
                 if "error topic" in line or "resuming" in line or "KAFKA_ICEBERG_FAULT" in line or "already" in line]  # fmt: skip
        logs.append(f"{log.name}: " + " | ".join(lines[-6:]))
    return f"{len(twice)} twice, e.g. {at}\nmarkers (batch, error offsets, snapshot): {markers}\n" + "\n".join(logs)


def _error_coordinates(records):
    return [
        (h["kafka_iceberg.errors.topic"].decode(), int(h["kafka_iceberg.errors.partition"]),
         int(h["kafka_iceberg.errors.offset"]))
        for h in (dict(m.headers) for m in records)
    ]  # fmt: skip


@pytest.mark.parametrize("reader", READERS_UNDER_TEST)
def test_crashes_neither_lose_nor_duplicate(chaos_runs, lake, stack, reader):
    chaos = chaos_runs(reader)
    where = f"seed {SEED} ({reader}, kills {chaos.kills}, progress {chaos.progress})"
    print(f"chaos {reader} seed {SEED}: {len(chaos.kills)} kills {chaos.kills} in {chaos.seconds:.0f}s")
    assert len(chaos.kills) >= KILLS, f"{where}: runs finished before they could be killed"
    total = 2 * PARTITIONS * chaos.per_partition
    # The crashes landed between commits, not only before the first or after the last one.
    assert any(0 < done < total for done in chaos.progress), where
    catalog = lake.pyiceberg()
    rows = coordinates(catalog, f"{chaos.ns}.events")
    assert len(rows) == len(set(rows)), f"{where}: duplicates in the table"
    assert set(rows) == chaos.good, f"{where}: table differs from the good records"

    records = consume_all(stack.kafka_bootstrap, chaos.errors_topic, timeout=120)
    published = _error_coordinates(records)
    assert len(published) == len(set(published)), f"{where}: duplicates in the error topic\n" + _diagnosis(
        chaos, lake, records, published
    )
    assert set(published) == chaos.bad, f"{where}: error topic differs from the bad records"
    quarantined = coordinates(catalog, f"{chaos.ns}.events_quarantine")
    assert len(quarantined) == len(set(quarantined)), f"{where}: duplicates in the quarantine table"
    assert set(quarantined) == chaos.bad, f"{where}: quarantine table differs from the bad records"

    # Lag 0: Spark's Kafka source commits no consumer group, so lag is read from the table's marker.
    ends = {(t, p): chaos.per_partition for t in chaos.topics for p in range(PARTITIONS)}
    assert committed_offsets(lake, chaos.ns) == ends, f"{where}: the table's marker lags"
    if reader == "direct":
        admin = AdminClient({"bootstrap.servers": stack.kafka_bootstrap})
        group = f"kafka-iceberg.chaos.{chaos.ns}.events"
        request = ConsumerGroupTopicPartitions(group, [TopicPartition(t, p) for t, p in ends])
        committed = admin.list_consumer_group_offsets([request])[group].result(timeout=10).topic_partitions
        assert {(tp.topic, tp.partition): tp.offset for tp in committed} == ends, f"{where}: the group lags"
    assert_verified(chaos.pipeline_file, READERS[reader])


def test_replay_of_a_capture_yields_the_same_table(chaos_runs, lake, stack, tmp_path):
    chaos = chaos_runs(READERS_UNDER_TEST[0])
    captured = tmp_path / "captured"
    for topic in chaos.topics:
        capture({"bootstrap.servers": stack.kafka_bootstrap}, topic, captured, records_per_file=50_000)
    local = (REPO / "environments" / "local.yml").read_text()
    replay_env = re.sub(r"(?m)^  reader: .*$", f"  reader: replay\n  replay_path: {captured}", local)
    assert replay_env != local
    ns = unique("replayed")
    text = pipeline(ns, chaos.topics, unique("replay_errors"), batch=20_000, quarantine=False)
    run_pipeline(tmp_path / "p", text.replace("pipeline: chaos", "pipeline: replayed"), env_name="replay",
                 extra_env={"replay": replay_env})  # fmt: skip
    fields = ("topic", "partition", "offset", "id", "note")
    direct = lake.pyiceberg().load_table(f"{chaos.ns}.events").scan(selected_fields=fields).to_arrow()
    replayed = lake.pyiceberg().load_table(f"{ns}.events").scan(selected_fields=fields).to_arrow()
    key = lambda t: sorted(zip(*(t.column(c).to_pylist() for c in fields), strict=True))  # noqa: E731
    assert key(replayed) == key(direct)
