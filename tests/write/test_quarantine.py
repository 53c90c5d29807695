"""The quarantine table, appended exactly once per source record, from a DataFrame or from rows the
single pass already brought to the driver: the same table either way."""

from __future__ import annotations

import time
import uuid

import pytest

from kafka_iceberg.spec.model import TableSpec
from kafka_iceberg.write.quarantine import QUARANTINE_STREAM, QuarantineTable
from kafka_iceberg.write.writer import TableWriter
from tests.support.frames import error_frame
from tests.support.spy import spark_jobs

BAD = [
    ("src", 1, 7, b"k7", b"{bad", [("trace", b"abc")], "invalid JSON", "decode"),
    ("src", 0, 3, None, b"\xff\xfe", None, "invalid UTF-8 in value", "decode"),
    ("src", 0, 5, b"k5", b'{"id": 0}', None, "expectation positive failed: id > 0", "expectation:positive"),
]


def quarantine(spark, catalog, ns):
    spec = TableSpec.model_validate(
        {"name": "t", "namespace": ns, "source": {"topics": ["src"], "format": "json"},
         "errors": {"quarantine_table": f"{ns}.t_quarantine"}}
    )  # fmt: skip
    return QuarantineTable(spark, catalog, spec, pipeline="p")


def contents(spark, catalog, ns):
    table = spark.table(f"{catalog}.{ns}.t_quarantine")
    rows = table.orderBy("partition", "offset").collect()
    shape = [(f.name, f.dataType.simpleString(), f.nullable) for f in table.schema.fields]
    return shape, [
        (r.partition, r.offset, r.key, r.value, r._error, r._error_stage, r.timestamp, r._batch_id) for r in rows
    ]


@pytest.fixture(params=["frame", "driver rows"])
def form(request):
    return request.param


@pytest.fixture
def away_from_utc(monkeypatch):
    """The driver's Python in New York, as on a laptop: rows collected there carry New York wall times."""
    monkeypatch.setenv("TZ", "America/New_York")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def test_rows_on_the_driver_make_the_same_table_and_replays_add_nothing_twice(
    spark, files_catalog, form, away_from_utc
):
    ns_frame, ns_form = f"qf_{uuid.uuid4().hex[:8]}", f"qr_{uuid.uuid4().hex[:8]}"
    for ns in (ns_frame, ns_form):
        spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {files_catalog}.{ns}")
    as_given = (lambda rows: error_frame(spark, rows)) if form == "frame" else (
        lambda rows: error_frame(spark, rows).collect())  # fmt: skip

    reference = quarantine(spark, files_catalog, ns_frame)
    assert reference.append(error_frame(spark, BAD), batch_id=1) == 3

    table = quarantine(spark, files_catalog, ns_form)
    first, again = as_given(BAD[:2]), as_given(BAD)
    with spark_jobs(spark) as jobs:
        assert table.append(first, batch_id=1) == 2
        # The batch again after a crash, with a different boundary: only the record not quarantined yet is added.
        assert table.append(again, batch_id=1) == 1
        assert table.append(again, batch_id=2) == 0
    # Rows already on the driver are written there, with pyarrow, and committed without a Spark job.
    assert (len(jobs) == 0) == (form == "driver rows"), jobs

    want_shape, want_rows = contents(spark, files_catalog, ns_frame)
    shape, rows = contents(spark, files_catalog, ns_form)
    assert shape == want_shape  # columns, types and nullability
    assert [r[:7] for r in rows] == [r[:7] for r in want_rows]  # the records' timestamps included
    assert [r[0:2] for r in rows] == [(0, 3), (0, 5), (1, 7)]
    writer = TableWriter(spark, files_catalog, table.writer.spec, pipeline_id="p")
    marker = writer.last_commit(QUARANTINE_STREAM)
    assert marker is not None and marker.offsets == {"src": {0: 6, 1: 8}} and marker.batch_id == 1
