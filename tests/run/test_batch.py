"""BatchProcessor: the order of a batch's steps, and a crash between each pair, against a files catalog.

The order *is* the exactly-once guarantee: bad records are routed (here to a quarantine table) before
the table commit that carries the batch's offsets, so a crash anywhere leaves either nothing of the
batch or its routed records without its rows — and the source's redelivery, processed by a fresh
processor (a restarted job), completes it without a second copy of anything. The crash is
``faults.reached`` raising instead of killing the process; everything in memory is dropped with the
processor, as a restart would.
"""

from __future__ import annotations

import json
import random
import tempfile
import uuid
from pathlib import Path
from typing import Any

import pytest

from kafka_iceberg import faults
from kafka_iceberg.checks.error_topic import H_OFFSET, H_PARTITION, ErrorTopicPublisher
from kafka_iceberg.run import batch as batch_module
from kafka_iceberg.run.batch import BatchProcessor
from kafka_iceberg.spec.model import TableSpec
from kafka_iceberg.write.marker import DROPPED
from tests.decode.conftest import KAFKA_SCHEMA, Msg, kafka_rows
from tests.support.kafka import consume_all
from tests.support.spy import spark_jobs

STREAM = "unit-stream"


class Crash(BaseException):
    """The process died here (BaseException: nothing in the processor may swallow it)."""


def spec(ns: str, **overrides: Any) -> TableSpec:
    return TableSpec.model_validate(
        {
            "name": "events",
            "namespace": ns,
            "source": {"topics": ["t"], "format": "flatten"},
            "schema": {"columns": {"id": "long", "note": "string"}},
            "schema_evolution": "strict",
            "partition_window": "none",
            "expectations": {"positive": {"expr": "id > 0", "on_violation": "quarantine"}},
            "errors": {"quarantine_table": f"{ns}.events_quarantine"},
        }
        | overrides
    )


MESSAGES = [
    Msg(None, json.dumps({"id": 1, "note": "a"})),
    Msg(None, "not json"),  # decode error → quarantine
    Msg(None, json.dumps({"id": 2, "note": "b"})),
    Msg(None, json.dumps({"id": 0, "note": "zero"})),  # expectation → quarantine
    Msg(None, json.dumps({"id": 3, "note": "c"})),
]
OFFSETS = {"t": {0: len(MESSAGES)}}
# The same batch as plain Avro (a schema file, no registry), for the Arrow writer's Avro pass.
AVRO_SCHEMA = {
    "type": "record",
    "name": "Event",
    "fields": [{"name": "id", "type": "long"}, {"name": "note", "type": "string"}],
}


def avro_messages() -> list[Msg]:
    import io

    import fastavro

    parsed = fastavro.parse_schema(AVRO_SCHEMA)
    out = []
    for m in MESSAGES:
        try:
            doc = json.loads(m.value)
        except ValueError:
            out.append(Msg(None, b"\xff"))  # an unfinished varint: does not decode
            continue
        buffer = io.BytesIO()
        fastavro.schemaless_writer(buffer, parsed, doc)
        out.append(Msg(None, buffer.getvalue()))
    return out


def avro_spec(ns: str, schema_file: Any) -> TableSpec:
    source = {"topics": ["t"], "format": "avro", "avro": {"schema_file": str(schema_file)}}
    return spec(ns, source=source, schema=None, write={"engine": "arrow"})


def rows_of(spark: Any, identifier: str) -> list[tuple[int, int]]:
    if not spark.catalog.tableExists(identifier):
        return []
    return sorted((r["partition"], r["offset"]) for r in spark.table(identifier).collect())


def process(
    spark: Any, catalog: str, ns: str, steps: list[str], crash_at: str | None = None, engine: str = "spark"
) -> None:
    """One batch through a fresh processor (a fresh process), recording its steps; may crash.

    ``engine``: the writer, or ``upsert``: Spark's MERGE of rows the Arrow decoder made where it parsed
    them, or ``avro``: the Arrow writer's tasks decoding plain Avro and writing it (schema file in ``ns``'s
    directory under the temporary directory).
    """
    messages = MESSAGES
    if engine == "upsert":
        table = spec(ns, commit_mode="upsert", key_fields=["id"])
    elif engine == "avro":
        schema_file = Path(tempfile.gettempdir()) / f"{ns}.avsc"
        schema_file.write_text(json.dumps(AVRO_SCHEMA))
        table, messages = avro_spec(ns, schema_file), avro_messages()
    else:
        table = spec(ns, write={"engine": engine})
    processor = BatchProcessor(spark, "unit", table, catalog)
    processor.resume(STREAM)
    writer = processor.writer
    commit = writer.commit

    def traced_commit(rows: Any, marker: Any, **kwargs: Any) -> Any:
        steps.append("commit table")
        return commit(rows, marker, **kwargs)

    writer.commit = traced_commit  # type: ignore[method-assign]
    where_parsed = writer.write_where_parsed

    def traced_where_parsed(*args: Any, **kwargs: Any) -> Any:
        steps.append("decoded")  # the Avro batch decoded and written by the same tasks
        return where_parsed(*args, **kwargs)

    if engine == "avro":
        writer.write_where_parsed = traced_where_parsed  # type: ignore[method-assign]
    raw = spark.createDataFrame(kafka_rows(messages), KAFKA_SCHEMA)
    with pytest.MonkeyPatch.context() as patch:

        def reached(point: str) -> None:
            steps.append(point)
            if point == crash_at:
                raise Crash(point)

        patch.setattr(faults, "reached", reached)
        parse = batch_module.rows_where_parsed

        def parsed(*args: Any, **kwargs: Any) -> Any:
            steps.append("parsed")  # the upsert's rows made where the Arrow decoder parsed them
            return parse(*args, **kwargs)

        patch.setattr(batch_module, "rows_where_parsed", parsed)
        processor.process(raw, batch_id=0, stream=STREAM, offsets=OFFSETS)


@pytest.mark.parametrize("engine", ["spark", "arrow", "avro"])
def test_bad_records_are_routed_before_the_table_commit_and_the_marker_comes_with_it(spark, files_catalog, engine):
    ns = f"bp_{uuid.uuid4().hex[:8]}"
    steps: list[str] = []
    process(spark, files_catalog, ns, steps, engine=engine)
    # Route bad records (the quarantine commit) → commit the table with the marker → acknowledge. The
    # Arrow writer's single pass writes the data files first, in the job that sorts out the bad records.
    first = {"arrow": ["written"], "avro": ["decoded", "written"]}.get(engine, [])
    assert steps == [*first, "quarantined", "commit table", "committed"]
    assert rows_of(spark, f"{files_catalog}.{ns}.events") == [(0, 0), (0, 2), (0, 4)]
    assert rows_of(spark, f"{files_catalog}.{ns}.events_quarantine") == [(0, 1), (0, 3)]
    marker = BatchProcessor(spark, "unit", spec(ns), files_catalog).resume(STREAM)
    assert marker is not None and marker.batch_id == 0 and marker.offsets == OFFSETS


@pytest.mark.parametrize(
    ("crash_at", "engine"),
    [("quarantined", "spark"), ("committed", "spark"), ("written", "arrow"), ("quarantined", "arrow"),
     ("committed", "arrow"), ("quarantined", "upsert"), ("committed", "upsert"), ("quarantined", "avro"),
     ("written", "avro"), ("committed", "avro")],
)  # fmt: skip
def test_a_crash_between_two_steps_then_the_redelivered_batch_leaves_one_copy(spark, files_catalog, crash_at, engine):
    ns = f"bp_{uuid.uuid4().hex[:8]}"
    crashed: list[str] = []
    with pytest.raises(Crash):
        process(spark, files_catalog, ns, crashed, crash_at=crash_at, engine=engine)
    assert crashed[-1] == crash_at
    table, quarantine = f"{files_catalog}.{ns}.events", f"{files_catalog}.{ns}.events_quarantine"
    committed = crash_at == "committed"
    # Between the quarantine and the table commit: the bad records are in, the batch's rows are not.
    assert rows_of(spark, table) == ([(0, 0), (0, 2), (0, 4)] if committed else [])
    assert rows_of(spark, quarantine) == ([] if crash_at == "written" else [(0, 1), (0, 3)])

    again: list[str] = []
    process(spark, files_catalog, ns, again, engine=engine)  # the restarted job gets the same batch again
    # A batch already in the table is left alone; one whose commit was lost is completed, its bad
    # records found in the quarantine table already (nothing new quarantined, so no "quarantined").
    redone = ["quarantined"] if crash_at == "written" else []
    written = {"arrow": ["written"], "upsert": ["parsed"], "avro": ["decoded", "written"]}.get(engine, [])
    assert again == ([] if committed else [*written, *redone, "commit table", "committed"])
    assert rows_of(spark, table) == [(0, 0), (0, 2), (0, 4)]
    assert rows_of(spark, quarantine) == [(0, 1), (0, 3)]  # once, though routed twice


def odd_ids_only(rows: Any) -> Any:
    """A filtering transform (``tests.run.test_batch:odd_ids_only``)."""
    return rows.where("id % 2 = 1")


def test_records_a_transform_filters_out_are_counted_as_dropped_in_the_report_and_the_marker(spark, files_catalog):
    """Nothing vanishes unaccounted: ``verify`` reads the marker's drop count (issue 21)."""
    ns = f"bp_{uuid.uuid4().hex[:8]}"
    filtering = spec(ns).model_copy(update={"transform": "tests.run.test_batch:odd_ids_only", "expectations": {}})
    raw = spark.createDataFrame(kafka_rows(MESSAGES), KAFKA_SCHEMA)
    report = BatchProcessor(spark, "unit", filtering, files_catalog).process(
        raw, batch_id=0, stream=STREAM, offsets=OFFSETS
    )
    assert rows_of(spark, f"{files_catalog}.{ns}.events") == [(0, 0), (0, 4)]  # ids 1 and 3
    assert (report.records_in, report.records_written, report.records_quarantined) == (5, 2, 1)
    assert report.records_dropped == 2  # ids 2 and 0, filtered out by the transform
    marker = BatchProcessor(spark, "unit", filtering, files_catalog).resume(STREAM)
    assert marker is not None and marker.extra[DROPPED] == "2"


GOOD, BAD = json.dumps({"id": 1, "note": "ok"}), "not json"


@pytest.mark.integration
def test_a_restart_that_cuts_its_batches_differently_publishes_no_error_record_twice(spark, files_catalog, stack):
    """The direct reader's duplicate (seed 403533998): a restart re-cuts the crashed batch.

    The crashed run published the bad records of both partitions; the restart's first batch reads
    only partition 0 and publishes a new bad record there, so the topic's end moves past the record
    of partition 1 it found. Its commit must still send the next recovery back to that record, or the
    batch that finally reads partition 1 publishes it a second time.
    """
    ns, topic = f"bp_{uuid.uuid4().hex[:8]}", f"bp_errors_{uuid.uuid4().hex[:8]}"
    table = spec(ns, expectations={}, errors={"error_topic": topic})
    p0 = [Msg(None, v, partition=0, offset=o) for o, v in enumerate([GOOD, BAD, GOOD, BAD, GOOD])]
    p1 = [Msg(None, v, partition=1, offset=o) for o, v in enumerate([GOOD, BAD, GOOD])]

    def processor() -> BatchProcessor:  # a fresh process: a fresh publisher, which recovers on resume
        conf = {"bootstrap.servers": stack.kafka_bootstrap}
        publisher = ErrorTopicPublisher(topic, conf, conf, pipeline="unit", table=table.identifier)
        bp = BatchProcessor(spark, "unit", table, files_catalog, publisher=publisher)
        bp.resume(STREAM)
        return bp

    def batch(bp: BatchProcessor, batch_id: int, messages: list[Msg], offsets: dict[str, dict[int, int]]) -> None:
        bp.process(spark.createDataFrame(kafka_rows(messages), KAFKA_SCHEMA), batch_id=batch_id, stream=STREAM,
                   offsets=offsets)  # fmt: skip

    def die_once_published(point: str) -> None:
        if point == "published":
            raise Crash(point)

    crashed = processor()
    with pytest.MonkeyPatch.context() as patch, pytest.raises(Crash):
        patch.setattr(faults, "reached", die_once_published)
        batch(crashed, 0, p0[:3] + p1, {"t": {0: 3, 1: 3}})  # publishes (0, 1) and (1, 1), then dies
    restarted = processor()
    batch(restarted, 0, p0, {"t": {0: 5}})  # partition 0 only: (0, 1) found already, (0, 3) is new
    restarted.publisher.close()
    again = processor()
    batch(again, 1, p1, {"t": {0: 5, 1: 3}})  # (1, 1) must be found, not sent again
    again.publisher.close()
    crashed.publisher.close()

    published = sorted((int(dict(m.headers)[H_PARTITION]), int(dict(m.headers)[H_OFFSET]))
                       for m in consume_all(stack.kafka_bootstrap, topic))  # fmt: skip
    assert published == [(0, 1), (0, 3), (1, 1)]
    assert rows_of(spark, f"{files_catalog}.{ns}.events") == [(0, 0), (0, 2), (0, 4), (1, 0), (1, 2)]


@pytest.mark.parametrize("engine", ["spark", "arrow"])
def test_the_arrow_writers_single_pass_runs_one_spark_job_per_batch(spark, files_catalog, engine):
    """Issue 20's single pass: decode, checks and the data files in one job; nothing cached or counted.

    Spark's writer takes the batch step by step (count the batch, decode it into a cache and count the
    errors from it, write), which is what it is measured against. Spark's decoder here: written where
    parsed (``decoder: auto`` on flatten), a batch of rows made by ``createDataFrame`` runs its one
    ``collect`` as two jobs, while make bench's profile counts one per batch from the replay files.
    """
    ns = f"bp_{uuid.uuid4().hex[:8]}"
    clean = [Msg(None, json.dumps({"id": i, "note": "n"})) for i in (1, 2, 3)]
    source = {"topics": ["t"], "format": "flatten", "decoder": "spark"}
    table = spec(ns, source=source, write={"engine": engine}, expectations={}, errors={"skip_error": True})
    processor = BatchProcessor(spark, "unit", table, files_catalog)
    raw = spark.createDataFrame(kafka_rows(clean), KAFKA_SCHEMA)
    with spark_jobs(spark) as ran:
        report = processor.process(raw, batch_id=0, stream=STREAM, offsets=OFFSETS)
    jobs = len(ran)
    assert (report.records_in, report.records_written) == (3, 3)
    assert rows_of(spark, f"{files_catalog}.{ns}.events") == [(0, 0), (0, 1), (0, 2)]
    if engine == "arrow":
        assert jobs == 1
    else:
        assert jobs >= 3


@pytest.mark.parametrize("decoder", ["arrow", "spark"])  # the tasks that parse and write, or write Spark's rows
def test_the_files_a_failed_single_pass_job_wrote_are_gone_and_its_retry_commits_once(spark, files_catalog, decoder):
    """A single pass whose job fails after one task wrote its files (a task lost, a read failing
    late): the driver saw no result, the ledger names those files, and the batch's end deletes them.
    The batch run again commits its rows once, with only its own files in the table's folder."""
    from tests.write.test_writer import SECOND_TASK_FAILS_LATE, data_files_in

    ns = f"bp_{uuid.uuid4().hex[:8]}"
    clean = [Msg(None, json.dumps({"id": i, "note": "n"}), offset=i) for i in (1, 2, 3, 4)]
    source = {"topics": ["t"], "format": "flatten", "decoder": decoder}
    table = spec(ns, source=source, write={"engine": "arrow"}, expectations={})
    offsets = {"t": {0: 5}}
    raw = spark.createDataFrame(spark.sparkContext.parallelize(kafka_rows(clean), 2), KAFKA_SCHEMA)
    processor = BatchProcessor(spark, "unit", table, files_catalog)
    with pytest.raises(Exception, match="second task failed"):
        processor.process(raw.where(SECOND_TASK_FAILS_LATE), batch_id=0, stream=STREAM, offsets=offsets)
    assert data_files_in(processor.writer) == []
    again = BatchProcessor(spark, "unit", table, files_catalog)  # the job's retry
    report = again.process(raw, batch_id=0, stream=STREAM, offsets=offsets)
    assert report.records_written == 4
    assert rows_of(spark, f"{files_catalog}.{ns}.events") == [(0, 1), (0, 2), (0, 3), (0, 4)]
    committed = {
        Path(p).name for p in spark.sql(f"SELECT file_path FROM {files_catalog}.{ns}.events.files").toPandas().file_path
    }
    assert set(data_files_in(again.writer)) == committed


def test_the_files_of_single_pass_tasks_run_again_for_a_lost_cache_are_deleted(spark, files_catalog, monkeypatch):
    """The single pass's output is cached for the job that decodes the records it left to Spark; a
    cache lost in between (an executor gone; here no cache at all) runs its tasks again, which write
    their files again. The batch commits the first job's files; the ledger names the second's, which
    the batch's end deletes: the table's folder holds the committed files only, each row once."""
    from pyspark.sql import DataFrame

    from tests.write.test_writer import data_files_in

    monkeypatch.setattr(DataFrame, "persist", lambda self, *args, **kwargs: self)
    monkeypatch.setattr(DataFrame, "unpersist", lambda self, *args, **kwargs: self)
    ns = f"bp_{uuid.uuid4().hex[:8]}"
    # The last one's nested value is not as Jackson prints it (1.50): left to Spark's decoder, a second job.
    values = [json.dumps({"id": 1, "note": "a"}), json.dumps({"id": 2, "note": "b"}), '{"id":3,"note":{"n":[1.50]}}']
    messages = [Msg(None, v, offset=i) for i, v in enumerate(values)]
    source = {"topics": ["t"], "format": "flatten", "decoder": "arrow"}
    table = spec(ns, source=source, write={"engine": "arrow"}, expectations={}, schema_evolution="strict")
    processor = BatchProcessor(spark, "unit", table, files_catalog)
    raw = spark.createDataFrame(kafka_rows(messages), KAFKA_SCHEMA)
    with spark_jobs(spark) as ran:
        report = processor.process(raw, batch_id=0, stream=STREAM, offsets={"t": {0: 3}})
    assert report.records_written == 3 and len(ran) >= 2
    assert rows_of(spark, f"{files_catalog}.{ns}.events") == [(0, 0), (0, 1), (0, 2)]
    files = spark.sql(f"SELECT file_path FROM {files_catalog}.{ns}.events.files").collect()
    assert sorted(data_files_in(processor.writer)) == sorted(Path(r.file_path).name for r in files)


def test_a_json_batch_whose_only_bad_records_are_broken_documents_runs_the_jobs_of_a_clean_one(
    spark, files_catalog, monkeypatch
):
    """The tasks that parse a json batch settle a message that is certainly not one JSON document.

    Its error row (reason, stage, original bytes) is the one Spark's decoder gives it
    (``decode/not_json.py``), so nothing goes back to Spark: no decode by Spark's decoder, and the
    batch runs the Spark jobs a clean batch runs.
    """
    from pyiceberg.table import StaticTable

    from kafka_iceberg.write.jvm import IcebergTable

    ns = f"bp_{uuid.uuid4().hex[:8]}"
    source = {"topics": ["t"], "format": "json", "decoder": "auto"}
    table = spec(ns, source=source, schema=None, expectations={}, write={"engine": "arrow"})
    processor = BatchProcessor(spark, "unit", table, files_catalog)
    decoders = _traced_decoders(monkeypatch)
    good = [Msg(None, json.dumps({"id": i, "note": "n"})) for i in range(4)]
    broken = [Msg(None, '{"id": 7, "note": "cut sho'), Msg(None, '{"id": 8}}'), Msg(None, "not json")]
    jobs, reports, offset = [], [], 0
    for batch_id, messages in enumerate([good, good, [*good[:2], *broken, *good[2:]]]):
        numbered = [Msg(m.key, m.value, offset=offset + i) for i, m in enumerate(messages)]
        offset += len(messages)
        raw = spark.createDataFrame(kafka_rows(numbered), KAFKA_SCHEMA)
        with spark_jobs(spark) as ran:
            reports.append(processor.process(raw, batch_id=batch_id, stream=STREAM, offsets={"t": {0: offset}}))
        jobs.append(len(ran))
    assert [(r.records_in, r.records_written, r.records_quarantined) for r in reports[1:]] == [(4, 4, 0), (7, 4, 3)]
    # The plans of the first batches only (no table yet, then the table's schema): the third decoded
    # nothing with Spark's decoder, and ran no job more than the clean one before it.
    assert decoders == ["spark", "spark"] and jobs[2] == jobs[1]

    location = IcebergTable(spark, f"{files_catalog}.{ns}.events_quarantine").refresh().metadata_location()
    quarantined = [(r["offset"], r["_error"], r["_error_stage"], r["value"], r["_decoded"])
                   for r in StaticTable.from_metadata(location).scan().to_arrow().to_pylist()]  # fmt: skip
    assert sorted(quarantined) == [
        (10, "invalid JSON in value", "decode", b'{"id": 7, "note": "cut sho', None),
        (11, "invalid JSON in value: unexpected content after the end of the document", "decode", b'{"id": 8}}', None),
        (12, "invalid JSON in value", "decode", b"not json", None),
    ]


def _traced_decoders(monkeypatch: pytest.MonkeyPatch) -> list[str | None]:
    """The ``decoder`` argument of each decode the batch processor plans, in order."""
    decoders: list[str | None] = []
    decode = batch_module.decode

    def traced(*args: Any, decoder: str | None = None, **kwargs: Any) -> Any:
        decoders.append(decoder)
        return decode(*args, decoder=decoder, **kwargs)

    monkeypatch.setattr(batch_module, "decode", traced)
    return decoders


def _run_batches(spark: Any, processor: BatchProcessor, batches: list[list[Msg]]) -> list[Any]:
    """Each batch processed at the offsets after the last one's, in partition 0 of ``t``; their reports."""
    reports, offset = [], 0
    for batch_id, messages in enumerate(batches):
        numbered = [Msg(m.key, m.value, offset=offset + i) for i, m in enumerate(messages)]
        offset += len(messages)
        raw = spark.createDataFrame(kafka_rows(numbered), KAFKA_SCHEMA)
        reports.append(processor.process(raw, batch_id=batch_id, stream=STREAM, offsets={"t": {0: offset}}))
    return reports


def _process_batches(spark: Any, processor: BatchProcessor, batches: list[list[Msg]], clean: list[Msg]) -> None:
    """Each batch at the offsets after the last one's: its ``clean`` records written, the others quarantined."""
    for messages, report in zip(batches, _run_batches(spark, processor, batches), strict=True):
        bad = len(messages) - len(clean)
        assert (report.records_in, report.records_written, report.records_quarantined) == (
            len(messages), len(clean), bad
        )  # fmt: skip


@pytest.mark.parametrize("case", ["few left", "many left", "include_headers"])
def test_decoder_auto_writes_json_where_it_parses_it_and_backs_off_where_it_does_not_pay(
    spark, files_catalog, caplog, monkeypatch, case
):
    """Issue 20: ``decoder: auto`` is the Arrow decoder where the single pass writes what it parses.

    A batch with records Arrow leaves to Spark's decoder sorts them on the driver when they are few;
    beyond that (``many left``: the limit set to none) they take a job of Python tasks, and the
    batches after it take Spark's decoder. With ``include_headers`` the headers map is Spark SQL's
    to build, so Arrow cannot write the rows. Either way the first batch against each table schema
    is planned with Spark's decoder only (the columns and checks are the same with both; Arrow's plan
    is Spark's plus its own pass), and later ones reuse the shape or go straight to Spark's decoder.
    """
    from benchmarks.stages import BATCH, profiled

    from kafka_iceberg.write import certified as certified_module

    if case == "many left":
        monkeypatch.setattr(certified_module, "FEW_FAILURES", 0)
    decoders = _traced_decoders(monkeypatch)
    ns = f"bp_{uuid.uuid4().hex[:8]}"
    source = {"topics": ["t"], "format": "json", "include_headers": case == "include_headers"}
    table = spec(ns, source=source, schema=None, expectations={}, write={"engine": "arrow"})
    processor = BatchProcessor(spark, "unit", table, files_catalog)
    caplog.set_level("INFO", logger="kafka_iceberg")
    clean = [m for m in MESSAGES if m.value != "not json"]
    # A tab inside a string: Jackson refuses it, and neither the Arrow decoder nor the task's own
    # verdict on broken JSON (decode/not_json.py, which settles "not json") is sure of it.
    unsure = Msg(None, '{"id": 9, "note": "tab\tinside"}')
    batches = [clean, clean, [*clean, unsure], clean]
    with profiled(spark) as profile:  # make bench's stage profile, checked here on every path of auto
        _process_batches(spark, processor, batches, clean)
    # The jobs that write, where parsed or not, are the single pass's, not "the rest of the batch"
    # (results.md counted the job writing where parsed there until stop 31).
    single = "single pass (decode, checks, data files)"
    assert profile.calls[single] == (4 if case == "include_headers" else 5), dict(profile.calls)
    assert profile.jobs[single] >= profile.calls[single] and profile.jobs.get(BATCH, 0) == 0, dict(profile.jobs)
    values = sorted(r["value"] for r in spark.table(f"{files_catalog}.{ns}.events").collect())
    assert values == sorted([m.value for m in clean] * len(batches))
    where_parsed = [r for r in caplog.records if "written where parsed" in r.getMessage()]
    # Decode plans are kept per table schema: the first batch's (no table yet) and the later ones'.
    # Spark's plan gives each its shape; an Arrow plan is never built.
    if case == "include_headers":
        assert not where_parsed and decoders == ["spark", "spark", None, None]
    elif case == "many left":  # the third batch's bad record went to Spark's decoder; the fourth batch backed off
        assert len(where_parsed) == 3 and decoders == ["spark", "spark", "spark", None]
    else:  # the third batch's bad record was sorted on the driver; the fourth batch is Arrow's again
        assert len(where_parsed) == 4 and decoders == ["spark", "spark", "spark"]


def test_decoder_arrow_where_it_cannot_write_what_it_parses_plans_each_batch_once(spark, files_catalog, monkeypatch):
    """``decoder: arrow`` with ``include_headers``: the Arrow decoder's rows go to the single pass's writer.

    The first batch against each table schema is planned with Spark's decoder to find that, then with
    Arrow's; later batches against that schema go straight to Arrow's plan, built once per batch.
    """
    decoders = _traced_decoders(monkeypatch)
    ns = f"bp_{uuid.uuid4().hex[:8]}"
    source = {"topics": ["t"], "format": "json", "include_headers": True, "decoder": "arrow"}
    table = spec(ns, source=source, schema=None, expectations={}, write={"engine": "arrow"})
    processor = BatchProcessor(spark, "unit", table, files_catalog)
    clean = [m for m in MESSAGES if m.value != "not json"]
    _process_batches(spark, processor, [clean, MESSAGES, clean], clean)
    assert decoders == ["spark", None, "spark", None, None]
    values = sorted(r["value"] for r in spark.table(f"{files_catalog}.{ns}.events").collect())
    assert values == sorted([m.value for m in clean] * 3)


def _tables_by_decoder(
    spark: Any, catalog: str, messages: list[Msg], fmt: str, columns: dict[str, str], **overrides: Any
) -> dict[str, Any]:
    """One batch of ``messages`` into a table per ``decoder`` (auto, spark), each read back through pyiceberg."""
    from tests.write.conftest import files_table

    tables = {}
    for decoder in ("auto", "spark"):
        source = {"topics": ["t"], "format": fmt, "decoder": decoder}
        table = spec(f"bp_{uuid.uuid4().hex[:8]}", source=source, schema={"columns": columns}, expectations={},
                     write={"engine": "arrow"}, **overrides)  # fmt: skip
        processor = BatchProcessor(spark, "unit", table, catalog)
        raw = spark.createDataFrame(kafka_rows(messages), KAFKA_SCHEMA)
        processor.process(raw, batch_id=0, stream=STREAM, offsets={"t": {0: len(messages)}})
        tables[decoder] = files_table(processor.writer).scan().to_arrow().sort_by("id")
    return tables


def test_flatten_with_nested_values_auto_writes_where_parsed_the_rows_sparks_decoder_writes(
    spark, files_catalog, caplog
):
    """Issue 20: ``decoder: auto`` takes the Arrow decoder for flatten, whose documents carry nested
    values in string columns (the benchmark's ``ctx`` and ``tags``); the table it writes holds the rows
    a ``decoder: spark`` table holds, value for value, read back through pyiceberg."""
    from benchmarks.datagen import FLATTEN_COLUMNS, flatten_doc

    rng = random.Random(5)
    docs = [flatten_doc(rng, i, large=i % 2 == 1) for i in range(40)]
    docs[7]["ctx"] = {"spaced": [1.50, "x"]}  # Jackson writes it differently: left to Spark's decoder
    messages = [Msg(None, json.dumps(d, separators=(",", ":")), offset=i) for i, d in enumerate(docs)]
    messages[7] = Msg(None, json.dumps(docs[7]), offset=7)
    caplog.set_level("INFO", logger="kafka_iceberg")
    tables = _tables_by_decoder(spark, files_catalog, messages, "flatten", FLATTEN_COLUMNS, schema_evolution="strict")
    logged = [r.getMessage().split(": ", 1)[1] for r in caplog.records if "written where parsed" in r.getMessage()]
    assert logged == ["39 records written where parsed, 1 left to Spark"]
    auto, spark_rows = (tables[d].select(list(FLATTEN_COLUMNS)).to_pylist() for d in ("auto", "spark"))
    assert len(auto) == 40 and auto == spark_rows
    assert (
        auto[0]["ctx"] == json.dumps(docs[0]["ctx"], separators=(",", ":")) and auto[7]["ctx"] == '{"spaced":[1.5,"x"]}'
    )


@pytest.mark.parametrize("mode", ["append", "upsert"])
def test_string_columns_found_holding_objects_are_read_as_found_in_the_batches_after(
    spark, files_catalog, caplog, mode
):
    """Issue 20: a flatten string column a batch found an object in is not looked for again in the
    batches after (decode/arrow.py, ``Layout.nested``): its values are read as nested values are, so a
    string with a backslash in it (Jackson re-escapes it) is left to Spark's decoder; rows as sent."""
    from tests.write.conftest import files_table

    source = {"topics": ["t"], "format": "flatten", "decoder": "arrow"}
    keys = {"commit_mode": "upsert", "key_fields": ["id"]} if mode == "upsert" else {"write": {"engine": "arrow"}}
    table = spec(f"bp_{uuid.uuid4().hex[:8]}", source=source, schema={"columns": {"id": "long", "note": "string"}},
                 expectations={}, schema_evolution="strict", **keys)  # fmt: skip
    processor = BatchProcessor(spark, "unit", table, files_catalog)
    batches = [  # the first creates the table: what the batch after knows of it changes, not what was found
        [b'{"id":1,"note":{"a":[1]}}', b'{"id":2,"note":"plain"}'],
        [b'{"id":3,"note":"q\\"q"}', b'{"id":4,"note":"x"}'],
    ]
    caplog.set_level("INFO", logger="kafka_iceberg")
    offset = 0
    for batch_id, values in enumerate(batches):
        messages = [Msg(None, v, offset=offset + i) for i, v in enumerate(values)]
        offset += len(messages)
        raw = spark.createDataFrame(kafka_rows(messages), KAFKA_SCHEMA)
        processor.process(raw, batch_id=batch_id, stream=STREAM, offsets={"t": {0: offset}})
    logged = [r.getMessage().split(": ", 1)[1] for r in caplog.records if " where parsed, " in r.getMessage()]
    done = "written" if mode == "append" else "parsed for the MERGE"
    assert logged == [f"{n} records {done} where parsed, {left} left to Spark" for n, left in [(2, 0), (1, 1)]]
    rows = files_table(processor.writer).scan().to_arrow().sort_by("id").select(["id", "note"]).to_pylist()
    assert rows == [{"id": 1, "note": '{"a":[1]}'}, {"id": 2, "note": "plain"}, {"id": 3, "note": 'q"q'},
                    {"id": 4, "note": "x"}]  # fmt: skip


def test_csv_numbers_and_timestamps_are_written_where_parsed_with_the_rows_sparks_decoder_writes(
    spark, files_catalog, caplog
):
    """Issue 20: ``decoder: auto`` writes a csv table whose fields convert in the task that parses them
    (canonical numbers, booleans, timestamps) there, and a line it certainly refuses as Spark would; the rest
    (``+3``, ``1e3``) is Spark's. The
    table holds the rows a ``decoder: spark`` table holds, value for value, read back through pyiceberg."""
    from benchmarks.datagen import CSV_COLUMNS, csv_message

    rng = random.Random(6)
    lines = [csv_message(rng, i, large=i % 2 == 1, bad_share=0.0)[0].decode() for i in range(40)]
    lines[3] = lines[3].replace(",", ",+", 1)  # a long spelled +3: Spark converts it
    lines[5] = lines[5].split(",", 6)
    lines[5][5] = "1e3"  # a double Spark converts to 1000.0
    lines[5] = ",".join(lines[5])
    lines.append("99,not a timestamp,1,DE,Berlin,1.0,1,new,curl,bad")  # refused by Spark's decoder
    messages = [Msg(None, line, offset=i) for i, line in enumerate(lines)]
    caplog.set_level("INFO", logger="kafka_iceberg")
    tables = _tables_by_decoder(spark, files_catalog, messages, "csv", CSV_COLUMNS, errors={"skip_error": True})
    logged = [r.getMessage().split(": ", 1)[1] for r in caplog.records if "written where parsed" in r.getMessage()]
    assert logged == ["39 records written where parsed, 2 left to Spark"]  # the bad line is settled there
    arrow_rows, spark_rows = (tables[d].select(list(CSV_COLUMNS)).to_pylist() for d in ("auto", "spark"))
    assert len(arrow_rows) == 40 and arrow_rows == spark_rows
    assert arrow_rows[3]["id"] == 3 and arrow_rows[5]["amount"] == 1000.0


def test_flatten_timestamps_and_dates_are_written_where_parsed_with_the_values_sparks_decoder_gives(
    spark, files_catalog, caplog
):
    """Issue 20: canonical timestamp and date text is converted in the task that parses it; any other
    spelling is left to Spark's decoder, which converts or refuses it as on every other path."""
    ns = f"bp_{uuid.uuid4().hex[:8]}"
    source = {"topics": ["t"], "format": "flatten", "decoder": "arrow"}
    columns = {"id": "long", "ts": "timestamp", "day": "date"}
    table = spec(ns, source=source, schema={"columns": columns}, expectations={}, errors={"skip_error": True},
                 write={"engine": "arrow"})  # fmt: skip
    processor = BatchProcessor(spark, "unit", table, files_catalog)
    caplog.set_level("INFO", logger="kafka_iceberg")
    canonical = [("2024-05-01T10:00:00Z", "2024-05-01"), ("2024-05-01 10:00:00.25+02:00", "2024-02-29"),
                 ("2024-05-01T10:00:00", None)]  # fmt: skip
    others = [("2024-05-01T10:00", "2024-05-01 "), ("2024-02-30T00:00:00Z", "2024-05-01")]  # converted; refused
    batches = [canonical, canonical + others]
    offset = 0
    for batch_id, pairs in enumerate(batches):
        messages = [Msg(None, json.dumps({"id": offset + i, "ts": ts, "day": day}), offset=offset + i)
                    for i, (ts, day) in enumerate(pairs)]  # fmt: skip
        offset += len(pairs)
        raw = spark.createDataFrame(kafka_rows(messages), KAFKA_SCHEMA)
        processor.process(raw, batch_id=batch_id, stream=STREAM, offsets={"t": {0: offset}})
    logged = [r.getMessage() for r in caplog.records if "written where parsed" in r.getMessage()]
    assert [m.split(": ", 1)[1] for m in logged] == [
        "3 records written where parsed, 0 left to Spark",
        "3 records written where parsed, 2 left to Spark",
    ]
    got = spark.sql(
        f"SELECT id, unix_micros(ts) AS ts, unix_date(day) AS day FROM {files_catalog}.{ns}.events ORDER BY id"
    ).collect()
    may_1, feb_29 = 19844, 19782  # days since 1970-01-01
    ten_utc = 1714557600 * 1_000_000  # 2024-05-01T10:00:00Z
    eight_utc = ten_utc - 2 * 3600 * 1_000_000 + 250_000
    expected = [(0, ten_utc, may_1), (1, eight_utc, feb_29), (2, ten_utc, None)]
    expected += [(3, ten_utc, may_1), (4, eight_utc, feb_29), (5, ten_utc, None), (6, ten_utc, may_1)]
    assert [tuple(r) for r in got] == expected  # id 7 (February 30th) is refused by Spark's decoder


def test_an_upsert_batch_the_arrow_decoder_certifies_whole_is_merged_without_sparks_decoder(
    spark, files_catalog, monkeypatch
):
    """Issue 20: an upsert whose batches the Arrow decoder certifies whole parses and checks them in
    the job that hands their rows to the MERGE (write/certified.py, ``rows_parsed``): Spark's decoder
    and checks never run over them, and the table holds what a ``decoder: spark`` table holds, the
    newest record of each key, read back through pyiceberg."""
    from tests.write.conftest import files_table

    checked: list[int] = []
    step_by_step = BatchProcessor._checked

    def traced(self: BatchProcessor, raw: Any, *args: Any, **kwargs: Any) -> Any:
        checked.append(raw.count())
        return step_by_step(self, raw, *args, **kwargs)

    monkeypatch.setattr(BatchProcessor, "_checked", traced)
    batches = [
        [Msg(None, json.dumps({"id": i % 3 + 1, "note": f"n{b}{i}"}, separators=(",", ":"))) for i in range(6)]
        for b in range(2)
    ]
    tables, reports, calls = {}, {}, {}
    for decoder in ("auto", "spark"):
        source = {"topics": ["t"], "format": "flatten", "decoder": decoder}
        table = spec(f"bp_{uuid.uuid4().hex[:8]}", source=source, commit_mode="upsert", key_fields=["id"])
        processor = BatchProcessor(spark, "unit", table, files_catalog)
        checked.clear()
        reports[decoder] = [
            (r.records_in, r.records_written, r.expectations_passed) for r in _run_batches(spark, processor, batches)
        ]
        calls[decoder] = list(checked)
        tables[decoder] = files_table(processor.writer).scan().to_arrow().sort_by("id").to_pylist()
    assert calls == {"auto": [], "spark": [6, 6]}
    assert tables["auto"] == tables["spark"]
    assert [(r["id"], r["note"]) for r in tables["auto"]] == [(1, "n13"), (2, "n14"), (3, "n15")]
    assert reports["auto"] == reports["spark"] == [(6, 3, {"positive": 6})] * 2  # three keys written per batch


def test_an_upserts_records_left_to_spark_are_sorted_on_the_driver_when_few(spark, files_catalog, monkeypatch):
    """Issue 20 (stop 57): the records an upsert's Arrow pass leaves to Spark, when few, are decoded
    by Spark's decoder and sorted on the driver in one Spark job (run/batch.py, ``_sorted_here``),
    with no step-by-step job over them; when many, the step-by-step path takes them. Either way the
    table (read through pyiceberg), the quarantine rows with their reasons and every batch's counts
    are those of ``decoder: spark``: a decode error, a rule's violation, a null key, a tombstone and
    a record only Spark's decoder reads (a nested value with spaces), among keys updated across batches."""
    from kafka_iceberg.write import certified
    from tests.write.conftest import files_table

    calls: dict[str, list[int]] = {"checked": [], "driver": []}
    step_by_step, on_driver = BatchProcessor._checked, batch_module.sort_on_driver

    def checked(self: BatchProcessor, raw: Any, *args: Any, **kwargs: Any) -> Any:
        calls["checked"].append(raw.count())
        return step_by_step(self, raw, *args, **kwargs)

    def sorted_here(*args: Any, **kwargs: Any) -> Any:
        out = on_driver(*args, **kwargs)
        calls["driver"].append(out[1].stats["in"])
        return out

    monkeypatch.setattr(BatchProcessor, "_checked", checked)
    monkeypatch.setattr(batch_module, "sort_on_driver", sorted_here)

    def doc(**fields: Any) -> str:
        return json.dumps(fields, separators=(",", ":"))  # compact: as Jackson prints it, Arrow certifies it

    batches = [
        [Msg(None, doc(id=1, note="a")), Msg(None, "not json"), Msg(None, doc(id=0, note="zero")),
         Msg(None, doc(note="no id")), Msg(None, json.dumps({"id": 2, "note": {"n": 1}})),
         Msg(None, doc(id=3, note="c"))],
        [Msg(None, doc(id=3, note="c2")), Msg("1", None), Msg(None, doc(id=-4, note="neg")),
         Msg(None, doc(id=5, note="e"))],
    ]  # fmt: skip
    # A record without an id meets the rule: the MERGE's write checks reject it (its key is null).
    rules = {"positive": {"expr": "id IS NULL OR id > 0", "on_violation": "quarantine"}}
    tables, quarantined, reports, seen = {}, {}, {}, {}
    for run, decoder in (("spark", "spark"), ("few", "arrow"), ("many", "arrow")):
        if run == "many":  # nothing is few: the records left take the step-by-step path
            monkeypatch.setattr(certified, "FEW_FAILURES", 0)
        ns = f"bp_{uuid.uuid4().hex[:8]}"
        source = {"topics": ["t"], "format": "flatten", "decoder": decoder}
        table = spec(ns, source=source, commit_mode="upsert", key_fields=["id"], expectations=rules)
        processor = BatchProcessor(spark, "unit", table, files_catalog)
        calls["checked"].clear(), calls["driver"].clear()
        reports[run] = [
            (r.records_in, r.records_written, r.records_quarantined, r.expectations_failed)
            for r in _run_batches(spark, processor, batches)
        ]
        seen[run] = {k: list(v) for k, v in calls.items()}
        tables[run] = sorted((r["id"], r["note"]) for r in files_table(processor.writer).scan().to_arrow().to_pylist())
        q = spark.table(f"{files_catalog}.{ns}.events_quarantine").collect()
        quarantined[run] = sorted((r["offset"], r["_error_stage"], r["_error"]) for r in q)
    # Records left per batch: no id and the spaced one; the tombstone. The tasks settle "not json" and
    # quarantine id 0 and id -4 themselves (stop 62).
    assert seen == {
        "spark": {"checked": [6, 4], "driver": []},
        "few": {"checked": [], "driver": [2, 1]},
        "many": {"checked": [2, 1], "driver": []},
    }
    assert tables["few"] == tables["many"] == tables["spark"] == [(2, '{"n":1}'), (3, "c2"), (5, "e")]
    assert quarantined["few"] == quarantined["many"] == quarantined["spark"]
    assert [(o, stage) for o, stage, _ in quarantined["spark"]] == [
        (1, "decode"), (2, "expectation:positive"), (3, "write"), (8, "expectation:positive")
    ]  # fmt: skip
    assert reports["few"] == reports["many"] == reports["spark"]


def test_an_upsert_auto_backs_off_to_sparks_decoder_after_a_batch_arrow_mostly_left(spark, files_catalog):
    """Issue 20: under ``decoder: auto`` an upsert batch whose records the Arrow decoder mostly leaves
    to Spark (nested values spelled with spaces, which Jackson prints without) makes the next
    ``AUTO_ARROW_BACKOFF`` (10) batches skip the Arrow pass; the rows are the same either way."""
    from tests.write.conftest import files_table

    spaced = [Msg(None, json.dumps({"id": i + 1, "note": {"n": i}})) for i in range(4)]
    compact = [Msg(None, json.dumps({"id": i + 1, "note": f"c{i}"}, separators=(",", ":"))) for i in range(4)]
    table = spec(f"bp_{uuid.uuid4().hex[:8]}", commit_mode="upsert", key_fields=["id"])
    processor = BatchProcessor(spark, "unit", table, files_catalog)
    parsed: list[int] = []
    with pytest.MonkeyPatch.context() as patch:
        parse = batch_module.rows_where_parsed

        def counted(*args: Any, **kwargs: Any) -> Any:
            out = parse(*args, **kwargs)
            parsed.append(out.stats["in"])
            return out

        patch.setattr(batch_module, "rows_where_parsed", counted)
        _run_batches(spark, processor, [compact, spaced, compact, compact])
    assert parsed == [4, 0]  # Arrow took the first batch whole, left the second; the next ones were Spark's
    rows = files_table(processor.writer).scan().to_arrow().sort_by("id").to_pylist()
    assert [(r["id"], r["note"]) for r in rows] == [(i + 1, f"c{i}") for i in range(4)]


@pytest.mark.parametrize("commit_mode", ["upsert", "append"])
def test_records_left_to_spark_count_and_advance_the_offsets_without_a_job_of_their_own(
    spark, files_catalog, monkeypatch, commit_mode
):
    """With Spark's sources the offsets a batch commits are found in the batch. The tasks that parse
    where written or for the MERGE take every record's, the ones they leave to Spark's decoder too,
    and count those: no job counts them again or looks for their offsets (``batch_offsets``). The
    last record of each partition here is one they leave (bad JSON, a violated quarantine rule)."""
    found: list[Any] = []
    monkeypatch.setattr(batch_module, "batch_offsets", lambda raw: found.append(raw) or {})
    messages = [Msg(None, json.dumps({"id": i + 1, "note": "n"}), partition=0, offset=i) for i in range(4)]
    messages += [Msg(None, "{bad", partition=0, offset=4), Msg(None, '{"id": 9}', partition=1, offset=0)]
    messages += [Msg(None, '{"id": -1}', partition=1, offset=1)]
    ns = f"bp_{uuid.uuid4().hex[:8]}"
    upsert = (
        {"commit_mode": "upsert", "key_fields": ["id"]} if commit_mode == "upsert" else {"write": {"engine": "arrow"}}
    )
    table = spec(ns, source={"topics": ["t"], "format": "flatten", "decoder": "arrow"}, **upsert)
    processor = BatchProcessor(spark, "unit", table, files_catalog)
    report = processor.process(spark.createDataFrame(kafka_rows(messages), KAFKA_SCHEMA), batch_id=0, stream=STREAM)
    assert (report.records_in, report.records_written, report.records_failed) == (7, 5, 2)
    assert processor.writer.last_commit(STREAM).offsets == {"t": {0: 5, 1: 2}}
    assert found == []


@pytest.mark.parametrize("limit", ["FEW_FAILURES", "FEW_FAILURE_BYTES"])
def test_few_records_left_to_spark_are_sorted_and_written_by_the_driver_as_python_tasks_would(
    spark, files_catalog, monkeypatch, limit
):
    """Records the Arrow decoder leaves to Spark, when few, are decoded and checked by Spark's decoder
    in a job of no Python tasks; the driver sorts them and writes those it keeps (a job of Python tasks
    cost 0.2-0.4 s a batch for a few hundred). Over either limit (records, bytes: error routing's, set
    to 1 here) they take that job as before. Both ways give the same rows, the same quarantined
    records with the same reasons, the same counts: a record Spark writes (surrounding whitespace),
    bad JSON, a violated quarantine rule."""
    from pyiceberg.table import StaticTable

    from kafka_iceberg.write import arrow_files as arrow_files_module
    from kafka_iceberg.write import certified as certified_module
    from kafka_iceberg.write.jvm import IcebergTable

    def pyiceberg_rows(identifier: str, *columns: str) -> list[tuple[Any, ...]]:
        table = StaticTable.from_metadata(IcebergTable(spark, identifier).refresh().metadata_location())
        return sorted(tuple(r[c] for c in columns) for r in table.scan().to_arrow().to_pylist())

    tasks: list[str] = []
    for module in (certified_module, arrow_files_module):  # every job of Python tasks the writer starts
        started = module.map_in_arrow
        monkeypatch.setattr(module, "map_in_arrow", lambda *a, _run=started, **k: tasks.append("job") or _run(*a, **k))
    messages = [*MESSAGES, Msg(None, ' {"id": 4, "note": "d"}')]  # leading space: Spark's decoder, which keeps it
    messages = [Msg(m.key, m.value, offset=i) for i, m in enumerate(messages)]
    outcomes = {}
    for few in (True, False):
        if not few:
            monkeypatch.setattr(certified_module, limit, 0)  # one record is left: over the limit
        tasks.clear()
        ns = f"bp_{uuid.uuid4().hex[:8]}"
        source = {"topics": ["t"], "format": "flatten", "decoder": "arrow"}
        processor = BatchProcessor(spark, "unit", spec(ns, source=source, write={"engine": "arrow"}), files_catalog)
        raw = spark.createDataFrame(kafka_rows(messages), KAFKA_SCHEMA)
        report = processor.process(raw, batch_id=0, stream=STREAM, offsets={"t": {0: len(messages)}})
        assert tasks == (["job"] if few else ["job", "job"])  # the tasks that parse, then those sorting what they left
        rows = pyiceberg_rows(f"{files_catalog}.{ns}.events", "id", "note", "offset")
        assert [r[0] for r in rows] == [1, 2, 3, 4]
        quarantined = pyiceberg_rows(
            f"{files_catalog}.{ns}.events_quarantine",
            "offset",
            "value",
            "_error",
            "_error_stage",
            "_decoded",
            "timestamp",
        )
        assert [(q[0], q[3]) for q in quarantined] == [(1, "decode"), (3, "expectation:positive")]
        counts = (report.records_in, report.records_written, report.records_quarantined, report.records_failed)
        outcomes[few] = (counts, rows, quarantined, processor.writer.last_commit(STREAM).offsets)
    assert outcomes[True] == outcomes[False]


def _quarantine_case(fmt: str) -> tuple[list[Msg], dict[str, str], dict[str, Any]]:
    """Messages of ``fmt`` that violate quarantine and drop rules, some with rows the tasks cannot print."""
    from benchmarks.datagen import CSV_COLUMNS, FLATTEN_COLUMNS, csv_message, flatten_doc

    rng = random.Random(8)
    rules = {"warned": ("id <> 5", "warn") if fmt != "json" else ("value < '{\"id\":30'", "warn")}
    if fmt == "flatten":
        docs = [flatten_doc(rng, i, large=i % 2 == 1) for i in range(40)]
        for i in range(0, 40, 3):
            docs[i]["amt"] = -docs[i]["amt"] - 1  # fails amount_not_negative
        docs[4]["note"] = 'a "quoted" \\ note\n\t\u2028é'  # printed with Jackson's escapes
        docs[6]["amt"] = -0.00001  # Java prints -1.0E-5: its row is Spark's to print
        docs[9]["qty"] = 9  # fails both quarantine rules
        docs[10]["new"] = None
        values = [json.dumps(d, separators=(",", ":")) for d in docs]
        columns = dict(FLATTEN_COLUMNS)
        rules |= {"amount_not_negative": ("amt >= 0", "quarantine"), "qty_small": ("qty < 9", "quarantine"),
                  "not_ios": ("os <> 'ios'", "drop")}  # fmt: skip
    elif fmt == "csv":
        values = [csv_message(rng, i, large=False, bad_share=0.0)[0].decode() for i in range(40)]
        columns = dict(CSV_COLUMNS)
        rules |= {"small": ("amount < 400", "quarantine"), "not_returned": ("status <> 'returned'", "drop")}
    else:
        values = [json.dumps(flatten_doc(rng, i, large=False), separators=(",", ":")) for i in range(40)]
        values[3] = '{"q":"\\u00e9\\n"}'  # quarantined with the document as Spark's to_json prints it
        values[5] = '{"q":"\\"\\\\\\u2028\\u0001"}'
        values[7] = "{}"
        columns = {}
        rules |= {"not_empty": ("value <> '{}'", "quarantine"), "before_p": ("value < '{\"p'", "quarantine")}
    expectations = {name: {"expr": sql, "on_violation": action} for name, (sql, action) in rules.items()}
    return [Msg(None, v, offset=i) for i, v in enumerate(values)], columns, expectations


@pytest.mark.parametrize("fmt, mode", [("flatten", "append"), ("csv", "append"), ("json", "append"),
                                       ("flatten", "upsert"), ("csv", "upsert")])  # fmt: skip
def test_the_tasks_quarantine_and_drop_what_sparks_side_would_with_the_same_error_rows(
    spark, files_catalog, monkeypatch, fmt, mode
):
    """Issue 20: records that violate a quarantine or drop rule are routed by the tasks that parse them,
    with the error rows Spark's side gives them (reason, stage, original bytes, the row as ``to_json``
    prints it): the same main table, quarantine table and counts as ``decoder: spark``, appended by the
    Arrow writer or merged by an upsert. A row the tasks cannot print for certain (a double Java prints
    in exponent form) is left to Spark."""
    from kafka_iceberg.write import certified, writer
    from tests.support.spy import returns
    from tests.write.conftest import files_table

    if mode == "upsert":
        parsed = returns(monkeypatch, batch_module, "rows_where_parsed", certified.rows_where_parsed)
        keys = {"commit_mode": "upsert", "key_fields": ["id"]}
    else:
        parsed = returns(monkeypatch, writer, "write_where_parsed", certified.write_where_parsed)
        keys = {"write": {"engine": "arrow"}}
    messages, columns, expectations = _quarantine_case(fmt)
    outcomes = {}
    for decoder in ("arrow", "spark"):
        ns = f"bp_{uuid.uuid4().hex[:8]}"
        source = {"topics": ["t"], "format": fmt, "decoder": decoder}
        if fmt == "csv":
            source["csv"] = {"columns": list(columns)}
        schema = {"schema": {"columns": columns}} if columns else {"schema": None, "schema_evolution": "add_columns"}
        table = spec(ns, source=source, expectations=expectations, **schema, **keys)
        processor = BatchProcessor(spark, "unit", table, files_catalog)
        raw = spark.createDataFrame(kafka_rows(messages), KAFKA_SCHEMA)
        report = processor.process(raw, batch_id=0, stream=STREAM, offsets={"t": {0: len(messages)}})
        rows = files_table(processor.writer).scan().to_arrow().sort_by("offset").to_pylist()
        quarantine = BatchProcessor(spark, "unit", spec(ns, name="events_quarantine"), files_catalog).writer
        quarantined = [
            {k: v for k, v in r.items() if k not in ("_quarantined_at", "_table")}  # the time; the namespace
            for r in files_table(quarantine).scan().to_arrow().sort_by("offset").to_pylist()
        ]
        counts = (report.records_in, report.records_written, report.records_quarantined, report.records_dropped)
        outcomes[decoder] = (rows, quarantined, counts, report.expectations_failed)
    rows, quarantined, counts, failed = outcomes["arrow"]
    assert outcomes["arrow"] == outcomes["spark"]
    assert quarantined and all(q["_decoded"].startswith("{") for q in quarantined)
    assert all(failed.values()) and counts[0] == len(messages)  # every rule was violated, no record lost
    if fmt == "flatten":
        stages = {q["offset"]: (q["_error_stage"], q["_error"]) for q in quarantined}
        assert stages[9] == ("expectation:amount_not_negative", "expectation amount_not_negative failed: amt >= 0; "
                             "expectation qty_small failed: qty < 9")  # fmt: skip
        assert counts[3] > 0 and 6 in stages  # dropped; and the row left to Spark quarantined there
    # Only the arrow run wrote where it parsed; every violator the tasks could print they routed themselves.
    assert len(parsed) == 1 and len(parsed[0].quarantined) == len(quarantined) - (fmt == "flatten")
    assert parsed[0].left_count == (1 if fmt == "flatten" else 0)  # no second job for csv and json
