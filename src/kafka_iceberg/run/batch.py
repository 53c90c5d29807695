"""One micro-batch of one table, top to bottom: decode → transform → checks → write → observe.

Every source (Spark's Kafka source, replay files, the direct reader) hands its Kafka-shaped
batches to :meth:`BatchProcessor.process`. The order matters for exactly-once: bad records are
routed (error topic, quarantine table) before the table commit, and both routes de-duplicate on
replay, so a crash at any point neither loses nor duplicates a record.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from kafka_iceberg import faults
from kafka_iceberg.checks import ErrorRouter, apply_expectations, write_rejections
from kafka_iceberg.checks.arrow_rules import Rule, translate
from kafka_iceberg.checks.error_topic import ErrorTopicPublisher
from kafka_iceberg.checks.expectations import violation
from kafka_iceberg.checks.labels import Labels, check_columns, merged_stats, written_rows
from kafka_iceberg.checks.routing import RoutingResult
from kafka_iceberg.decode import Decoded, avro_jvm, decode, discovers_columns, pt_value
from kafka_iceberg.decode.arrow import AUTO_ARROW_BACKOFF, AUTO_ARROW_WHERE_PARSED, arrow_parses, uses_arrow
from kafka_iceberg.decode.as_sent import as_sent_layout
from kafka_iceberg.decode.codec import Codec
from kafka_iceberg.decode.plan import kafka_frame
from kafka_iceberg.decode.schemaful import build_codec, is_schemaful, latest_ids, row_schema
from kafka_iceberg.errors import ConfigError, summary
from kafka_iceberg.observe.report import BatchReport
from kafka_iceberg.records import COORDINATES, ERROR_SCHEMA_DDL, INTERNAL_PREFIX, TOMBSTONE_COLUMN
from kafka_iceberg.source.offsets import Offsets, batch_offsets, merge_offsets
from kafka_iceberg.spec.api import resolve_transform
from kafka_iceberg.spec.columns import FIXED_COLUMNS
from kafka_iceberg.spec.model import TableSpec
from kafka_iceberg.spec.types import from_spark_type
from kafka_iceberg.write import CommitMarker, TableWriter
from kafka_iceberg.write.arrow_files import SortedBatch, WrittenFile, sort_on_driver
from kafka_iceberg.write.certified import ParsedBatch, ParsedRows, rows_where_parsed, takes_as_is, writes_where_parsed
from kafka_iceberg.write.marker import DROPPED
from kafka_iceberg.write.quarantine import QuarantineTable

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, Row, SparkSession
    from pyspark.sql.types import StructType

    from kafka_iceberg.decode.arrow import Layout

log = logging.getLogger(__name__)

Observer = Callable[[BatchReport], None]
Key = tuple[tuple[str, str], ...]  # a table schema's payload columns (name, type): what decoding depends on


def _keep(frame: DataFrame) -> DataFrame:
    """A ``persist`` that does not cache: the frame is cheap to recompute from what is cached."""
    return frame


def _payload_columns(columns: list[str]) -> list[str]:
    return [c for c in columns if c not in FIXED_COLUMNS and not c.startswith(INTERNAL_PREFIX)]


def _payload(rows: StructType) -> list[tuple[str, str]]:
    """The payload columns of ``rows`` and their Spark types, for the tasks that quarantine records.

    What a quarantined record's ``_decoded`` prints (``checks/labels.py``, ``ROW_JSON``).
    """
    names = _payload_columns(rows.names)
    return [(f.name, f.dataType.simpleString()) for f in rows.fields if f.name in names]


def _known(table_schema: StructType | None) -> dict[str, str] | None:
    """The existing table's payload columns (name → canonical type), None when there is no table."""
    if table_schema is None:
        return None
    names = payload_names(table_schema)
    return {f.name: from_spark_type(f.dataType.simpleString()) for f in table_schema.fields if f.name in names}


def _not_null(table_schema: StructType | None) -> list[str]:
    """The table's NOT NULL columns (none before the table exists)."""
    return [f.name for f in (table_schema.fields if table_schema is not None else []) if not f.nullable]


def payload_names(schema: Any) -> list[str]:
    """Payload column names of a table schema (everything but Kafka coordinates, pt, headers)."""
    return _payload_columns([f.name for f in schema.fields])


@dataclass(frozen=True)
class _WhereParsed:
    """A table's batches written where the Arrow decoder parses them (``write/certified.py``)."""

    layout: Layout  # what the Arrow decoder parses
    schema: StructType  # the rows' columns as Spark's decoder gives them: what the table is planned with
    labels: Labels
    rules: list[Rule]  # the expectations, translated for pyarrow


@dataclass(frozen=True)
class _Checked:
    """A batch after decoding and checks: the rows to write, what leaves the table, and the counts."""

    offsets: Offsets = field(default_factory=dict)  # past the records read, when asked for
    rows: DataFrame | None = None  # with ``_ki_tombstone``; None when no record was read
    # decode errors and write rejections, in the error-row shape; rows on the driver when few (_sorted_here)
    errors: DataFrame | list[Row] | None = None
    quarantined: DataFrame | list[Row] | None = None
    quarantined_count: int = 0
    passed: dict[str, int] = field(default_factory=dict)  # per expectation
    failed: dict[str, int] = field(default_factory=dict)
    dropped: int = 0  # by ``drop`` rules and by a filtering transform

    def with_certified(self, rows: DataFrame | None, stats: dict[str, Any], rules: list[str]) -> _Checked:
        """These and the records certified where they were parsed (``write/certified.py``).

        ``rows``: theirs for the MERGE (:class:`~kafka_iceberg.write.certified.ParsedRows`), None
        when they are written already (:class:`~kafka_iceberg.write.certified.ParsedBatch`).
        Certified records met every rule but ``warn`` ones, whose violations ``stats`` counts.
        """
        warned = dict(zip(rules, stats["violations"], strict=True))
        if rows is not None and self.rows is not None:
            rows = self.rows.unionByName(rows, allowMissingColumns=True)
        return replace(
            self,
            offsets=merge_offsets(self.offsets, stats["offsets"]),
            rows=self.rows if rows is None else rows,
            passed={n: self.passed.get(n, 0) + stats["decoded"] - warned[n] for n in rules},
            failed={n: self.failed.get(n, 0) + warned[n] for n in rules},
            dropped=self.dropped + stats["dropped"],
        )

    def with_settled(self, errors: Sequence[Row], quarantined: Sequence[Row]) -> _Checked:
        """These and the error and quarantine rows of the records the tasks settled or routed themselves."""
        return replace(
            self,
            errors=_joined(self.errors, errors),
            quarantined=_joined(self.quarantined, quarantined),
            quarantined_count=self.quarantined_count + len(quarantined),
        )


def _joined(these: DataFrame | list[Row] | None, rows: Sequence[Row]) -> DataFrame | list[Row] | None:
    """Error rows of Spark's side (a frame when many, rows when few) and the tasks' (rows), together."""
    if not rows:
        return these
    if these is None or isinstance(these, list):
        return [*(these or []), *rows]
    theirs = these.sparkSession.createDataFrame(list(rows), ERROR_SCHEMA_DDL)
    return these.unionByName(theirs, allowMissingColumns=True)


@dataclass
class BatchProcessor:
    """Processes the micro-batches of one table.

    Args:
        spark: the session.
        pipeline: pipeline id.
        spec: the table.
        catalog: Spark catalog name the table lives in.
        publisher: error-topic publisher when ``errors.error_topic`` is set.
        base_dir: directory of the pipeline file (JSON Schema paths are relative to it).
        observers: receive every :class:`BatchReport` (metrics, JSON lines, event log, progress).
    """

    spark: SparkSession
    pipeline: str
    spec: TableSpec
    catalog: str
    publisher: ErrorTopicPublisher | None = None
    base_dir: Path | None = None
    observers: list[Observer] = field(default_factory=list)
    clock: Callable[[], dt.datetime] = field(default=lambda: dt.datetime.now(dt.timezone.utc))
    _writer: TableWriter | None = field(default=None, init=False)
    _quarantine: QuarantineTable | None = field(default=None, init=False)
    _transform: Callable[[DataFrame], DataFrame] | None = field(default=None, init=False)
    _error_offsets: Offsets = field(default_factory=dict, init=False)
    _dropped: int = field(default=0, init=False)
    _offsets: Offsets = field(default_factory=dict, init=False)  # the stream's last committed source offsets
    # What writing certified records where they are parsed needs, per table schema (its payload columns).
    _where_parsed: dict[Key, _WhereParsed] = field(default_factory=dict, init=False)
    # The table schemas where the Arrow decoder was found not to write where it parses: ``auto``
    # takes Spark's decoder there, ``arrow`` its own plan without looking again.
    _elsewhere: set[Key] = field(default_factory=set, init=False)
    _rules: dict[Key, list[Rule | None]] = field(default_factory=dict, init=False)  # by the rows' columns
    _spark_batches: int = field(default=0, init=False)  # batches ``decoder: auto`` gives Spark's decoder next
    _schema_ids: set[int] | None = field(default=None, init=False)  # registry ids known (_decode_where_written)
    # flatten string columns a batch found objects or arrays in: later batches do not look for them
    # again (``Layout.nested``), whatever the table schema
    _nested: set[str] = field(default_factory=set, init=False)

    def __post_init__(self) -> None:
        self._writer = TableWriter(self.spark, self.catalog, self.spec, pipeline_id=self.pipeline)
        if self.spec.errors.quarantine_table:  # one for all batches: its writer keeps the table and what it read of it
            self._quarantine = QuarantineTable(self.spark, self.catalog, self.spec, self.pipeline)
        if self.spec.transform:
            self._transform = resolve_transform(self.spec.transform)

    @property
    def _single_pass(self) -> bool:
        """Whether batches take the single pass: the Arrow writer and no transform."""
        return self.writer.engine == "arrow" and self._transform is None

    @property
    def writer(self) -> TableWriter:
        """The target table's writer."""
        assert self._writer is not None
        return self._writer

    def resume(self, stream: str) -> CommitMarker | None:
        """The last commit of ``stream``; prepares error-topic de-duplication from it."""
        last = self.writer.last_commit(stream)
        self._error_offsets = {t: dict(p) for t, p in last.error_offsets.items()} if last else {}
        self._dropped = int(last.extra.get(DROPPED, "0")) if last else 0
        self._offsets = {t: dict(p) for t, p in last.offsets.items()} if last else {}
        if self.publisher is not None:
            self.publisher.recover(since=self._error_offsets.get(self.publisher.topic, {}))
        return last

    def router(self) -> ErrorRouter:
        """The error policy of this table."""
        return ErrorRouter(self.spec, publisher=self.publisher, quarantine=self._quarantine)

    def process(
        self,
        raw: DataFrame,
        *,
        batch_id: int,
        stream: str,
        offsets: Offsets | None = None,
        lag: int | None = None,
        lost: Mapping[str, int] | None = None,
    ) -> BatchReport:
        """Decode, check, route and commit one Kafka-shaped batch.

        ``offsets``: the stream's source offsets once this batch is committed. When None (Spark's
        sources) they are the last commit's advanced past the batch's records, found in the same
        pass that reads them. ``lost``: the ranges the reader skipped as gone from Kafka before it.

        Raises:
            RecordError: a bad record and neither skip_error nor an error target (nothing committed).
            ExpectationFailedError: a ``fail`` expectation was violated (nothing committed).
        """
        started = time.monotonic()
        report = BatchReport(
            pipeline=self.pipeline, table=self.spec.identifier, batch_id=batch_id, stream=stream, lag=lag,
            records_lost=dict(lost or {}),
        )  # fmt: skip
        cached: list[DataFrame] = []

        def persist(frame: DataFrame) -> DataFrame:
            frame = frame.persist()
            cached.append(frame)
            return frame

        try:
            with self.writer.batch():  # one load of the table for the batch's reads, one more to commit
                if self._already_committed(batch_id, stream):
                    report.batch_latency_s = time.monotonic() - started
                    self._notify(report)
                    return report
                self._process(raw, batch_id=batch_id, stream=stream, offsets=offsets, report=report, persist=persist)
        except Exception as exc:
            report.error = f"{type(exc).__name__}: {exc}"
            self._notify(report)
            raise
        finally:
            for frame in cached:
                frame.unpersist()
        report.batch_latency_s = time.monotonic() - started
        self._notify(report)
        return report

    def _already_committed(self, batch_id: int, stream: str) -> bool:
        """Whether ``batch_id`` of ``stream`` is in the table already: a replay, left alone entirely.

        Spark's Kafka source runs the last batch again when a crash fell between the table commit
        and its own commit log. Routing such a batch again would publish its bad records a second
        time (the error topic's de-duplication starts after the last commit); the commit itself
        would be skipped anyway.
        """
        last = self.writer.last_commit(stream)
        if last is None or batch_id > last.batch_id:
            return False
        log.info("%s: batch %d of %s is already committed; skipped", self.spec.identifier, batch_id, stream)
        return True

    def _process(
        self, raw: DataFrame, *, batch_id: int, stream: str, offsets: Offsets | None, report: BatchReport, persist: Any
    ) -> None:
        table_schema = self.writer.current_schema()  # None when there is no table yet
        if self._single_pass:
            self._process_single(raw, batch_id=batch_id, stream=stream, offsets=offsets, report=report,
                                 persist=persist, table_schema=table_schema)  # fmt: skip
            return
        flush_time = self.clock()
        parsed = self._parse_for_merge(raw, flush_time=flush_time, table_schema=table_schema, persist=persist)
        rest = raw if parsed is None else parsed.left  # what Spark's decoder reads: None when none is left
        report.records_in = 0 if parsed is None else parsed.stats["in"]
        checked = _Checked()
        if rest is not None and parsed is not None and parsed.few_left:
            checked = self._sorted_here(rest, flush_time, table_schema, report)
        elif rest is not None:
            decoder: Literal["spark"] | None = None if parsed is None else "spark"
            # The tasks that left records to Spark counted them and took their offsets.
            checked = self._checked(
                rest, flush_time, table_schema, persist, report, offsets=offsets is None and parsed is None,
                decoder=decoder, count=None if parsed is None else parsed.left_count,
            )  # fmt: skip
        if parsed is not None:
            checked = checked.with_certified(parsed.rows, parsed.stats, list(self.spec.expectations))
            checked = checked.with_settled(parsed.errors, parsed.quarantined)
        if offsets is None:
            offsets = merge_offsets(self._offsets, checked.offsets)
        report.expectations_passed, report.expectations_failed = checked.passed, checked.failed
        report.records_dropped = checked.dropped
        plan = None
        if checked.rows is not None:  # None only when the tasks that decoded the batch wrote all of it
            from pyspark.sql.types import StructType

            writable = [f for f in checked.rows.schema.fields if not f.name.startswith(INTERNAL_PREFIX)]
            plan = self.writer.plan(StructType(writable))
        routing = self.router().route(
            checked.errors, checked.quarantined, batch_id=batch_id, quarantined_count=checked.quarantined_count
        )
        if plan is not None and plan.changes:  # applying an empty plan would only drop the loaded table and reload it
            self.writer.apply(plan)
        self._commit(checked.rows, batch_id=batch_id, stream=stream, offsets=offsets, report=report, routing=routing)

    def _checked(
        self,
        raw: DataFrame,
        flush_time: dt.datetime,
        table_schema: StructType | None,
        persist: Any,
        report: BatchReport,
        *,
        offsets: bool,
        decoder: Literal["spark"] | None = None,
        count: int | None = None,
    ) -> _Checked:
        """Decode, transform and check ``raw``: the rows to write, what leaves the table, the counts.

        Counts ``raw`` into ``report.records_in`` first, unless ``count`` says how many it holds.
        ``offsets``: whether to find the source offsets past ``raw`` (Spark's sources; the direct
        reader knows them). ``decoder``: ``spark`` for the records the Arrow decoder left
        (:meth:`_parse_for_merge`).
        """
        raw = persist(raw)
        report.records_in += raw.count() if count is None else count
        seen = batch_offsets(raw) if offsets else {}
        decoded = decode(
            raw, self.spec, flush_time=flush_time, known_columns=_known(table_schema), base_dir=self.base_dir,
            decoder=decoder,
        )  # fmt: skip
        for frame in decoded.to_persist():
            persist(frame)  # rows and errors are both read from it: one decode pass per batch
        rows = decoded.rows
        filtered = 0
        if self._transform is not None:
            before = rows.count()
            rows = persist(self._transform(rows))  # cached: it may be costly, and it is counted
            missing = [c for c in COORDINATES if c not in rows.columns]
            if missing:
                raise ConfigError.one(
                    str(self.spec.transform),
                    "transform",
                    self.spec.transform,
                    f"a function keeping the columns {', '.join(COORDINATES)} (it dropped {', '.join(missing)})",
                    "BAD_TRANSFORM",
                )
            # A transform that filters drops those records on purpose: counted, so nothing vanishes
            # unaccounted (``verify``). One that adds rows is not a filter; it drops nothing.
            filtered = max(0, before - rows.count())
        payload = _payload_columns(rows.columns)
        # The rows are a projection of a cached frame (the decode outcome, or the transform's output):
        # caching the flagged rows again would only copy them.
        rows, quarantined, expectations = apply_expectations(
            rows,
            raw,
            self.spec.expectations,
            payload_columns=payload,
            persist=_keep if self._transform is not None or decoded.to_persist() else persist,
        )
        keys = self.spec.key_fields if self.spec.upserts else []
        rows, rejected = write_rejections(
            rows, raw, required=_not_null(table_schema), keys=keys, payload_columns=payload
        )
        return _Checked(
            offsets=seen,
            rows=rows,
            errors=decoded.errors if rejected is None else decoded.errors.unionByName(rejected),
            quarantined=quarantined,
            quarantined_count=expectations.quarantined,
            passed=expectations.passed,
            failed=expectations.failed,
            dropped=expectations.dropped + filtered,
        )

    def _parse_for_merge(
        self, raw: DataFrame, *, flush_time: dt.datetime, table_schema: StructType | None, persist: Any
    ) -> ParsedRows | None:
        """An upsert's records the Arrow decoder certifies, as rows for the MERGE; None where it does not apply.

        The MERGE stays Spark's; what changes is who decodes: the task that parses a record with
        Arrow builds its row and checks it (``write/certified.py``), and only the records it leaves
        go through Spark's decoder and checks. Whether a table's batches can be parsed so is found
        once per table schema, from the plan of Spark's decoder (as the single pass does). Under
        ``decoder: auto`` a batch that left more records to Spark than Arrow certified gives the
        next :data:`AUTO_ARROW_BACKOFF` batches to Spark's decoder alone: both passes cost more there.
        """
        if not self.spec.upserts or self._transform is not None or is_schemaful(self.spec):
            return None  # a Debezium envelope is schema-driven, whatever its format
        if not arrow_parses(self.spec):
            return None
        decoder = self.spec.source.decoder
        if decoder == "spark" or (decoder == "auto" and self.spec.source.format not in AUTO_ARROW_WHERE_PARSED):
            return None
        if decoder == "auto" and self._spark_batches > 0:
            self._spark_batches -= 1
            return None
        known = _known(table_schema)
        schema_key = tuple((known or {}).items())
        shape = self._where_parsed.get(schema_key)
        if shape is None:
            if schema_key in self._elsewhere:
                return None
            from pyspark.sql.types import StructType

            decoded = decode(
                raw, self.spec, flush_time=flush_time, known_columns=known, base_dir=self.base_dir, decoder="spark"
            )
            rows = decoded.rows
            rules = self._arrow_rules(rows.schema)
            if decoded.layout is None or not writes_where_parsed(self.spec, decoded.layout, rules):
                self._elsewhere.add(schema_key)
                return None
            columns = StructType([f for f in rows.schema.fields if not f.name.startswith(INTERNAL_PREFIX)])
            shape = _WhereParsed(decoded.layout, columns, Labels(), [r for r in rules if r is not None])
            self._where_parsed[schema_key] = shape
        needed = {name.lower() for name in [*_not_null(table_schema), *self.spec.key_fields]}
        required = [name for name in shape.schema.names if name.lower() in needed]
        parsed = rows_where_parsed(
            kafka_frame(raw), self.spec, shape.layout.reading_nested(self._nested), shape.schema,
            pt=pt_value(self.spec.partition_window, flush_time), rules=shape.rules, required=required, persist=persist,
            payload=_payload(shape.schema),
        )  # fmt: skip
        self._nested |= parsed.nested
        if decoder == "auto" and parsed.left_count > parsed.stats["in"]:
            self._spark_batches = AUTO_ARROW_BACKOFF  # mostly Spark's to decode: its decoder alone costs less
        return parsed

    def _sorted_here(
        self, rest: DataFrame, flush_time: dt.datetime, table_schema: StructType | None, report: BatchReport
    ) -> _Checked:
        """The few records an upsert's tasks left to Spark (``rest``), checked and sorted on the driver.

        Spark's decoder and checks label them as the single pass labels its records (:meth:`_labelled`);
        one Spark job brings them here, sorted into errors, quarantined records and rows. The
        step-by-step path (:meth:`_checked`) cost an upsert 1.2-1.5 s a batch in jobs over those few
        records (expectations, rejections, error routing's counts: benchmarks/fixes.md, stop 57).
        The rows that pass, rarely any, join the MERGE's source as a frame. Adds them to
        ``report.records_in``.
        """
        decoded = decode(
            rest, self.spec, flush_time=flush_time, known_columns=_known(table_schema), base_dir=self.base_dir,
            decoder="spark",
        )  # fmt: skip
        labelled, labels, _ = self._labelled(decoded, table_schema, keys=self.spec.key_fields)
        kept, left = sort_on_driver(labelled, labels)
        stats = left.stats
        report.records_in += stats["in"]
        passed, failed = self._verdicts(stats, labels)
        return _Checked(
            offsets=stats["offsets"],
            rows=written_rows(labelled, labels) if kept else None,
            errors=left.errors or None,
            quarantined=left.quarantined or None,
            quarantined_count=len(left.quarantined),
            passed=passed,
            failed=failed,
            dropped=stats["dropped"],
        )

    def _write_decoded(
        self, raw: DataFrame, *, flush_time: dt.datetime, table_schema: StructType | None, persist: Any
    ) -> tuple[SortedBatch, Labels]:
        """A schema-driven format's single pass (:meth:`_write_single`'s, for Avro, Protobuf, JSON Schema).

        Where it applies, the tasks that decode the records write them (:meth:`_decode_where_written`);
        the records they leave to Spark (bad ones, a quarantine rule's violations, an unseen schema
        id), when few, are decoded again by Spark's side and sorted on the driver, as the other
        formats' are (:meth:`_write_where_parsed`). Elsewhere Spark's side decodes the batch and
        the single pass writes it.
        """
        raw, codec, written = self._decode_where_written(raw, flush_time=flush_time, persist=persist)
        if written is not None and written.left is None:
            batch = SortedBatch(written.files, list(written.errors), [], written.stats)
            return batch, Labels.of(self.spec.expectations)
        source = raw if written is None else written.left
        assert source is not None
        decoded = decode(
            source, self.spec, flush_time=flush_time, known_columns=_known(table_schema), base_dir=self.base_dir,
            codec=codec,
        )  # fmt: skip
        labelled, labels, columns = self._labelled(decoded, table_schema)
        if len(decoded.passes or []) > 1 and not (written is not None and written.few_left):
            for frame in decoded.passes or []:  # Avro: both halves of the union read the JVM's pass
                persist(frame)
        if written is None:
            self.writer.prepare(columns)
            return self.writer.write_sorted(labelled, labels), labels
        return self._with_left(written, labelled, labels), labels

    def _decode_where_written(
        self, raw: DataFrame, *, flush_time: dt.datetime, persist: Any
    ) -> tuple[DataFrame, Codec | None, ParsedBatch | None]:
        """A schema-driven batch decoded and written by the same tasks (the Arrow writer).

        Returns the batch (cached when its schema ids were read first), the codec Spark's side
        decodes the records left with (None: the batch's own, read by Spark's side), and what the
        tasks wrote (None where the pass does not apply).

        The decoder is this format's own (``decode/schemaful.py``) on either path, so only what it
        cannot keep goes back to Spark: records that do not decode for a reason the table's columns
        play a part in, miss a value the table requires or violate a ``quarantine``, ``drop`` or
        ``fail`` rule, and records of a schema id the codec did not know. Settled decode errors come
        back as error rows (``ParsedBatch.errors``).

        It applies without a Debezium envelope or ``include_headers``, with expectations all
        translated for pyarrow, and a table whose columns take the decoded ones as they are (no
        nested column wider than the writer schema's). For Avro the JVM decodes first
        (``decode/avro_jvm.py``): the tasks decode only the records it did not keep.
        """
        spec = self.spec
        if spec.source.envelope == "debezium" or spec.source.include_headers:
            return raw, None, None
        raw, codec, read = self._codec(raw, persist)
        pt = pt_value(spec.partition_window, flush_time)
        schema = row_schema(codec, pt)
        rules = self._arrow_rules(schema)
        if not any(rule is None for rule in rules):
            self.writer.prepare(schema)
            table = self.writer.current_schema()
            if table is not None and takes_as_is(codec.columns, table):
                frame = kafka_frame(raw)
                if writers := avro_jvm.jvm_writers(frame, codec):  # the tasks check its text (not_utf8)
                    frame = avro_jvm.staged(frame, codec, writers, text=False)
                decoded = self.writer.write_where_parsed(
                    frame, codec, pt=pt, rules=[r for r in rules if r], persist=persist
                )
                if decoded.unseen:  # Spark's side decodes their records: it must know them
                    assert self._schema_ids is not None
                    self._schema_ids |= decoded.unseen
                    codec = build_codec(kafka_frame(raw), spec, base_dir=self.base_dir, ids=self._schema_ids)
                    # Their writer may have fields the table lacks (a version older than the latest)
                    self.writer.prepare(row_schema(codec, pt))
                return raw, codec, decoded
        return raw, codec if read else None, None  # Spark's side decodes the batch: it needs all of its ids

    def _codec(self, raw: DataFrame, persist: Any) -> tuple[DataFrame, Codec, bool]:
        """The batch's codec, the batch (cached when a job read its schema ids first), and whether one did.

        The first batch starts from the ids of the subjects' latest versions, which the registry
        gives with no Spark job (:func:`~kafka_iceberg.decode.schemaful.latest_ids`); where the
        topics do not name the subjects, its ids are read from it (one small Spark job, after which
        the batch is read again: it is cached). Later batches fetch the ids earlier batches had, from
        the registry client's cache, with the subject's latest schema. Records with an id not among
        them are left to Spark by the tasks, which report the id, and it is known from then on.
        """
        spec = self.spec
        known = self._schema_ids if spec.source.topics else None  # the topics name the subjects
        if known is None:
            known = latest_ids(spec)
        read = known is None and spec.source.avro is None  # plain Avro has one schema, from its file
        if read:
            raw = persist(raw)
        codec = build_codec(kafka_frame(raw), spec, base_dir=self.base_dir, ids=known)
        self._schema_ids = codec.known_ids
        return raw, codec, read

    def _process_single(
        self,
        raw: DataFrame,
        *,
        batch_id: int,
        stream: str,
        offsets: Offsets | None,
        report: BatchReport,
        persist: Any,
        table_schema: StructType | None,
    ) -> None:
        """The single pass (Arrow writer): one Spark job decodes, checks and writes, nothing is cached or counted.

        Only what leaves the table (errors, quarantined records) and the counts come back to the
        driver, which routes them and then commits the files the job wrote, in that order.
        """
        written, labels = self._write_single(raw, persist=persist, table_schema=table_schema)
        faults.reached("written")
        stats = written.stats
        report.records_in = stats["in"]
        report.expectations_passed, report.expectations_failed = self._verdicts(stats, labels)
        report.records_dropped = stats["dropped"]
        if offsets is None:
            offsets = merge_offsets(self._offsets, stats["offsets"])
        routing = self.router().route(  # the rows are on the driver already: no Spark job to count or order them
            written.errors or None, written.quarantined or None, batch_id=batch_id
        )
        self._commit(
            None, batch_id=batch_id, stream=stream, offsets=offsets, report=report, routing=routing,
            written=written.files,
        )  # fmt: skip

    @staticmethod
    def _verdicts(stats: dict[str, Any], labels: Labels) -> tuple[dict[str, int], dict[str, int]]:
        """Each rule's passes and violations in a sorted batch's counts (``checks.labels.merged_stats``).

        Raises:
            ExpectationFailedError: a ``fail`` rule was violated (nothing is committed).
        """
        for (name, sql, action), violations, first in zip(
            labels.rules, stats["violations"], stats["first"], strict=True
        ):
            if action == "fail" and violations:
                raise violation(name, sql, violations, tuple(first))
        failed = {name: v for (name, _, _), v in zip(labels.rules, stats["violations"], strict=True)}
        return {name: stats["decoded"] - v for name, v in failed.items()}, failed

    def _write_single(
        self, raw: DataFrame, *, persist: Any, table_schema: StructType | None
    ) -> tuple[SortedBatch, Labels]:
        """The single pass's data files (not committed), what leaves the table, and its labels.

        One Spark job; two when the Arrow decoder writes the records it certifies where it parses
        them and leaves some to Spark's decoder (``write/certified.py``). That path reads the
        batch's decode plan only for its columns, which are the same for every batch against the
        same table: it is built once per table schema (0.2-1 s of Spark analysis per batch).
        """
        flush_time = self.clock()
        if is_schemaful(self.spec):
            return self._write_decoded(raw, flush_time=flush_time, table_schema=table_schema, persist=persist)
        if discovers_columns(self.spec):
            raw = persist(raw)  # read twice: once to find the new columns, once to decode
        known = _known(table_schema)
        schema_key = tuple((known or {}).items())
        shape, decoder = self._choose_decoder(schema_key)
        if shape is not None:
            self.writer.prepare(shape.schema)
            written = self._write_where_parsed(
                raw, shape, flush_time=flush_time, known=known, table_schema=table_schema, persist=persist
            )
            return written, shape.labels
        # Where the Arrow decoder applies, the shape (columns, labels) is taken from Spark's decoder's
        # plan: the same columns, and 0.3-0.7 of the Spark analysis to build (Arrow's plan is Spark's
        # for the records it leaves, plus its own pass and a union).
        arrow = uses_arrow(self.spec, decoder) and schema_key not in self._elsewhere
        decoded = decode(
            raw, self.spec, flush_time=flush_time, known_columns=known, base_dir=self.base_dir,
            decoder="spark" if arrow else decoder,
        )  # fmt: skip
        labelled, labels, columns = self._labelled(decoded, table_schema)
        self.writer.prepare(columns)
        layout = decoded.layout if arrow else None
        if layout is None and "arrow" in (decoder, self.spec.source.decoder) and schema_key not in self._elsewhere:
            # text and binary: their rows made as sent by the tasks that write them (decode/as_sent.py)
            layout = as_sent_layout(self.spec.source.format, self.spec.source.effective_mode)
        rules = self._arrow_rules(columns) if layout is not None else []
        if layout is not None and writes_where_parsed(self.spec, layout, rules):
            shape = _WhereParsed(layout, columns, labels, [r for r in rules if r is not None])
            self._where_parsed[schema_key] = shape
            written = self._write_where_parsed(
                raw, shape, flush_time=flush_time, known=known, table_schema=table_schema, persist=persist
            )
            return written, labels
        if arrow or decoder == "arrow" or layout is not None:  # not written where parsed against this schema
            self._elsewhere.add(schema_key)
        if arrow and decoder != "arrow":  # ``decoder: arrow``: its pass feeds the rows (auto keeps Spark's plan)
            decoded = decode(
                raw, self.spec, flush_time=flush_time, known_columns=known, base_dir=self.base_dir, decoder=decoder
            )
            labelled, labels, _ = self._labelled(decoded, table_schema)
        if decoded.parsed is not None:
            persist(decoded.parsed)  # the Arrow decoder's pass, read by both its certified and its other records
        return self.writer.write_sorted(labelled, labels), labels

    def _choose_decoder(self, schema_key: Key) -> tuple[_WhereParsed | None, Literal["arrow"] | None]:
        """What this batch tries: a known shape written where parsed, or the decoder to plan with.

        The decoder is None for the one ``source.decoder`` names (``auto`` without a choice: Spark's).

        ``decoder: auto`` tries the Arrow decoder where it may write what it parses, and remembers per
        table schema where it may not. A batch that left more records to Spark's decoder than the
        driver sorts itself took a second job of Python tasks, which made whole runs slower than
        Spark's decoder alone (docs/decode.md, "Measured"): the next :data:`AUTO_ARROW_BACKOFF`
        batches take Spark's decoder, then Arrow is tried again.
        """
        auto = self.spec.source.decoder == "auto"
        if auto and self._spark_batches > 0:
            self._spark_batches -= 1
            return None, None
        shape = self._where_parsed.get(schema_key)
        if shape is not None:
            return shape, None
        if auto and self.spec.source.format in AUTO_ARROW_WHERE_PARSED and schema_key not in self._elsewhere:
            return None, "arrow"
        return None, None

    def _write_where_parsed(
        self,
        raw: DataFrame,
        shape: _WhereParsed,
        *,
        flush_time: dt.datetime,
        known: dict[str, str] | None,
        table_schema: StructType | None,
        persist: Any,
    ) -> SortedBatch:
        """Certified records written by the tasks that parse them; the others through Spark's decoder.

        The others, when few, are sorted (and any Spark's decoder keeps written) on the driver.
        """
        pt = pt_value(self.spec.partition_window, flush_time)
        parsed = self.writer.write_where_parsed(
            kafka_frame(raw), shape.layout.reading_nested(self._nested), pt=pt, rules=shape.rules, persist=persist,
            payload=_payload(shape.schema),
        )  # fmt: skip
        self._nested |= parsed.nested
        if parsed.left is None:
            return SortedBatch(parsed.files, list(parsed.errors), list(parsed.quarantined), parsed.stats)
        if self.spec.source.decoder == "auto" and not parsed.few_left:
            self._spark_batches = AUTO_ARROW_BACKOFF
        rest = decode(
            parsed.left, self.spec, flush_time=flush_time, known_columns=known, base_dir=self.base_dir, decoder="spark"
        )
        return self._with_left(parsed, self._labelled(rest, table_schema)[0], shape.labels)

    def _with_left(self, parsed: ParsedBatch, labelled: DataFrame, labels: Labels) -> SortedBatch:
        """What the tasks wrote, with the records they left (``labelled`` by Spark's side) sorted and written.

        On the driver when they are few (``ParsedBatch.few_left``), by a job of the single pass's tasks otherwise.
        """
        written = self.writer.write_sorted(labelled, labels, on_driver=parsed.few_left)
        stats = merged_stats([parsed.stats, written.stats], len(labels.rules))
        errors = [*parsed.errors, *written.errors]  # the router orders them by their coordinates
        quarantined = [*parsed.quarantined, *written.quarantined]
        return SortedBatch(parsed.files + written.files, errors, quarantined, stats)

    def _arrow_rules(self, schema: StructType) -> list[Rule | None]:
        """The expectations translated for pyarrow over rows of ``schema`` (None where one is not)."""
        columns = {f.name: f.dataType.simpleString() for f in schema.fields}
        key = tuple(columns.items())
        if key not in self._rules:  # a few py4j calls per rule: once per row schema, not per batch
            self._rules[key] = [translate(self.spark, e.expr, columns) for e in self.spec.expectations.values()]
        return self._rules[key]

    def _labelled(
        self, decoded: Decoded, table_schema: StructType | None, *, keys: list[str] | None = None
    ) -> tuple[DataFrame, Labels, StructType]:
        """The single pass's frame of ``decoded`` with every check as a column, its labels, and its rows' columns.

        ``keys``: an upsert's key fields, which a row must have (:meth:`_sorted_here`).
        """
        frame, row_columns = decoded.single
        labelled, labels = check_columns(
            frame,
            row_columns,
            self.spec.expectations,
            required=_not_null(table_schema),
            keys=keys or [],
            payload_columns=_payload_columns(row_columns),
        )
        from pyspark.sql.types import StructType

        # the rows' columns read off the labelled frame's schema: a select of them would cost a plan
        return labelled, labels, StructType([f for f in labelled.schema.fields if f.name in labels.carry])

    def _commit(
        self,
        rows: DataFrame | None,
        *,
        batch_id: int,
        stream: str,
        offsets: Offsets,
        report: BatchReport,
        routing: RoutingResult,
        written: list[WrittenFile] | None = None,
    ) -> None:
        """Account for the routed records, then commit the rows (or the files written) with the batch's marker.

        ``rows`` is None only when ``written`` holds the batch's files.
        """
        report.records_failed = routing.failed
        report.records_skipped, report.records_published = routing.skipped, routing.published
        report.records_quarantined = routing.quarantined
        if routing.quarantined:
            faults.reached("quarantined")
        if routing.error_offsets and self.publisher is not None:
            self._error_offsets = {self.publisher.topic: dict(routing.error_offsets)}
        if rows is not None and not self.spec.upserts and TOMBSTONE_COLUMN in rows.columns:
            rows = rows.drop(TOMBSTONE_COLUMN)
        # Records dropped on purpose (``drop`` expectations, a filtering transform, ``skip_error``),
        # cumulative per stream and committed with the offsets, so that ``verify`` can account for them.
        dropped = self._dropped + report.records_dropped + report.records_skipped
        error_offsets = self._error_offsets
        if self.publisher is not None:  # the next recovery must still find what it found and no commit consumed
            topic = self.publisher.topic
            start = self.publisher.resume_offsets(offsets, error_offsets.get(topic, {}))
            error_offsets = {**error_offsets, topic: start} if start else error_offsets
        marker = CommitMarker(
            stream=stream,
            batch_id=batch_id,
            offsets=offsets,
            error_offsets=error_offsets,
            extra={DROPPED: str(dropped)},
        )
        write_started = time.monotonic()
        result = self.writer.commit(rows, marker, written=written)
        report.write_latency_s = time.monotonic() - write_started
        self._dropped = dropped
        self._offsets = offsets
        faults.reached("committed")
        report.committed = not result.skipped
        report.snapshot_id = result.snapshot_id
        report.records_written = result.records_written
        report.files_created = result.files_added
        report.bytes_written = result.bytes_added
        report.commit_retries = result.retries
        report.commit_latency_s = result.latency_ms / 1000

    def _notify(self, report: BatchReport) -> None:
        for observer in self.observers:
            try:
                observer(report)
            except Exception as exc:  # an observer must never fail the pipeline
                log.warning("observer failed for %s batch %s: %s", report.table, report.batch_id, summary(exc))
                log.debug("observer failure", exc_info=True)
