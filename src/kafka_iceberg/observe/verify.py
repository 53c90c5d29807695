"""``kafka-iceberg verify``: reconcile every source offset a table committed with where it landed.

For each table of a pipeline and each source partition its commit markers name, every record
still in Kafka below the committed offset (from the partition's earliest offset) must be in
exactly one place: a row of the table (by ``topic, partition, offset``), or an error record in
each error target the table has (the quarantine table, and the error topic by the source
coordinates in its headers) — or be among the records the pipeline dropped on purpose (``drop``
expectations, ``skip_error``), which every commit marker counts (``kafka-iceberg.dropped``,
cumulative per stream, committed atomically with the offsets; the event log holds the same
numbers per batch but is buffered, so a crash can lose its last rows).

Upsert tables replace rows by key (overwrite tables by partition), so their rows cannot be matched
per offset: their table side
is reconciled per batch from the markers (every batch's offsets continue the previous one's) and
the rows found (none twice, none beyond the committed offsets); the error targets are still
reconciled per offset. The report says so.

Reads go through pyiceberg and a confluent-kafka consumer only: no Spark, no JVM.
"""

from __future__ import annotations

import json
import uuid
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from kafka_iceberg.checks.error_topic import H_OFFSET, H_PARTITION, H_PIPELINE, H_TABLE, H_TOPIC
from kafka_iceberg.errors import KafkaIcebergError
from kafka_iceberg.write.marker import (
    BATCH_ID_KEY,
    DROPPED_KEY,
    OFFSETS_KEY,
    PIPELINE_KEY,
    STREAM_KEY,
    decode_offsets,
    summaries_in,
)

Coordinate = tuple[str, int, int]
SCAN_TIMEOUT_S = 300.0
_MAX_LISTED = 20


class VerifyError(KafkaIcebergError):
    """A source topic or error topic could not be read to the end."""


# -- reconciliation (pure) -------------------------------------------------------------------------
@dataclass
class PartitionResult:
    """One source partition of one table."""

    topic: str
    partition: int
    start: int
    end: int
    expected: int
    found: int
    missing: int
    duplicated: int
    missing_offsets: list[list[int]] = field(default_factory=list)
    duplicated_offsets: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class TableResult:
    """The reconciliation of one table."""

    table: str
    mode: str  # "per-offset", or "per-batch" for upsert tables
    targets: list[str]
    partitions: list[PartitionResult]
    dropped: int = 0
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """No gap and no duplicate."""
        return not self.problems

    def to_json(self) -> dict[str, Any]:
        """The result as plain JSON values."""
        out = asdict(self)
        out["ok"] = self.ok
        return out


def _ranges(offsets: Iterable[int]) -> list[list[int]]:
    out: list[list[int]] = []
    for o in sorted(offsets):
        if out and out[-1][1] == o - 1:
            out[-1][1] = o
        else:
            out.append([o, o])
    return out


def _describe(ranges: list[list[int]]) -> str:
    shown = ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in ranges[:_MAX_LISTED])
    return shown + (f" and {len(ranges) - _MAX_LISTED} more ranges" if len(ranges) > _MAX_LISTED else "")


def reconcile(
    table: str,
    *,
    source: Mapping[tuple[str, int], Iterable[int]],
    bounds: Mapping[tuple[str, int], tuple[int, int]],
    rows: Counter[Coordinate],
    quarantine: Mapping[Coordinate, list[str]] | None = None,
    error_topic: Counter[Coordinate] | None = None,
    dropped: int = 0,
    upsert: bool = False,
    batch_gaps: Iterable[str] = (),
) -> TableResult:
    """Check that every source record is in exactly one place.

    Args:
        table: the table's name, for the report.
        source: per ``(topic, partition)``, the offsets of the records in Kafka within ``bounds``.
        bounds: per ``(topic, partition)``, ``(earliest offset in Kafka, committed next offset)``.
        rows: table rows per coordinate.
        quarantine: per coordinate, the ``_error_stage`` of each quarantine row (None: no quarantine table).
        error_topic: error-topic records per source coordinate (None: no error topic).
        dropped: records the pipeline dropped on purpose (from the markers).
        upsert: rows are replaced (upsert, overwrite); offsets absent from the table are not gaps.
        batch_gaps: problems the per-batch check of an upsert table found.
    """
    targets = ["table"] + (["quarantine table"] if quarantine is not None else [])
    targets += ["error topic"] if error_topic is not None else []
    result = TableResult(table, "per-batch" if upsert else "per-offset", targets, [], dropped)
    result.problems.extend(batch_gaps)
    unaccounted = 0
    for (topic, partition), (start, end) in sorted(bounds.items()):
        offsets = sorted({o for o in source.get((topic, partition), ()) if start <= o < end})
        missing, duplicated = [], []
        found = 0
        for offset in offsets:
            c = (topic, partition, offset)
            n_rows = rows.get(c, 0)
            stages = quarantine.get(c, []) if quarantine is not None else []
            n_errors = error_topic.get(c, 0) if error_topic is not None else 0
            where = {"table": n_rows, "quarantine table": len(stages), "error topic": n_errors}
            if n_rows > 1 or len(stages) > 1 or n_errors > 1 or (n_rows and (stages or n_errors)):
                duplicated.append({"offset": offset, **{k: v for k, v in where.items() if v}})
                found += 1
                continue
            if n_rows or stages or n_errors:
                found += 1
                # A bad record goes to every error target; a quarantine expectation's only to the table.
                lost = None
                if error_topic is not None and quarantine is not None:
                    if n_errors and not stages:
                        lost = "quarantine table"
                    elif stages and not n_errors and not stages[0].startswith("expectation:"):
                        lost = "error topic"
                if lost is not None:
                    result.problems.append(f"{topic}[{partition}] offset {offset}: not in the {lost}")
                continue
            if not upsert:
                missing.append(offset)
        unaccounted += len(missing)
        missing_ranges = _ranges(missing)
        result.partitions.append(
            PartitionResult(
                topic, partition, start, end, len(offsets), found, len(missing), len(duplicated),
                missing_ranges, duplicated[:_MAX_LISTED],
            )
        )  # fmt: skip
        if duplicated:
            listed = ", ".join(str(d["offset"]) for d in duplicated[:_MAX_LISTED])
            result.problems.append(f"{topic}[{partition}]: {len(duplicated)} duplicated, offsets {listed}")
        if missing and len(missing) > dropped:
            result.problems.append(f"{topic}[{partition}]: {len(missing)} missing, offsets {_describe(missing_ranges)}")
    extra = [
        c for c in rows if (c[0], c[1]) in bounds and not bounds[(c[0], c[1])][0] <= c[2] < bounds[(c[0], c[1])][1]
    ]
    ahead = [c for c in extra if c[2] >= bounds[(c[0], c[1])][1]]
    if ahead:
        result.problems.append(f"{len(ahead)} row(s) beyond the committed offsets, e.g. {sorted(ahead)[:3]}")
    if unaccounted and unaccounted <= dropped:
        result.notes.append(f"{unaccounted} offset(s) absent everywhere, within the {dropped} dropped on purpose")
    elif unaccounted > dropped and dropped:
        result.problems.append(f"{unaccounted} offset(s) absent everywhere but only {dropped} dropped on purpose")
    if upsert:
        result.notes.append(
            "upsert/overwrite table: rows replaced by later batches cannot be matched per offset; reconciled per batch "
            "from the commit markers (each batch continues the previous one's offsets), rows checked for "
            "duplicates and against the committed offsets, error targets per offset"
        )
    return result


def batch_continuity(markers: list[tuple[int, Mapping[str, Mapping[int, int]]]]) -> list[str]:
    """Problems in a stream's markers, oldest first: batch ids must increase and offsets never go back."""
    problems = []
    previous: tuple[int, Mapping[str, Mapping[int, int]]] | None = None
    for batch_id, offsets in markers:
        if previous is not None:
            if batch_id < previous[0]:
                problems.append(f"batch {batch_id} committed after batch {previous[0]}")
            for topic, parts in previous[1].items():
                for partition, before in parts.items():
                    after = offsets.get(topic, {}).get(partition)
                    if after is None or after < before:
                        problems.append(f"batch {batch_id}: {topic}[{partition}] went back from {before} to {after}")
        previous = (batch_id, offsets)
    return problems


# -- reading -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class StreamMarkers:
    """The markers of one pipeline's stream in a table's ancestry, oldest first."""

    stream: str
    markers: list[tuple[int, dict[str, dict[int, int]], dict[str, str]]]

    @property
    def newest(self) -> tuple[int, dict[str, dict[int, int]], dict[str, str]]:
        """The newest marker: batch id, offsets, summary."""
        return self.markers[-1]


def read_markers(table: Any, pipeline: str) -> dict[str, StreamMarkers]:
    """Markers of ``pipeline`` per stream in the pyiceberg table's ancestry (copies by maintenance once)."""
    metadata = table.metadata
    by_id = {s.snapshot_id: s for s in metadata.snapshots}
    chain = []
    current = metadata.current_snapshot_id
    while current is not None and current in by_id:
        chain.append(by_id[current])
        current = by_id[current].parent_snapshot_id
    streams: dict[str, dict[int, tuple[int, dict[str, dict[int, int]], dict[str, str]]]] = {}
    for snap in reversed(chain):
        summary = dict(snap.summary.additional_properties) if snap.summary else {}
        for marker in summaries_in(summary):  # its own, and those maintenance copied in
            if marker.get(PIPELINE_KEY) != pipeline or STREAM_KEY not in marker:
                continue
            batch = int(marker[BATCH_ID_KEY])
            seen = streams.setdefault(marker[STREAM_KEY], {})
            if batch not in seen:  # a copy maintenance made is the same marker again
                seen[batch] = (batch, decode_offsets(marker.get(OFFSETS_KEY, "{}")), marker)
    return {s: StreamMarkers(s, [m[b] for b in sorted(m)]) for s, m in streams.items()}


def read_kafka(
    config: Mapping[str, str], topic: str, bounds: Mapping[int, tuple[int, int]], *, timeout: float = SCAN_TIMEOUT_S
) -> list[Any]:
    """Committed records of ``topic`` with offsets in ``bounds[partition] = (start, end)``.

    The scan of a partition ends when the consumer's position reaches ``end`` (transaction
    markers and aborted records are stepped over), never on a quiet poll.

    Raises:
        VerifyError: a partition was not read to ``end`` within ``timeout`` seconds.
    """
    import time

    from confluent_kafka import Consumer, TopicPartition

    wanted = {p: (s, e) for p, (s, e) in bounds.items() if s < e}
    if not wanted:
        return []
    consumer = Consumer(
        {
            **config,
            "group.id": f"kafka-iceberg-verify-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    out = []
    try:
        consumer.assign([TopicPartition(topic, p, s) for p, (s, _e) in wanted.items()])
        remaining = dict(wanted)
        deadline = time.monotonic() + timeout
        while remaining:
            for msg in consumer.consume(1000, timeout=0.5):
                partition, offset = int(msg.partition() or 0), int(msg.offset() or 0)
                if msg.error() is None and offset < wanted[partition][1]:
                    out.append(msg)
            for tp in consumer.position([TopicPartition(topic, p) for p in remaining]):
                if tp.offset >= remaining[tp.partition][1]:
                    del remaining[tp.partition]
            if remaining and time.monotonic() > deadline:
                raise VerifyError(f"could not read {topic} partitions {sorted(remaining)} to the end in {timeout:.0f}s")
    finally:
        consumer.close()
    return out


def watermarks(config: Mapping[str, str], topic: str) -> dict[int, tuple[int, int]]:
    """``{partition: (low, high)}`` of ``topic`` (``{}`` when it does not exist).

    Raises:
        VerifyError: the broker answered with another metadata error (read as "no records", it
            would hide what the topic holds).
    """
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    consumer = Consumer(
        {**config, "group.id": f"kafka-iceberg-verify-{uuid.uuid4().hex}", "isolation.level": "read_uncommitted"}
    )
    try:
        meta = consumer.list_topics(topic, timeout=10).topics.get(topic)
        if meta is None or (meta.error is not None and meta.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART):
            return {}
        if meta.error is not None:
            raise VerifyError(f"no metadata for {topic}: {meta.error}")
        return {
            int(p): tuple(int(x) for x in consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10))  # type: ignore[misc]
            for p in meta.partitions
        }
    finally:
        consumer.close()


def verify_table(
    catalog: Any,
    kafka_config: Mapping[str, str],
    *,
    pipeline: str,
    table: str,
    upsert: bool,
    quarantine_table: str | None,
    error_topic: str | None,
) -> TableResult:
    """Reconcile one table of ``pipeline`` (``namespace.name``) in a pyiceberg ``catalog``."""
    if not catalog.table_exists(table):
        return TableResult(table, "per-offset", [], [], notes=["the table does not exist yet: nothing committed"])
    loaded = catalog.load_table(table)
    streams = read_markers(loaded, pipeline)
    committed: dict[tuple[str, int], int] = {}
    dropped = 0
    gaps: list[str] = []
    for markers in streams.values():
        _batch, offsets, summary = markers.newest
        dropped += int(summary.get(DROPPED_KEY, "0") or 0)
        for topic, parts in offsets.items():
            for partition, end in parts.items():
                committed[(topic, partition)] = max(end, committed.get((topic, partition), 0))
        if upsert:
            gaps += [f"stream {markers.stream}: {p}" for p in batch_continuity([(b, o) for b, o, _ in markers.markers])]
    bounds: dict[tuple[str, int], tuple[int, int]] = {}
    source: dict[tuple[str, int], list[int]] = {}
    for topic in sorted({t for t, _ in committed}):
        marks = watermarks(kafka_config, topic)
        # A partition Kafka no longer has (the topic was deleted) holds nothing left to check.
        wanted = {p: (marks[p][0] if p in marks else end, end) for (t, p), end in committed.items() if t == topic}
        for p, b in wanted.items():
            bounds[(topic, p)] = b
        for msg in read_kafka(kafka_config, topic, wanted):
            source.setdefault((topic, int(msg.partition())), []).append(int(msg.offset()))
    topics = {t for t, _ in committed}
    scan = loaded.scan(selected_fields=("topic", "partition", "offset")).to_arrow()
    rows: Counter[Coordinate] = Counter(
        c for c in zip(*(scan.column(n).to_pylist() for n in ("topic", "partition", "offset")), strict=True)
        if c[0] in topics
    )  # fmt: skip
    quarantine: dict[Coordinate, list[str]] | None = None
    if quarantine_table is not None:
        quarantine = {}
        if catalog.table_exists(quarantine_table):
            q = catalog.load_table(quarantine_table)
            names = {f.name for f in q.schema().fields}
            fields = ("topic", "partition", "offset", "_error_stage", "_pipeline", "_table")
            qa = q.scan(selected_fields=tuple(f for f in fields if f in names)).to_arrow()
            columns = {n: qa.column(n).to_pylist() for n in qa.column_names}
            for i in range(qa.num_rows):
                if columns.get("_pipeline", [pipeline] * qa.num_rows)[i] != pipeline:
                    continue
                if columns.get("_table", [table] * qa.num_rows)[i] != table:
                    continue
                c = (columns["topic"][i], columns["partition"][i], columns["offset"][i])
                quarantine.setdefault(c, []).append(columns["_error_stage"][i] or "")
    published: Counter[Coordinate] | None = None
    if error_topic is not None:
        published = Counter()
        marks = watermarks(kafka_config, error_topic)
        for msg in read_kafka(kafka_config, error_topic, {p: (lo, hi) for p, (lo, hi) in marks.items()}):
            h = {str(k): v for k, v in (msg.headers() or [])}
            if h.get(H_PIPELINE) == pipeline.encode() and h.get(H_TABLE) == table.encode():
                published[(h[H_TOPIC].decode(), int(h[H_PARTITION]), int(h[H_OFFSET]))] += 1
    return reconcile(
        table, source=source, bounds=bounds, rows=rows, quarantine=quarantine, error_topic=published,
        dropped=dropped, upsert=upsert, batch_gaps=gaps,
    )  # fmt: skip


# -- output --------------------------------------------------------------------------------------
def render_text(results: list[TableResult]) -> str:
    """Per table: one line per partition (expected, found, missing, duplicated), then the problems."""
    from kafka_iceberg.observe.text import table as text_table

    blocks = []
    for r in results:
        head = f"{r.table}  [{r.mode}; {', '.join(r.targets) or 'no table'}; dropped on purpose {r.dropped}]"
        rows = [
            (p.topic, p.partition, f"{p.start}-{p.end}", p.expected, p.found, p.missing, p.duplicated)
            for p in r.partitions
        ]
        lines = [head]
        if rows:
            lines.append(
                text_table(rows, ["topic", "partition", "offsets", "expected", "found", "missing", "duplicated"])
            )
        lines += [f"  note: {n}" for n in r.notes]
        lines += [f"  PROBLEM: {p}" for p in r.problems]
        lines.append("  ok" if r.ok else f"  FAILED: {len(r.problems)} problem(s)")
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def render_json(results: list[TableResult]) -> str:
    """The results as one JSON object (``ok`` and ``tables``)."""
    return json.dumps({"ok": all(r.ok for r in results), "tables": [r.to_json() for r in results]}, indent=2)


# -- a pipeline in an environment ------------------------------------------------------------------
_PYICEBERG_NAMES = {"rest.access-key-id": "client.access-key-id", "rest.secret-access-key": "client.secret-access-key"}
_JAVA_ONLY = ("io-impl",)


def pyiceberg_catalog_for(prepared: Any, name: str) -> Any:
    """A pyiceberg catalog for the environment's catalog ``name``.

    The local stack's catalog is read as :func:`kafka_iceberg.local.readback.pyiceberg_catalog`
    does; any other from its rendered properties, resolved, with Iceberg Java's REST signer keys
    spelled as pyiceberg reads them.
    """
    from pyiceberg.catalog import load_catalog

    from kafka_iceberg.catalogs import catalog_properties
    from kafka_iceberg.refs import find_refs

    if any(ref.kind == "local" for raw in prepared.rendered[name].properties().values() for ref in find_refs(raw)):
        from kafka_iceberg.local.readback import pyiceberg_catalog
        from kafka_iceberg.local.stack import LocalStack
        from kafka_iceberg.paths import run_dir

        return pyiceberg_catalog(LocalStack(run_dir()).status(), name)
    props = catalog_properties(name, prepared.settings.catalogs[name])
    resolved = {_PYICEBERG_NAMES.get(k, k): v for k, v in props.items() if k not in _JAVA_ONLY}
    return load_catalog(name, **resolved)


def verify_pipeline(prepared: Any, *, table: str | None = None) -> list[TableResult]:
    """Reconcile every table of a prepared pipeline (or only ``table``, ``namespace.name``).

    Raises:
        VerifyError: a topic could not be read to its end.
    """
    kafka = dict(prepared.settings.kafka["consumer"])
    catalogs: dict[str, Any] = {}
    results = []
    for job in prepared.jobs:
        if table is not None and job.spec.identifier != table:
            continue
        if job.catalog not in catalogs:
            catalogs[job.catalog] = pyiceberg_catalog_for(prepared, job.catalog)
        results.append(
            verify_table(
                catalogs[job.catalog], kafka, pipeline=job.pipeline.pipeline, table=job.spec.identifier,
                upsert=job.spec.replaces_rows,
                quarantine_table=job.spec.errors.quarantine_table, error_topic=job.spec.errors.error_topic,
            )
        )  # fmt: skip
    return results
