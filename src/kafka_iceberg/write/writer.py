"""The write stage: one :class:`TableWriter` per target table.

``plan``/``apply`` create the namespace and table or evolve them; ``commit`` writes one batch as one
Iceberg commit carrying the idempotency marker, skipping batches already committed and retrying
commit conflicts. See docs/write.md.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from kafka_iceberg import faults
from kafka_iceberg.checks.labels import Labels
from kafka_iceberg.config import IDENTIFIER, IDENTIFIER_EXPECTED
from kafka_iceberg.errors import CommitMarkerError, ConfigError
from kafka_iceberg.records import INTERNAL_PREFIX, TOMBSTONE_COLUMN
from kafka_iceberg.spec.model import TableSpec
from kafka_iceberg.write import commit as modes
from kafka_iceberg.write.arrow_files import (
    FileTarget,
    SortedBatch,
    WrittenFile,
    append_files,
    arrow_unwritable,
    drained,
    driver_files,
    file_ledger,
    file_target,
    replace_partitions,
    sort_and_write,
    write_engine,
    write_frame,
)
from kafka_iceberg.write.certified import ParsedBatch, write_where_parsed
from kafka_iceberg.write.jvm import IcebergTable, SnapshotInfo, cleanable_failure, with_commit_properties
from kafka_iceberg.write.marker import (
    BATCH_ID_KEY,
    COPIED_FROM_KEY,
    PIPELINE_KEY,
    STREAM_KEY,
    CommitMarker,
    CommitResult,
    summaries_in,
)
from kafka_iceberg.write.plan import TablePlan, TableState, build_plan, check_identifiers
from kafka_iceberg.write.properties import (
    COMMIT_MAX_WAIT_MS,
    COMMIT_MAX_WAIT_MS_DEFAULT,
    COMMIT_MIN_WAIT_MS,
    COMMIT_MIN_WAIT_MS_DEFAULT,
    COMMIT_NUM_RETRIES,
    COMMIT_NUM_RETRIES_DEFAULT,
    int_property,
)
from kafka_iceberg.write.schema import quote

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

    from kafka_iceberg.checks.arrow_rules import Rule
    from kafka_iceberg.write.certified import Parser

log = logging.getLogger(__name__)
# Errors of a statement another writer ran first (table, namespace, column or partition field exists).
_RACE_WORDS = ("already exists", "duplicate")


class TableWriter:
    """Creates, evolves and commits to one Iceberg table.

    Args:
        spark: the session; the catalog must already be attached (:func:`kafka_iceberg.session.attach_catalogs`).
        catalog: Spark catalog name of the target.
        spec: the table spec.
        pipeline_id: the pipeline's id, written into every commit marker.
        sleep: waits between retries (seconds); replaced in tests.

    Raises:
        ConfigError: a catalog, namespace, table or pipeline name that is not a plain identifier, or a
            ``commit.retry.*`` property that is not a non-negative integer.
    """

    def __init__(
        self,
        spark: SparkSession,
        catalog: str,
        spec: TableSpec,
        *,
        pipeline_id: str,
        sleep: Callable[[float], None] = time.sleep,
    ):
        check_identifiers(spec, catalog)
        if not IDENTIFIER.match(pipeline_id):
            raise ConfigError.one(spec.declared_in, "pipeline", pipeline_id, IDENTIFIER_EXPECTED, "INVALID_IDENTIFIER")
        self.spark = spark
        self.catalog = catalog
        self.spec = spec
        self.pipeline_id = pipeline_id
        self.table = f"{catalog}.{spec.namespace}.{spec.name}"
        self.retry_policy = modes.RetryPolicy(
            num_retries=int_property(spec, COMMIT_NUM_RETRIES, COMMIT_NUM_RETRIES_DEFAULT),
            min_wait_ms=int_property(spec, COMMIT_MIN_WAIT_MS, COMMIT_MIN_WAIT_MS_DEFAULT),
            max_wait_ms=int_property(spec, COMMIT_MAX_WAIT_MS, COMMIT_MAX_WAIT_MS_DEFAULT),
        )
        self._sleep = sleep
        self._iceberg = IcebergTable(spark, self.table)
        self._in_batch = False  # inside :meth:`batch`
        self._loaded = False  # this batch loaded the table already (never True outside a batch)
        self._changes = 0  # plans applied through ``spark`` (:meth:`apply`)
        self._sessions: dict[int, int] = {}  # another session's identity → ``_changes`` when it last loaded the table
        # Data files written in this batch that no commit holds yet: deleted when the batch ends, with
        # any the tasks told the ledger of (a job that failed, a task run again) that no commit holds.
        self._pending: set[str] = set()
        self._kept: set[str] = set()  # files of this batch's commits (landed, or that may have)
        self._ledger = file_ledger(spark)

    @property
    def quoted(self) -> str:
        """The table's name as a quoted Spark SQL identifier."""
        return ".".join(quote(p) for p in (self.catalog, self.spec.namespace, self.spec.name))

    # -- loading -----------------------------------------------------------------------------------
    @contextmanager
    def batch(self) -> Iterator[None]:
        """One batch's reads of the table share one load from the catalog.

        Inside, markers, schema, plan and the data files' target read the table as the batch's first
        read loaded it (loaded again after :meth:`apply` changed it); :meth:`commit` loads it once
        more, to see a marker committed meanwhile. Outside, every read loads it. Each load is a
        round trip to the catalog (signed, and on a cluster remote), answered with the whole
        metadata file, which grows with the table's snapshots.

        The Arrow writer's data files that no commit holds when the batch ends (it failed before its
        commit, or its commit surely did not land) are deleted then, as Iceberg's Spark writer
        deletes its own on an aborted write (:meth:`_discard`).
        """
        if self._in_batch:  # a commit inside a batch
            yield
            return
        self._in_batch, self._loaded = True, False
        try:
            yield
        finally:
            self._in_batch = self._loaded = False
            self._discard()

    def _hold(self, files: Sequence[WrittenFile]) -> list[WrittenFile]:
        """``files``, written for this batch, kept until a commit holds them (or deleted at its end)."""
        self._pending.update(f.path for f in files)
        return list(files)

    def _discard(self) -> None:
        """Delete the data files this batch wrote and no commit holds; a file that cannot be is left, and logged.

        Without this, each failed attempt at a batch (a job retried into the same bad record or
        failed expectation) would leave its files in the table's location until
        ``maintain-tables`` removes orphans older than its floor. The ledger adds the files of tasks
        that succeeded in a job that failed (the driver never saw its result) and of tasks Spark ran
        again by a later job (the single pass's cached output lost), whose results no commit took.
        """
        paths = sorted((self._pending | set(drained(self._ledger))) - self._kept)
        self._pending, self._kept = set(), set()
        if not paths:
            return
        try:
            io = self._iceberg.java.io()
            for path in paths:
                io.deleteFile(path)
        except Exception as exc:  # never hide the batch's own failure behind this one
            log.warning(
                "table %s: could not delete %d data file(s) of a batch that did not commit them; "
                "maintain-tables removes them as orphans: %s", self.table, len(paths), exc,
            )  # fmt: skip
            return
        log.info("table %s: deleted %d data file(s) of a batch that did not commit them", self.table, len(paths))

    def _table(self) -> IcebergTable:
        """The table, loaded from the catalog unless this batch has loaded it already."""
        if not self._loaded:
            self._iceberg.refresh()
            self._loaded = self._in_batch
        return self._iceberg

    # -- table management --------------------------------------------------------------------------
    def exists(self) -> bool:
        """Whether the table exists in the catalog (known without asking once this batch loaded it).

        A table the catalog names is loaded to be sure of it: Spark's catalog caches tables, so a
        table another client dropped while the job ran is still named for a while, and only loading
        it tells. Such a table does not exist: the batch creates it again, as a restarted job would.
        """
        if self._loaded:
            return True
        if not self.spark.catalog.tableExists(self.table):
            return False
        try:
            self._table()
        except Exception:
            if not self._dropped():
                raise
            return False
        return True

    def _dropped(self) -> bool:
        """Whether the table is gone from the catalog, asked again past Spark's cached instance."""
        self._forget()
        try:
            self.spark.catalog.refreshTable(self.table)  # forgets Spark's cached instance of the table
        except Exception:  # the cache had let it go already: nothing to forget
            log.debug("table %s: no cached instance to forget", self.table)
        if self.spark.catalog.tableExists(self.table):
            return False
        log.warning(
            "table %s was dropped while the job ran: it is created again, holding this batch's records "
            "onwards; what the dropped table held is not in it", self.table,
        )  # fmt: skip
        return True

    def current_schema(self) -> StructType | None:
        """The table's schema (as this batch loaded it, :meth:`batch`), or None when there is no table."""
        with self.batch():  # outside a batch too, the load that tells the table exists is the one read
            if not self.exists():
                return None
            return self._table().schema()

    def _state(self) -> TableState:
        with self.batch():  # outside a batch too, the load that tells the table exists is the one read
            if not self.exists():  # asked first: a table's namespace exists, so one question, not two, per batch
                namespace_exists = bool(self.spark.catalog.databaseExists(f"{self.catalog}.{self.spec.namespace}"))
                return TableState(namespace_exists=namespace_exists, exists=False)
            t = self._table()
            return TableState(
                namespace_exists=True,
                exists=True,
                schema=t.schema(),
                partition_fields=tuple(t.partition_fields()),
                sort_fields=tuple(t.sort_fields()),
                properties=t.properties(),
            )

    def plan(self, schema: StructType) -> TablePlan:
        """What would be created or evolved so that a batch of ``schema`` can be committed; changes nothing.

        Raises:
            SchemaMismatchError: the table's ``schema_evolution`` refuses a difference.
            ConfigError: an invalid partition spec, or upsert keys the batch lacks.
        """
        return build_plan(self.spec, self.table, self._state(), schema)

    def prepare(self, schema: StructType) -> None:
        """Create or evolve the table so that rows of ``schema`` fit it: :meth:`plan`, then :meth:`apply` what changes.

        An empty plan is not applied: that would only drop the loaded table and load it again.
        """
        plan = self.plan(schema)
        if plan.changes:
            self.apply(plan)

    def apply(self, plan: TablePlan) -> None:
        """Carry out a plan: create the namespace and table, or evolve the table.

        A table created here whose partition fields could not be added afterwards is dropped again,
        so a failed apply never leaves an unpartitioned table behind. When a statement failed because
        another writer made the same change first ("already exists"), the plan is made again and what
        is still missing is applied.

        Raises:
            Exception: the Spark error of the first statement that failed.
        """
        self._changes += 1
        try:
            self._run(plan)
        except Exception as exc:
            self._forget()
            if not any(word in str(exc).lower() for word in _RACE_WORDS):
                raise
            fresh = self.plan(plan.desired)
            if not fresh.changes:
                log.info("table %s: another writer applied the same changes first", self.table)
                return
            if fresh.statements() == plan.statements():
                raise
            log.info("table %s changed while applying its plan; applying the rest", self.table)
            self._run(fresh)
        finally:
            self._forget()

    def _forget(self) -> None:
        """Drop the loaded table (created, evolved or dropped since): the next read loads it."""
        self._iceberg.forget()
        self._loaded = False

    def _run(self, plan: TablePlan) -> None:
        created = False
        for statement in plan.statements():
            log.info("table %s: %s", self.table, statement)
            try:
                self.spark.sql(statement)
            except Exception:
                if created:
                    # Never leave a table behind without its declared partitioning: it is empty, drop it.
                    self.spark.sql(f"DROP TABLE IF EXISTS {self.quoted}")
                raise
            created = created or statement == plan.create_table

    # -- markers -----------------------------------------------------------------------------------
    def _markers(self, stream: str) -> tuple[dict[str, str], int] | None:
        """The newest marker of ``stream``: its summary entries and the snapshot holding them."""
        # Maintenance copies the newest markers into its snapshots; a copy taken just before an ingest
        # commit can sit above that newer commit. So: the highest batch id, walking down to the first
        # marker that is not a copy (nothing older than a real commit can be newer than it). A copy
        # holds the newest marker in its own entries and every other stream's in OTHER_MARKERS_KEY.
        best: tuple[dict[str, str], int] | None = None
        best_id = -1
        for snap in self._iceberg.ancestry():
            copy = snap.get(COPIED_FROM_KEY) is not None
            if copy:
                candidates = summaries_in(snap.summary())
            elif snap.get(PIPELINE_KEY) == self.pipeline_id and snap.get(STREAM_KEY) == stream:
                candidates = [snap.summary()]
            else:
                continue
            for summary in candidates:
                if summary.get(PIPELINE_KEY) != self.pipeline_id or summary.get(STREAM_KEY) != stream:
                    continue
                batch = summary.get(BATCH_ID_KEY)
                batch_id = int(batch) if batch is not None and batch.isdigit() else -1
                if best is None or batch_id > best_id:
                    best, best_id = (summary, snap.snapshot_id), batch_id
                if not copy:
                    return best
        return best

    def last_commit(self, stream: str) -> CommitMarker | None:
        """The newest marker of this pipeline and ``stream`` in the table's snapshot ancestry.

        Snapshots without a marker (compaction, other writers) and markers of other streams are
        walked past. None when the table does not exist or holds no marker of the stream.

        Raises:
            CommitMarkerError: the newest marker of the stream is malformed.
        """
        with self.batch():  # outside a batch too, the load that tells the table exists is the one read
            if not self.exists():
                return None
            found = self._markers(stream)
        if found is None:
            return None
        try:
            return CommitMarker.from_summary(found[0], found[1])
        except ValueError as exc:
            raise CommitMarkerError(f"table {self.table}: {exc}") from None

    def _find(self, marker: CommitMarker, *, load: bool = True) -> SnapshotInfo | None:
        """The snapshot holding exactly ``marker`` (this pipeline, stream and batch id), if committed.

        ``load=False`` looks in the table as loaded: a commit through it leaves it current.
        """
        if load:
            self._iceberg.refresh()
        found = self._markers(marker.stream)
        if found is not None and found[0].get(BATCH_ID_KEY) == str(marker.batch_id):
            return next((s for s in self._iceberg.ancestry() if s.snapshot_id == found[1]), None)
        return None

    # -- commits -----------------------------------------------------------------------------------
    def commit(
        self, rows: DataFrame | None, marker: CommitMarker, *, written: list[WrittenFile] | None = None
    ) -> CommitResult:
        """Commit one batch as one Iceberg snapshot carrying ``marker``; idempotent and retried.

        A batch whose id is not above the stream's last committed id is skipped. The table is created
        or evolved first if the batch needs it. An empty batch (or one that changes no row) still
        commits an empty append carrying the marker, so the stream's offsets always advance.
        ``written``: the batch's data files, already written by the single pass (:meth:`write_sorted`),
        which planned and evolved the table before writing them; ``rows`` is then not read.

        Raises:
            SchemaMismatchError: the batch does not fit the table under its ``schema_evolution``.
            CommitConflictError: commits still conflicted after every retry; nothing was committed.
            CommitMarkerError: the marker could not be found after the commit.
        """
        # Loaded again: another run of this stream may have committed since the batch began. A table
        # this batch loaded exists: it is loaded without asking first whether it does.
        if self._loaded:
            self._iceberg.refresh()
        with self.batch():  # the marker check's load serves the commit and the look for its snapshot
            return self._commit(rows, marker, written)

    def _commit(self, rows: DataFrame | None, marker: CommitMarker, written: list[WrittenFile] | None) -> CommitResult:
        started = time.monotonic()
        last = self.last_commit(marker.stream)
        if last is not None and marker.batch_id <= last.batch_id:
            log.info(
                "table %s: batch %d of %s already committed (last %d): skipped",
                self.table, marker.batch_id, marker.stream, last.batch_id,
            )  # fmt: skip
            return CommitResult(
                table=self.table,
                stream=marker.stream,
                batch_id=marker.batch_id,
                skipped=True,
                snapshot_id=last.snapshot_id,
                latency_ms=(time.monotonic() - started) * 1000,
            )
        files = None if written is None else self._hold(written)  # the commit settles what becomes of them
        if files is None:  # the single pass planned the table before it wrote the files
            if rows is None:
                raise ValueError("a commit needs the batch's rows or its written files")
            data = rows
            self.prepare(data.schema)
            if self.engine == "arrow":  # the batch's files are written once; every attempt appends them
                files = self._write_files(data)
                faults.reached("written")
        summary = marker.summary(self.pipeline_id)

        def attempt(retry: int) -> SnapshotInfo:
            if retry > 0:
                landed = self._find(marker)  # an attempt whose commit state was unknown may have landed
                if landed is not None:
                    self._settled(files)
                    return landed
            table = self._table()  # as the marker check or _find loaded it (loaded again after an evolution)
            if files is not None:
                self._commit_files(table, files, summary)
            else:
                table_schema = table.schema()
                with_commit_properties(self.spark, summary, lambda: self._write(data, table_schema))
            # A commit through the loaded table leaves it current; Spark's, through another instance, may not.
            found = self._find(marker, load=False) or self._find(marker)
            if found is None and files is None:
                # Spark's action committed nothing (a dynamic overwrite of no rows): the offsets still advance.
                empty = self.spark.createDataFrame([], table_schema)
                with_commit_properties(self.spark, summary, lambda: empty.writeTo(self.table).append())
                found = self._find(marker)
            if found is None:
                raise CommitMarkerError(
                    f"table {self.table}: the commit of batch {marker.batch_id} carries no marker; snapshot "
                    "properties need a classic Spark session with pinned py4j threads (PYSPARK_PIN_THREAD=true)"
                )
            return found

        def on_retry(retry: int, reason: str) -> None:
            log.warning(
                "table %s: commit conflict, retry %d/%d: %s",
                self.table, retry, self.retry_policy.num_retries, reason,
            )  # fmt: skip

        snap, retries = modes.run_with_retries(
            attempt, self.retry_policy, table=self.table, sleep=self._sleep, on_retry=on_retry
        )
        return CommitResult.from_summary(
            table=self.table,
            marker=marker,
            snapshot_id=snap.snapshot_id,
            operation=snap.operation,
            summary=snap.summary(),
            retries=retries,
            latency_ms=(time.monotonic() - started) * 1000,
        )

    def _commit_files(self, table: IcebergTable, files: list[WrittenFile], summary: dict[str, str]) -> None:
        """One Iceberg commit of the Arrow writer's ``files``; they stay pending only if it surely did not land.

        Iceberg's own rule: after a ``CleanableFailure`` (a conflict, a failed validation, the table
        gone) nothing landed, and a retry or the batch's end takes the files; after anything else
        (``CommitStateUnknownException``, a lost connection) they may be in the table and are kept.
        """
        try:
            if files and self.spec.commit_mode == "overwrite":
                replace_partitions(self.spark, table.java, files, summary)
            else:
                append_files(self.spark, table.java, files, summary)  # always a snapshot, files or not
        except Exception as exc:
            if not cleanable_failure(exc):
                self._settled(files)
            raise
        self._settled(files)

    def _settled(self, files: Sequence[WrittenFile] | None) -> None:
        """``files`` are the table's now, or may be: never deleted as the batch's leftovers."""
        for f in files or ():
            self._pending.discard(f.path)
            self._kept.add(f.path)

    @property
    def engine(self) -> str:
        """Who writes the data files: ``arrow`` (pyarrow in Spark tasks) or ``spark`` (Spark's Iceberg writer)."""
        return write_engine(self.spec)

    def _target(self, table: IcebergTable) -> FileTarget:
        """Where the Arrow writer's tasks write: serialized again only when the table's shape changed.

        Raises:
            ConfigError: the table's partition spec is one the Arrow writer cannot write
                (:func:`~kafka_iceberg.write.arrow_files.arrow_unwritable`), before any task runs.
        """

        def read() -> tuple[FileTarget, str | None]:
            target = file_target(self.spark, table.java)
            return target, arrow_unwritable(target.metadata_json)

        target: FileTarget
        target, why = table.of_metadata("file_target", read)
        if why is not None:
            raise ConfigError.one(
                self.spec.declared_in, "write.engine", self.spec.write.engine,
                f"spark (table {self.table} as the catalog holds it: {why}, and the arrow writer's pyiceberg "
                "takes one partition field per column)", "IMPOSSIBLE_COMBINATION",
            )  # fmt: skip
        return target

    def _write_files(self, rows: DataFrame) -> list[WrittenFile]:
        table = self._table()
        data = modes.aligned(modes.drop_internal(rows), table.schema())
        return self._hold(write_frame(data, self._target(table), ledger=self._ledger))

    def write_sorted(self, frame: DataFrame, labels: Labels, *, on_driver: bool = False) -> SortedBatch:
        """The single pass's one Spark job: ``frame`` sorted, its rows written as data files, the rest brought back.

        ``frame`` is :func:`~kafka_iceberg.checks.labels.check_columns`' output. The files are not
        committed (:meth:`commit` with ``written``). The table must exist with the batch's columns
        (:meth:`plan`, :meth:`apply`). ``on_driver``: ``frame`` is small, sorted and written by
        this process (:func:`~kafka_iceberg.write.arrow_files.sort_and_write`).
        """
        table = self._table()
        schema = table.schema()
        internal = [c for c in frame.columns if c.startswith(INTERNAL_PREFIX)]
        data = modes.aligned(frame, schema, keep=internal)
        labels = replace(labels, carry=tuple(schema.names))
        written = sort_and_write(data, self._target(table), labels, on_driver=on_driver, ledger=self._ledger)
        self._hold(written.files)
        return written

    def write_where_parsed(
        self,
        frame: DataFrame,
        parser: Parser,
        *,
        pt: str | None,
        rules: list[Rule],
        persist: Any,
        payload: Sequence[tuple[str, str]] = (),
    ) -> ParsedBatch:
        """Certified records written by the tasks that parse or decode them (not committed).

        ``parser``: the Arrow decoder's layout, or a schema-driven format's codec. ``frame`` is
        Kafka-shaped (:func:`~kafka_iceberg.decode.plan.kafka_frame`); the records the tasks leave
        to Spark come back as a cached frame of the same shape
        (:func:`~kafka_iceberg.write.certified.write_where_parsed`). ``payload``: the row's payload
        columns and Spark types, with which the tasks quarantine records themselves.
        """
        table = self._table()
        target = self._target(table)
        parsed = write_where_parsed(
            frame, self.spec, parser, target, pt=pt, rules=rules, persist=persist, payload=payload,
            ledger=self._ledger,
        )  # fmt: skip
        self._hold(parsed.files)
        return parsed

    def write_driver_rows(self, data: pa.Table) -> list[WrittenFile]:
        """``data``, rows on the driver, written as data files of the table by this process (not committed).

        For a few rows a Spark job costs more than the write: no job runs. The table must fit
        them (:meth:`prepare`); columns it has and ``data`` lacks are null.
        """
        table = self._table()
        return self._hold(driver_files(data, table.schema(), self._target(table)))

    def write_rows(self, rows: DataFrame) -> list[WrittenFile]:
        """``rows`` written as data files of the table (not committed); the table must fit them (:meth:`plan`)."""
        return self._write_files(rows)

    def _column(self, name: str, table_schema: StructType) -> str:
        for f in table_schema.fields:
            if f.name.lower() == name.lower():
                return str(f.name)
        raise ConfigError.one(self.spec.declared_in, "key_fields", name, "a column of the table", "UNKNOWN_COLUMN")

    def _current_in(self, session: SparkSession) -> None:
        """Make ``session`` load the table again if a plan was applied since it last did.

        A streaming query's batches belong to a session of their own, whose catalog keeps its own
        loaded tables: a column this writer added through ``spark`` is not in them, and Spark's write
        of the batch would refuse the column (``INSERT_COLUMN_ARITY_MISMATCH``).
        """
        jsession = session._jsparkSession
        if jsession.equals(self.spark._jsparkSession):
            return
        key = int(jsession.hashCode())
        if self._sessions.get(key) != self._changes:
            session.catalog.refreshTable(self.table)
            self._sessions[key] = self._changes

    def _write(self, rows: DataFrame, table_schema: StructType) -> None:
        self._current_in(rows.sparkSession)
        mode = self.spec.commit_mode
        if mode == "upsert":
            keys = [self._column(k, table_schema) for k in self.spec.key_fields]
            sequence = self._column(self.spec.sequence_field or modes.SEQUENCE_FIELD_DEFAULT, table_schema)
            keep = [c for c in rows.columns if not c.startswith(INTERNAL_PREFIX) or c == TOMBSTONE_COLUMN]
            source = modes.upsert_source(rows.select(*[rows[quote(c)] for c in keep]), table_schema, keys, sequence)
            modes.run_merge(source, self.quoted, table_schema.names, keys, sequence)
            return
        data = modes.aligned(modes.drop_internal(rows), table_schema)
        if mode == "overwrite":
            data.writeTo(self.table).overwritePartitions()
        else:
            data.writeTo(self.table).append()
