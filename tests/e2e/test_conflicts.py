"""Conflicting writers on one table: maintenance compaction while ingestion commits, and two
pipelines writing the same table. Both end with every record present exactly once, and a restart
of the ingestion duplicates nothing. The snapshot log proves the writers really interleaved."""

from __future__ import annotations

import itertools
import json
import threading
import time

import pytest

from kafka_iceberg.maintain import TableMaintainer
from kafka_iceberg.spec.model import TableSpec
from tests.support.jobs import (
    BATCH_ID_KEY,
    COPIED_FROM_KEY,
    PIPELINE_KEY,
    Job,
    committed,
    coordinates,
    id_pipeline,
    props,
    snapshots,
)
from tests.support.kafka import create_topic, produce
from tests.support.project import project
from tests.support.run import unique
from tests.support.verify import assert_verified

pytestmark = [pytest.mark.integration, pytest.mark.slow]

PARTITIONS = 2
SEED, ROUNDS, PER_ROUND, EXTRA = 50, 16, 60, 30  # records per partition
BATCH = 100


class Topic:
    """A topic and every record produced to it, as (topic, partition, offset)."""

    def __init__(self, bootstrap, name):
        self.bootstrap, self.name, self.sent = bootstrap, name, {p: 0 for p in range(PARTITIONS)}
        create_topic(bootstrap, name, partitions=PARTITIONS)

    def send(self, count):
        for p in range(PARTITIONS):
            start = self.sent[p]
            values = [(None, json.dumps({"id": p * 1_000_000 + i})) for i in range(start, start + count)]
            produce(self.bootstrap, self.name, values, partition=p)
            self.sent[p] += count

    def trickle(self, rounds, per_round, pause):
        """Send ``rounds`` small rounds in a thread, so commits keep coming while something else runs."""

        def loop():
            for _ in range(rounds):
                self.send(per_round)
                time.sleep(pause)

        thread = threading.Thread(target=loop, daemon=True)
        thread.start()
        return thread

    @property
    def total(self):
        return sum(self.sent.values())

    def coordinates(self):
        return {(self.name, p, o) for p, n in self.sent.items() for o in range(n)}


def assert_exactly_once(catalog, table, *topics):
    rows = coordinates(catalog, table)
    assert len(rows) == len(set(rows)), "duplicates in the table"
    assert set(rows) == set().union(*(t.coordinates() for t in topics))


def test_compaction_during_ingestion_loses_and_duplicates_nothing(stack, lake, tmp_path):
    catalog = lake.pyiceberg()
    ns = unique("compact")
    table = f"{ns}.events"
    topic = Topic(stack.kafka_bootstrap, unique("compact"))
    topic.send(SEED)
    path = project(tmp_path, id_pipeline("compacted", ns, topic.name, batch=BATCH))
    spec = TableSpec.model_validate(
        {
            "name": "events",
            "namespace": ns,
            "source": {"topics": [topic.name], "format": "flatten"},
            "maintenance": {"expire_snapshots": {"older_than_days": 0, "retain_last": 1}},
        }
    )
    maintainer = TableMaintainer(lake.spark, lake.catalog, spec, "compacted")
    jobs, compactions = [], []
    try:
        job = Job(path, stack.run_dir, "ingest")
        jobs.append(job)
        job.wait_for(lambda: committed(catalog, table) > 0, "a first commit")
        producer = topic.trickle(ROUNDS, PER_ROUND, pause=1.0)
        # Compact over and over while the records keep arriving and being committed. Half-way, the
        # ingestion crashes and starts again: it resumes below whatever marker copies sit on top.
        deadline = time.monotonic() + 600
        while producer.is_alive() or committed(catalog, table) < topic.total:
            assert job.proc.poll() is None, job.stderr()[-3000:]
            assert time.monotonic() < deadline, f"{committed(catalog, table)} of {topic.total} committed"
            report = maintainer.compact()
            assert report.error is None, report.error
            compactions.append(report)
            if not report.details["rewritten_data_files"]:
                time.sleep(0.5)  # nothing new to compact yet
            if len(jobs) == 1 and committed(catalog, table) >= topic.total // 2:
                job.kill()
                job = Job(path, stack.run_dir, "after_crash")
                jobs.append(job)
        assert committed(catalog, table) == topic.total
        assert job.stop() == 0, job.stderr()[-3000:]
        history = snapshots(catalog, table)

        # Compacted, then every older snapshot expired: only the compaction's copy of the marker is
        # left to resume from, and the restart must still neither skip nor repeat a record.
        assert maintainer.compact().error is None
        assert maintainer.expire_snapshots().error is None
        (left,) = snapshots(catalog, table)
        assert left.summary.operation.value == "replace" and COPIED_FROM_KEY in props(left)
        topic.send(EXTRA)
        job = Job(path, stack.run_dir, "restart", "--available-now")
        jobs.append(job)
        assert job.proc.wait(600) == 0, job.stderr()[-3000:]
    finally:
        for job in jobs:
            job.kill()

    assert_exactly_once(catalog, table, topic)
    assert_verified(path)  # through compactions and expiry, every offset once
    # Interleaved for real: while both ran, the snapshot log alternates between ingestion commits and
    # compactions again and again (sequential runs would give one block of each). Sometimes a
    # compaction even ran while a commit landed: its marker copy is then older than its parent's.
    kinds = ["compaction" if s.summary.operation.value == "replace" else "ingestion" for s in history]
    blocks = [kind for kind, _ in itertools.groupby(kinds)]
    stale = [
        s
        for i, s in enumerate(history)
        if kinds[i] == "compaction" and int(props(s)[BATCH_ID_KEY]) < max_batch_before(history[:i])
    ]
    summary = f"{len(compactions)} compactions, {len(stale)} with a stale marker copy; log blocks {blocks}"
    assert blocks.count("compaction") >= 3 and blocks[0] == "ingestion", summary


def max_batch_before(history):
    """The highest batch id of the real (not copied) commit markers in ``history``."""
    return max(int(props(s)[BATCH_ID_KEY]) for s in history if COPIED_FROM_KEY not in props(s))


def test_two_pipelines_on_one_table_lose_and_duplicate_nothing(stack, lake, tmp_path):
    catalog = lake.pyiceberg()
    ns = unique("shared")
    table = f"{ns}.events"
    topics = {name: Topic(stack.kafka_bootstrap, unique(name)) for name in ("left", "right")}
    paths, jobs = {}, {}
    try:
        for name, topic in topics.items():
            topic.send(SEED)
            paths[name] = project(tmp_path / name, id_pipeline(name, ns, topic.name, batch=BATCH))
            # Both start at once: they race to create the namespace and the table, too.
            jobs[name] = Job(paths[name], stack.run_dir, "ingest")
        for name, job in jobs.items():
            job.wait_for(lambda name=name: committed(catalog, table, name) > 0, f"a first commit of {name}")
        producers = [topic.trickle(ROUNDS, PER_ROUND, pause=1.0) for topic in topics.values()]
        for producer in producers:
            producer.join()
        for name, job in jobs.items():
            total = topics[name].total
            job.wait_for(lambda name=name, total=total: committed(catalog, table, name) == total, f"all of {name}")
        for job in jobs.values():
            assert job.stop() == 0, job.stderr()[-3000:]
        concurrent_phase = len(snapshots(catalog, table))

        # A restart of either: new records of one, nothing new for the other.
        topics["left"].send(EXTRA)
        for name in ("left", "right"):
            jobs[name] = Job(paths[name], stack.run_dir, "restart", "--available-now")
            assert jobs[name].proc.wait(600) == 0, jobs[name].stderr()[-3000:]
    finally:
        for job in jobs.values():
            job.kill()

    assert_exactly_once(catalog, table, *topics.values())
    for path in paths.values():
        assert_verified(path)  # each pipeline's own offsets, from its own markers
    # Interleaved for real: while both ran, the snapshot log switched writer again and again (two
    # sequential runs would switch once).
    writers = [props(s).get(PIPELINE_KEY) for s in snapshots(catalog, table)[:concurrent_phase]]
    switches = sum(1 for a, b in itertools.pairwise(writers) if a != b)
    assert switches >= 4, writers
