"""Maintenance on the REST catalog over S3: many small commits in, one file out, rows unchanged,
old snapshots gone, offsets kept, orphans removed only past the age floor."""

from __future__ import annotations

import datetime as dt
import hashlib
import time
import uuid

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyarrow import fs

from kafka_iceberg.maintain import TableMaintainer
from kafka_iceberg.observe.eventlog import EventLog
from kafka_iceberg.spec.model import TableSpec
from kafka_iceberg.write import CommitMarker, TableWriter
from tests.support.store import object_store

pytestmark = pytest.mark.integration
COMMITS = 50


def checksum(arrow_table):
    rows = sorted(arrow_table.to_pylist(), key=lambda r: r["id"])
    return len(rows), hashlib.sha256(repr(rows).encode()).hexdigest()


def plant(filesystem, location, name):
    path = f"{location.removeprefix('s3://')}/data/{name}.parquet"
    pq.write_table(pa.table({"id": [0]}), path, filesystem=filesystem)
    return f"s3://{path}"


def test_maintain_compacts_expires_and_removes_old_orphans(lake):
    spark, ns = lake.spark, lake.new_namespace("maint")
    spec = TableSpec.model_validate(
        {
            "name": "events",
            "namespace": ns,
            "source": {"topics": ["events"], "format": "json"},
            "partition_window": "none",
            "maintenance": {"expire_snapshots": {"older_than_days": 0, "retain_last": 1}},
        }
    )
    writer = TableWriter(spark, lake.catalog, spec, pipeline_id="maint")
    for i in range(COMMITS):
        batch = spark.createDataFrame([(i * 10 + j, f"v{i}-{j}") for j in range(10)], "id BIGINT, value STRING")
        writer.commit(batch, CommitMarker(stream="direct", batch_id=i, offsets={"events": {0: (i + 1) * 10}}))
    table = lake.pyiceberg().load_table(f"{ns}.events")
    before = checksum(table.scan().to_arrow())
    files_before = len(table.inspect.files())
    assert files_before >= COMMITS and len(table.snapshots()) == COMMITS  # small batches, small files

    filesystem = object_store(lake.status)
    old_orphan = plant(filesystem, table.metadata.location, f"orphan-old-{uuid.uuid4().hex}")
    old_mtime = filesystem.get_file_info(old_orphan.removeprefix("s3://")).mtime
    time.sleep(2.5)  # S3 keeps whole seconds: the fresh orphan must be measurably younger
    fresh_orphan = plant(filesystem, table.metadata.location, f"orphan-fresh-{uuid.uuid4().hex}")
    # "Now" is just past the 4-day floor for the old orphan, and not yet for the fresh one.
    clock = lambda: old_mtime + dt.timedelta(days=4, seconds=1)  # noqa: E731

    reports = {r.action: r for r in TableMaintainer(spark, lake.catalog, spec, "maint", clock=clock).run()}
    assert all(r.error is None for r in reports.values()), reports
    assert reports["rewrite_data_files"].details["rewritten_data_files"] == files_before
    assert reports["rewrite_data_files"].details["added_data_files"] == 1

    table = lake.pyiceberg().load_table(f"{ns}.events")
    assert len(table.inspect.files()) == 1  # 500 tiny rows: far below the 256 MB target, so one file
    assert checksum(table.scan().to_arrow()) == before
    assert len(table.snapshots()) == 1 and reports["expire_snapshots"].details["expired_snapshots"] >= COMMITS
    # The snapshot maintenance left carries the stream's offsets: a restart resumes, not re-reads.
    last = writer.last_commit("direct")
    assert last.batch_id == COMMITS - 1 and last.offsets == {"events": {0: COMMITS * 10}}

    removed = reports["remove_orphan_files"].details["locations"]
    assert any(loc.endswith(old_orphan.rsplit("/", 1)[1]) for loc in removed)
    assert not any(loc.endswith(fresh_orphan.rsplit("/", 1)[1]) for loc in removed)
    assert filesystem.get_file_info(old_orphan.removeprefix("s3://")).type == fs.FileType.NotFound
    assert filesystem.get_file_info(fresh_orphan.removeprefix("s3://")).type == fs.FileType.File

    log = EventLog(spark, lake.catalog, f"{ns}.event_log")
    for report in reports.values():
        log.on_maintenance(report)
    assert log.flush() == 4
    events = lake.pyiceberg().load_table(f"{ns}.event_log").scan().to_arrow().to_pylist()
    assert sorted(e["action"] for e in events) == sorted(reports)
    assert all(e["kind"] == "maintenance" and e["table_name"] == f"{ns}.events" for e in events)


def test_every_writers_marker_survives_compaction_and_expiry(lake):
    """Two pipelines (and a second stream of one) commit to one table; compaction and
    ``expire_snapshots(retain_last=1)`` leave one snapshot, which holds every writer's newest marker."""
    spark, ns = lake.spark, lake.new_namespace("maint2")
    spec = TableSpec.model_validate(
        {
            "name": "events",
            "namespace": ns,
            "source": {"topics": ["events"], "format": "json"},
            "partition_window": "none",
            # remove_orphan_files is left out: it does not concern markers.
            "maintenance": {
                "expire_snapshots": {"older_than_days": 0, "retain_last": 1},
                "orphan_files": {"enabled": False},
            },
        }
    )
    writers = {p: TableWriter(spark, lake.catalog, spec, pipeline_id=p) for p in ("left", "right")}
    streams = [("left", "direct"), ("right", "direct"), ("left", "spark-old")]
    for i in range(3):
        for n, (pipeline, stream) in enumerate(streams):
            rows = spark.createDataFrame([(i * 100 + n * 10 + j, "v") for j in range(3)], "id BIGINT, value STRING")
            marker = CommitMarker(stream=stream, batch_id=i, offsets={f"{pipeline}-{stream}": {0: (i + 1) * 3}})
            writers[pipeline].commit(rows, marker)
    reports = TableMaintainer(spark, lake.catalog, spec, "left").run()
    assert all(r.error is None for r in reports), reports
    assert len(lake.pyiceberg().load_table(f"{ns}.events").metadata.snapshots) == 1
    for pipeline, stream in streams:
        last = writers[pipeline].last_commit(stream)
        assert last is not None, f"{pipeline}/{stream} lost its marker"
        assert (last.batch_id, dict(last.offsets)) == (2, {f"{pipeline}-{stream}": {0: 9}})
    # A second maintenance run copies the copies: still every marker.
    assert all(r.error is None for r in TableMaintainer(spark, lake.catalog, spec, "left").run())
    assert all(writers[p].last_commit(s) is not None for p, s in streams)
