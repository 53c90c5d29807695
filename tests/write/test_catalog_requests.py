"""What one batch asks of the REST catalog, counted on the wire.

On a cluster every catalog request is a signed round trip to a remote service (S3 Tables bills
them), answered with the table's whole metadata file, which grows with its snapshots; with a
``processing_time`` of seconds they are a visible part of every batch's latency. A counting proxy
in front of the local stack's SigV4-signed catalog sees what the writer sends.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlparse

import pytest

from kafka_iceberg.catalogs import render
from kafka_iceberg.local.profile import local_catalog_profile
from kafka_iceberg.run.batch import BatchProcessor
from kafka_iceberg.session import attach_catalogs
from kafka_iceberg.spec.model import TableSpec
from kafka_iceberg.write import TableWriter
from kafka_iceberg.write.marker import BATCH_ID_KEY
from tests.decode.conftest import KAFKA_SCHEMA, Msg, kafka_rows
from tests.support.http_count import CountingProxy

pytestmark = pytest.mark.integration
COUNTED = "counted"
QUIET = "counted_quiet"  # the same, with no commit reports
STREAM = "requests-stream"


@pytest.fixture(scope="module")
def proxy(lake: Any) -> Iterator[CountingProxy]:
    """The local catalog attached once more, as ``counted`` and ``counted_quiet``, through a counting proxy."""
    upstream = urlparse(lake.status["catalog"]["uri"])
    with CountingProxy((str(upstream.hostname), int(upstream.port or 80))) as counting:
        profile = local_catalog_profile().model_copy(update={"uri": counting.url})
        quiet = profile.model_copy(update={"properties": {"rest-metrics-reporting-enabled": "false"}})
        attach_catalogs(lake.spark, [render(COUNTED, profile), render(QUIET, quiet)], lake.resolver)
        yield counting


def batch(spark: Any, first_id: int) -> Any:
    values = [json.dumps({"id": first_id + i, "note": f"n{i}"}) for i in range(3)] + ["not json"]
    messages = [Msg(None, v, offset=first_id + i) for i, v in enumerate(values)]
    return spark.createDataFrame(kafka_rows(messages), KAFKA_SCHEMA)


@pytest.mark.parametrize(
    ("fmt", "engine", "catalog"),
    [
        ("json", "arrow", COUNTED),
        ("flatten", "arrow", COUNTED),
        ("flatten", "spark", COUNTED),
        ("json", "arrow", QUIET),
    ],
    ids=["json-arrow-where-parsed", "flatten-arrow", "flatten-spark", "no-commit-report"],
)
def test_a_batch_loads_its_table_twice_and_commits_once(lake, proxy, fmt, engine, catalog):
    """Once when the batch starts, once to check the markers right before the commit, then Iceberg's
    own commit requests: no namespace check, no load of ours after the commit (12-13 requests before)."""
    ns = lake.new_namespace("req")
    spec = TableSpec.model_validate(
        {
            "name": "events",
            "namespace": ns,
            # json: the Arrow decoder's records written where parsed, the bad one through Spark's (two jobs)
            "source": {"topics": ["t"], "format": fmt, **({"decoder": "arrow"} if fmt == "json" else {})},
            **({"schema": {"columns": {"id": "long", "note": "string"}}} if fmt == "flatten" else {}),
            "partition_window": "none",
            "errors": {"skip_error": True},
            "write": {"engine": engine},
        }
    )
    processor = BatchProcessor(lake.spark, "unit", spec, catalog)
    processor.resume(STREAM)
    processor.process(batch(lake.spark, 0), batch_id=0, stream=STREAM)  # creates the table
    proxy.take()

    for batch_id in (1, 2):
        report = processor.process(batch(lake.spark, 10 * batch_id), batch_id=batch_id, stream=STREAM)
        requests = [(method, path.split("/namespaces/", 1)[1]) for method, path in proxy.take()]
        table = f"{ns}/tables/events"
        assert requests == [
            ("GET", table),  # the batch's load: markers, schema, plan, where the files go
            ("GET", table),  # the markers again, right before the commit
            ("GET", table),  # Iceberg's commit: the metadata it commits on,
            ("POST", table),  # the commit,
            ("GET", table),  # the metadata after it (to find its snapshot among newer ones),
            *([("POST", f"{table}/metrics")] if catalog == COUNTED else []),  # and its commit report
        ], "\n".join(map(str, requests))
        assert report.committed and report.records_written == 3 and report.records_skipped == 1

    table = lake.pyiceberg().load_table(f"{ns}.events")
    assert sorted(table.scan(selected_fields=("offset",)).to_arrow().column("offset").to_pylist()) == [
        0, 1, 2, 10, 11, 12, 20, 21, 22,
    ]  # fmt: skip
    summary = table.current_snapshot().summary
    assert summary[BATCH_ID_KEY] == "2"


def test_a_batch_that_quarantines_loads_the_quarantine_table_twice_and_commits_once(lake, proxy):
    """The quarantine table is read like the target: once when its append starts (the marker it
    de-duplicates on, its schema, where its file goes), once more right before its commit, then
    Iceberg's commit. Its writer lives as long as the run: one made per batch loaded it four times
    before the commit (the marker, the plan, the file's target, the marker again)."""
    ns = lake.new_namespace("reqq")
    spec = TableSpec.model_validate(
        {
            "name": "events",
            "namespace": ns,
            "source": {"topics": ["t"], "format": "flatten"},
            "schema": {"columns": {"id": "long", "note": "string"}},
            "partition_window": "none",
            "expectations": {"even": {"expr": "id % 2 = 0", "on_violation": "quarantine"}},
            "errors": {"skip_error": True, "quarantine_table": f"{ns}.events_quarantine"},
        }
    )
    processor = BatchProcessor(lake.spark, "unit", spec, QUIET)
    processor.resume(STREAM)
    processor.process(batch(lake.spark, 0), batch_id=0, stream=STREAM)  # creates both tables
    proxy.take()

    quarantine = f"{ns}/tables/events_quarantine"
    for batch_id in (1, 2):
        report = processor.process(batch(lake.spark, 10 * batch_id), batch_id=batch_id, stream=STREAM)
        requests = [(method, path.split("/namespaces/", 1)[1]) for method, path in proxy.take()]
        assert [r for r in requests if r[1] == quarantine] == [
            ("GET", quarantine),  # the append's load: its marker, schema, plan, where the file goes
            ("GET", quarantine),  # the marker again, right before the commit
            ("GET", quarantine),  # Iceberg's commit: the metadata it commits on,
            ("POST", quarantine),  # the commit,
            ("GET", quarantine),  # the metadata after it
        ], "\n".join(map(str, requests))
        # the odd id failed the expectation; the record that is no JSON goes to the error target, the same table
        assert report.committed and report.records_quarantined == 2 and report.records_written == 2

    quarantined = lake.pyiceberg().load_table(f"{ns}.events_quarantine").scan().to_arrow()
    assert sorted(quarantined.column("offset").to_pylist()) == [1, 3, 11, 13, 21, 23]
    assert lake.pyiceberg().load_table(f"{ns}.events_quarantine").current_snapshot().summary[BATCH_ID_KEY] == "2"


def test_each_read_outside_a_batch_loads_the_table_once(lake, proxy):
    """``exists`` loads a table the catalog names (a dropped one is only told apart so); each read
    that asks it first (``plan``, as ``kafka-iceberg plan`` makes it; ``last_commit``, as a run
    resumes a stream; ``current_schema``) runs inside ``TableWriter.batch()``, so that load is the
    one it reads: one request each, not two."""
    ns = lake.new_namespace("reqp")
    spec = TableSpec.model_validate(
        {"name": "events", "namespace": ns, "source": {"topics": ["t"], "format": "json"}, "partition_window": "none"}
    )
    writer = TableWriter(lake.spark, QUIET, spec, pipeline_id="unit")
    writer.apply(writer.plan(batch(lake.spark, 0).schema))
    lake.spark.catalog.tableExists(writer.table)  # Spark's catalog caches the table, as a session that saw it has
    table = f"{ns}/tables/events"
    proxy.take()

    def requests():
        return [(m, p.split("/namespaces/", 1)[1]) for m, p in proxy.take()]

    assert not writer.plan(batch(lake.spark, 0).schema).changes
    assert requests() == [("GET", table)]
    assert BatchProcessor(lake.spark, "unit", spec, QUIET).resume(STREAM) is None  # no marker yet
    assert requests() == [("GET", table)]
    assert writer.current_schema() is not None
    assert requests() == [("GET", table)]
