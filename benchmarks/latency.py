"""Produce-to-visible latency of the local environment's reader under a ``processing_time`` trigger.

A flatten table (the 20-column schema, ``processing_time: "1 second"``) runs in a thread through
:func:`kafka_iceberg.run.run` with the ``local`` environment (Spark's Kafka source on the
local Apache Kafka broker; ``reader="direct"``: the direct reader). A producer sends timestamped
records at a steady rate. Afterwards every record's Kafka timestamp (CreateTime, taken by the
producer client at ``produce()``) is matched with the first snapshot whose commit marker covers
its offset:

- ``visible`` = when the runner's observer saw the batch report, i.e. right after the commit
  returned: from then on any reader loading the table sees the record (primary figure);
- ``snapshot`` = the snapshot's own ``timestamp-ms`` (taken by Iceberg just before the catalog
  commit; a slight underestimate, kept as a cross-check).
"""

from __future__ import annotations

import json
import random
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.datagen import BAD_SHARE, FLATTEN_COLUMNS, flatten_message
from benchmarks.framework import BENCH_ENV, NAMESPACE, bench_environment


@dataclass
class Seen:
    """Wall-clock time each committed snapshot was reported by the runner."""

    at: dict[int, float] = field(default_factory=dict)
    reports: list[Any] = field(default_factory=list)

    def __call__(self, report: Any) -> None:
        if report.snapshot_id is not None and report.snapshot_id not in self.at:
            self.at[report.snapshot_id] = time.time()
        self.reports.append(report)


def _produce(
    bootstrap: str, topic: str, rate: float, seconds: float, partitions: int, seed: int, bad_share: float
) -> int:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})  # no batching delay: latency
    rng = random.Random(seed)
    sent, started = 0, time.monotonic()
    while (elapsed := time.monotonic() - started) < seconds:
        due = int(elapsed * rate) + 1
        while sent < due:
            value, _kind = flatten_message(rng, sent, False, bad_share)
            producer.produce(topic, value=value, key=str(sent).encode(), partition=sent % partitions)
            producer.poll(0)
            sent += 1
        time.sleep(max(0.0, (sent / rate) - (time.monotonic() - started)))
    producer.flush(30)
    return sent


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def measure_latency(
    work: Path,
    stack_status: dict[str, Any],
    *,
    rate: float = 200.0,
    seconds: float = 30.0,
    interval: str = "1 second",
    bad_share: float = BAD_SHARE,
    decoder: str = "auto",
    reader: str = "spark",
) -> dict[str, Any]:
    """Run the measurement; returns percentiles and how they were taken.

    ``reader``: the local environment's ``kafka.reader``, ``spark`` (as on Databricks) or ``direct``.
    """
    import shutil

    from confluent_kafka.admin import AdminClient, NewTopic

    from kafka_iceberg.local.readback import pyiceberg_catalog
    from kafka_iceberg.observe.metrics import Metrics
    from kafka_iceberg.observe.progress import Progress
    from kafka_iceberg.run import Observers, open_session, prepare, run

    bootstrap = stack_status["kafka"]["bootstrap"]
    tag = f"{int(time.time()) % 10**6}"
    topic, name, partitions = f"bench_latency_{tag}", f"latency_{tag}", 2
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)]).values():
        future.result(timeout=10)
    project = work / f"project_{name}"
    shutil.rmtree(project, ignore_errors=True)
    bench_environment(project, f"reader: {reader}")
    (project / "pipelines").mkdir()
    spec = {
        "name": name,
        "namespace": NAMESPACE,
        "source": {"topics": [topic], "format": "flatten", "decoder": decoder},
        "schema": {"columns": dict(FLATTEN_COLUMNS)},
        "schema_evolution": "strict",
        "errors": {"skip_error": True},
        "trigger": {"processing_time": interval},
    }
    import yaml

    path = project / "pipelines" / "p.yml"
    path.write_text(yaml.safe_dump({"pipeline": f"p_{name}", "catalog": "lake", "tables": [spec]}))
    prepared = prepare(path, env_name=BENCH_ENV)
    assert prepared.env.kafka.reader == reader, f"{BENCH_ENV}: reader {prepared.env.kafka.reader}, not {reader}"
    spark = open_session(prepared)
    seen = Seen()
    observers = Observers(Metrics(), Progress(enabled=False))
    stop = threading.Event()
    failure: list[BaseException] = []

    def target() -> None:
        try:
            run(prepared, spark, stop=stop, observers=_Both(observers, seen))
        except BaseException as exc:
            failure.append(exc)

    runner = threading.Thread(target=target, name="latency-runner", daemon=True)
    runner.start()
    catalog = pyiceberg_catalog(stack_status)
    deadline = time.monotonic() + 120
    while not catalog.table_exists(f"{NAMESPACE}.{name}") and time.monotonic() < deadline and not failure:
        time.sleep(0.2)
    # Warm-up: a few records through one full batch before the measured stream starts.
    warm = _produce(bootstrap, topic, rate=50, seconds=1.0, partitions=partitions, seed=1, bad_share=bad_share)
    while sum(r.records_in for r in seen.reports) < warm and time.monotonic() < deadline and not failure:
        time.sleep(0.2)
    measured_from = time.time()
    sent = _produce(bootstrap, topic, rate=rate, seconds=seconds, partitions=partitions, seed=2, bad_share=bad_share)
    total = warm + sent
    deadline = time.monotonic() + 120
    while sum(r.records_in for r in seen.reports) < total and time.monotonic() < deadline and not failure:
        time.sleep(0.2)
    stop.set()
    runner.join(120)
    if failure:
        raise RuntimeError(f"latency run failed: {failure[0]!r}")

    table = catalog.load_table(f"{NAMESPACE}.{name}")
    snaps = []
    for snap in table.snapshots():
        extra = snap.summary.additional_properties if snap.summary is not None else {}
        offsets = json.loads(extra.get("kafka-iceberg.offsets", "{}")).get(topic, {})
        snaps.append((snap.sequence_number or 0, snap.snapshot_id, snap.timestamp_ms, offsets))
    snaps.sort()
    rows = table.scan(selected_fields=("partition", "offset", "timestamp")).to_arrow().to_pylist()
    visible, snapshot = [], []
    for row in rows:
        produced = row["timestamp"].timestamp()
        if produced < measured_from:
            continue  # warm-up records
        for _seq, snap_id, ts_ms, offsets in snaps:
            if int(offsets.get(str(row["partition"]), 0)) > row["offset"]:
                snapshot.append(ts_ms / 1000 - produced)
                if snap_id in seen.at:
                    visible.append(seen.at[snap_id] - produced)
                break
    batches = [r for r in seen.reports if r.records_in]
    return {
        "method": (
            "records produced at a steady rate to the local Apache Kafka broker while a processing_time table runs "
            "in a thread; latency = time the runner reported the commit holding the record (after the "
            "catalog commit returned) minus the record's Kafka CreateTime; 'snapshot' uses the snapshot's "
            "timestamp-ms instead"
        ),
        "trigger": interval,
        "bad_share": bad_share,
        "decoder": decoder,
        "reader": reader,
        "rate_records_per_s": rate,
        "produce_seconds": seconds,
        "records_measured": len(visible),
        "batches": len(batches),
        "avg_batch_records": round(sum(r.records_in for r in batches) / len(batches), 1) if batches else 0,
        "avg_batch_seconds": round(sum(r.batch_latency_s for r in batches) / len(batches), 3) if batches else 0,
        "visible_p50_s": round(_percentile(visible, 50), 3) if visible else None,
        "visible_p95_s": round(_percentile(visible, 95), 3) if visible else None,
        "visible_max_s": round(max(visible), 3) if visible else None,
        "snapshot_p50_s": round(_percentile(snapshot, 50), 3) if snapshot else None,
        "snapshot_p95_s": round(_percentile(snapshot, 95), 3) if snapshot else None,
    }


@dataclass
class _Both:
    """Observers plus the latency probe, as one observer."""

    observers: Any
    seen: Seen

    def __call__(self, report: Any) -> None:
        self.observers(report)
        self.seen(report)

    @property
    def metrics(self) -> Any:
        """The run's metrics (the streaming loop reads Spark's progress into them)."""
        return self.observers.metrics

    def close(self) -> None:
        self.observers.close()
