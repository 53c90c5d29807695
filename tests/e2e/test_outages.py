"""Outages: the REST catalog, the object store or the broker stops mid-run. The job retries a
bounded number of times with backoff, then fails with one line naming the service; once the
service is back, a rerun completes with every record in the table exactly once.

The services belong to a split stack of this module (each its own process, stopped and started by
PID); the session's stack is never touched."""

from __future__ import annotations

import json
import re

import pytest
import yaml

from kafka_iceberg.local import processes
from kafka_iceberg.local.readback import pyiceberg_catalog
from kafka_iceberg.local.stack import LocalStack
from tests.support.jobs import Job, committed, coordinates, id_pipeline
from tests.support.kafka import create_topic, produce
from tests.support.project import project
from tests.support.run import unique
from tests.support.verify import assert_verified

pytestmark = [pytest.mark.integration, pytest.mark.slow]

RETRIES = 2
OUTAGE_RETRY = {"num_retries": RETRIES, "min_wait_ms": 300, "max_wait_ms": 5000}
MIN_WAIT_S = OUTAGE_RETRY["min_wait_ms"] / 1000
PARTITIONS, HALF, BATCH = 2, 400, 100  # per partition: one half before the outage, one after
# How the final error names each service of the stack ({...}: its endpoint).
NAMES = {
    "catalog": "the catalog (catalog lake, {catalog})",
    "s3": "the object store (storage of catalog lake, {s3})",
    "kafka": "the Kafka broker (kafka, {kafka})",
}
RETRY_LINE = re.compile(r"outage retry (\d+)/(\d+) in ([\d.]+)s")


@pytest.fixture(scope="module")
def split_stack(tmp_path_factory):
    local = LocalStack(tmp_path_factory.mktemp("outage_stack"), split=True)
    first = local.up(owned=True)
    yield local
    last = local.read_state()
    local.down()
    servers = [*first.services.values(), *(last.services.values() if last else [])]
    leftovers = [s.name for s in servers if processes.is_ours(s.pid, s.executable, s.marker)]
    assert not leftovers, f"servers still running after the module: {leftovers}"


def make_project(tmp_path, ns, topic, service):
    path = project(tmp_path, id_pipeline(f"outage_{service}", ns, topic, batch=BATCH))
    env_file = tmp_path / "environments" / "local.yml"
    env = yaml.safe_load(env_file.read_text())
    env["outage_retry"] = OUTAGE_RETRY
    # Each S3 call gives up at once: the outage retry under test does the waiting, and the test stays short.
    env["catalogs"]["lake"]["properties"] = {"s3.retry.num-retries": "0"}
    # Spark's Kafka source waits 60 s per offset request and retries it 3 times by default: bounded
    # here too, so that the run's own outage retry is what the test measures.
    env["kafka"]["spark_options"] = {
        "kafka.default.api.timeout.ms": "5000",
        "kafka.request.timeout.ms": "5000",
        "fetchOffset.numRetries": "1",
    }
    env_file.write_text(yaml.safe_dump(env, sort_keys=False))
    return path


def produce_half(bootstrap, topic, half):
    for p in range(PARTITIONS):
        start = half * HALF
        produce(bootstrap, topic, [(None, json.dumps({"id": p * 10_000 + i})) for i in range(start, start + HALF)],
                partition=p)  # fmt: skip


@pytest.mark.parametrize("service", ["catalog", "s3", "kafka"])
def test_an_outage_retries_with_backoff_fails_clearly_and_a_rerun_completes_exactly_once(
    service, split_stack, tmp_path, monkeypatch
):
    state = split_stack.read_state()
    status = state.describe()
    catalog = pyiceberg_catalog(status)
    ns, topic = unique(f"outage_{service}"), unique(f"outage_{service}")
    table = f"{ns}.events"
    create_topic(state.kafka_bootstrap, topic, partitions=PARTITIONS)
    produce_half(state.kafka_bootstrap, topic, 0)
    path = make_project(tmp_path, ns, topic, service)
    jobs = []
    try:
        job = Job(path, state.run_dir, "first")
        jobs.append(job)
        job.wait_for(lambda: committed(catalog, table) > 0, "a first commit")
        split_stack.stop_service(service)
        if service != "kafka":
            # Records the job must write while the service is down (Spark's Kafka source may have
            # drained the first half already; an idle job touches neither catalog nor store).
            produce_half(state.kafka_bootstrap, topic, 1)

        assert job.proc.wait(600) == 1, job.stderr()[-3000:]
        stderr = job.stderr()
        final = [line for line in stderr.splitlines() if line.startswith("error:")]
        name = NAMES[service].format(catalog=state.catalog_uri, s3=state.s3_endpoint, kafka=state.kafka_bootstrap)
        assert len(final) == 1, stderr[-3000:]
        assert final[0].startswith(f"error: SERVICE UNAVAILABLE: {name} did not answer: "), final[0]
        assert f"Gave up after {RETRIES} retries with backoff (outage_retry: num_retries={RETRIES}" in final[0]
        assert "Traceback (most recent call last)" not in stderr
        # Bounded, and backing off: the last outage's retries are 1..RETRIES, each wait doubling.
        retries = [(int(n), int(total), float(wait)) for n, total, wait in RETRY_LINE.findall(stderr)]
        assert retries and all(total == RETRIES and 1 <= n <= RETRIES for n, total, _w in retries), retries
        assert [n for n, _t, _w in retries[-RETRIES:]] == list(range(1, RETRIES + 1)), retries
        for n, _total, wait in retries[-RETRIES:]:
            base = MIN_WAIT_S * 2 ** (n - 1)
            assert base <= wait <= base * 1.1 + 0.05, retries

        split_stack.start_service(service)
        at_failure = committed(catalog, table)
        assert 0 < at_failure < 2 * PARTITIONS * HALF, f"the outage did not hit mid-run: {at_failure} committed"

        if service == "kafka":
            produce_half(state.kafka_bootstrap, topic, 1)  # after a broker restart, offsets go on
        job = Job(path, state.run_dir, "rerun")
        jobs.append(job)
        job.wait_for(lambda: committed(catalog, table) == 2 * PARTITIONS * HALF, "every record committed")
        assert job.stop() == 0, job.stderr()[-3000:]
    finally:
        for job in jobs:
            job.kill()
        split_stack.start_service(service)

    rows = coordinates(catalog, table)
    assert len(rows) == len(set(rows)), "duplicates in the table"
    assert set(rows) == {(topic, p, o) for p in range(PARTITIONS) for o in range(2 * HALF)}
    ids = catalog.load_table(table).scan(selected_fields=("id",)).to_arrow().column("id").to_pylist()
    assert sorted(ids) == sorted(p * 10_000 + i for p in range(PARTITIONS) for i in range(2 * HALF))
    monkeypatch.setenv("KAFKA_ICEBERG_RUN_DIR", str(state.run_dir))  # verify reads this split stack
    assert_verified(path)
