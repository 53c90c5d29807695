"""The idempotency marker every commit writes into its snapshot summary, and what a commit reports.

Summary keys (docs/architecture.md, "Commit marker"): ``kafka-iceberg.pipeline``, ``.stream``,
``.batch-id``, ``.offsets`` (JSON ``{topic: {partition: next_offset}}``, cumulative),
``.error-offsets`` (JSON, may be ``{}``), plus ``CommitMarker.extra`` under the same prefix.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field

MARKER_PREFIX = "kafka-iceberg."
PIPELINE_KEY = "kafka-iceberg.pipeline"
STREAM_KEY = "kafka-iceberg.stream"
BATCH_ID_KEY = "kafka-iceberg.batch-id"
OFFSETS_KEY = "kafka-iceberg.offsets"
ERROR_OFFSETS_KEY = "kafka-iceberg.error-offsets"
# Set on markers that maintenance copied into its own snapshots (compaction, manifest rewrites).
COPIED_FROM_KEY = "kafka-iceberg.copied-from"
DROPPED = "dropped"  # extra entry: records dropped on purpose so far (expectations, transforms, skip_error), per stream
DROPPED_KEY = MARKER_PREFIX + DROPPED
# Set on maintenance snapshots too: JSON list of the newest markers of every *other* pipeline and
# stream in the ancestry (each a dict of its summary entries), so that the markers of a second
# writer of the table survive snapshot expiry as well as the newest one does.
OTHER_MARKERS_KEY = "kafka-iceberg.other-markers"
RESERVED_KEYS = frozenset(
    {PIPELINE_KEY, STREAM_KEY, BATCH_ID_KEY, OFFSETS_KEY, ERROR_OFFSETS_KEY, COPIED_FROM_KEY, OTHER_MARKERS_KEY}
)

# Iceberg snapshot-summary keys a commit result is read from.
ADDED_RECORDS = "added-records"
DELETED_RECORDS = "deleted-records"
ADDED_DATA_FILES = "added-data-files"
ADDED_DELETE_FILES = "added-delete-files"
ADDED_FILES_SIZE = "added-files-size"

Offsets = Mapping[str, Mapping[int, int]]


@dataclass(frozen=True)
class CommitMarker:
    """Which Kafka records a commit covers; written into, and read back from, a snapshot summary.

    Args:
        stream: the stream within the pipeline (usually the table spec's identifier).
        batch_id: micro-batch number, increasing per stream; a commit at or below the last is a no-op.
        offsets: ``{topic: {partition: next_offset}}`` after this batch (cumulative).
        error_offsets: end offsets of the error topic after this batch.
        extra: further summary entries; keys are stored under ``kafka-iceberg.``.
        snapshot_id: the snapshot holding the marker (set when read back).
    """

    stream: str
    batch_id: int
    offsets: Offsets
    error_offsets: Offsets = field(default_factory=dict)
    extra: Mapping[str, str] = field(default_factory=dict)
    snapshot_id: int | None = None

    def __post_init__(self) -> None:
        if not self.stream:
            raise ValueError("CommitMarker.stream must be a non-empty string")
        if isinstance(self.batch_id, bool) or not isinstance(self.batch_id, int) or self.batch_id < 0:
            raise ValueError(f"CommitMarker.batch_id must be an integer >= 0, not {self.batch_id!r}")
        for name, offsets in (("offsets", self.offsets), ("error_offsets", self.error_offsets)):
            for topic, parts in offsets.items():
                for part, offset in parts.items():
                    if not isinstance(part, int) or not isinstance(offset, int) or part < 0 or offset < 0:
                        raise ValueError(f"CommitMarker.{name}[{topic!r}] must map partition → offset (ints >= 0)")
        for key in self.extra:
            if _prefixed(key) in RESERVED_KEYS:
                raise ValueError(f"CommitMarker.extra may not set {key!r}: it is part of the marker itself")

    def summary(self, pipeline: str) -> dict[str, str]:
        """The snapshot-summary entries of this marker."""
        out = {
            PIPELINE_KEY: pipeline,
            STREAM_KEY: self.stream,
            BATCH_ID_KEY: str(self.batch_id),
            OFFSETS_KEY: encode_offsets(self.offsets),
            ERROR_OFFSETS_KEY: encode_offsets(self.error_offsets),
        }
        out.update({_prefixed(k): str(v) for k, v in self.extra.items()})
        return out

    @classmethod
    def from_summary(cls, summary: Mapping[str, str], snapshot_id: int | None = None) -> CommitMarker:
        """Read a marker back from a snapshot summary.

        Raises:
            ValueError: the summary holds no (or a malformed) marker.
        """
        extra = {
            k[len(MARKER_PREFIX) :]: v
            for k, v in summary.items()
            if k.startswith(MARKER_PREFIX) and k not in RESERVED_KEYS
        }
        try:
            return cls(
                stream=summary[STREAM_KEY],
                batch_id=int(summary[BATCH_ID_KEY]),
                offsets=decode_offsets(summary.get(OFFSETS_KEY, "{}")),
                error_offsets=decode_offsets(summary.get(ERROR_OFFSETS_KEY, "{}")),
                extra=extra,
                snapshot_id=snapshot_id,
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"malformed kafka-iceberg marker in snapshot {snapshot_id}: {exc}") from None


def summaries_in(summary: Mapping[str, str]) -> list[dict[str, str]]:
    """The markers a snapshot summary holds: its own (if any), then those maintenance copied in."""
    out = []
    if STREAM_KEY in summary:
        out.append({k: v for k, v in summary.items() if k.startswith(MARKER_PREFIX) and k != OTHER_MARKERS_KEY})
    try:
        others = json.loads(summary.get(OTHER_MARKERS_KEY, "[]"))
    except ValueError:
        others = []
    out += [{str(k): str(v) for k, v in m.items()} for m in others if isinstance(m, dict)]
    return out


def _prefixed(key: str) -> str:
    return key if key.startswith(MARKER_PREFIX) else MARKER_PREFIX + key


def encode_offsets(offsets: Offsets) -> str:
    """``{topic: {partition: offset}}`` → compact JSON with sorted keys (partitions as strings)."""
    ordered = {t: {str(p): o for p, o in sorted(parts.items())} for t, parts in sorted(offsets.items())}
    return json.dumps(ordered, separators=(",", ":"))


def decode_offsets(text: str) -> dict[str, dict[int, int]]:
    """Inverse of :func:`encode_offsets`."""
    raw = json.loads(text)
    if not isinstance(raw, dict):
        raise TypeError("offsets must be a JSON object")
    return {str(t): {int(p): int(o) for p, o in parts.items()} for t, parts in raw.items()}


@dataclass(frozen=True)
class CommitResult:
    """What one :meth:`TableWriter.commit` did; counts come from the snapshot summary.

    ``skipped`` commits (the batch id was already committed) change nothing: counts are zero and
    ``snapshot_id`` is the snapshot holding the stream's newest marker.
    """

    table: str
    stream: str
    batch_id: int
    skipped: bool
    snapshot_id: int | None
    operation: str | None = None
    records_written: int = 0
    records_deleted: int = 0
    files_added: int = 0
    bytes_added: int = 0
    retries: int = 0
    latency_ms: float = 0.0
    summary: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_summary(
        cls,
        *,
        table: str,
        marker: CommitMarker,
        snapshot_id: int,
        operation: str | None,
        summary: Mapping[str, str],
        retries: int,
        latency_ms: float,
    ) -> CommitResult:
        """Build the result of a commit that produced ``snapshot_id``."""

        def count(key: str) -> int:
            return int(summary.get(key, "0") or 0)

        return cls(
            table=table,
            stream=marker.stream,
            batch_id=marker.batch_id,
            skipped=False,
            snapshot_id=snapshot_id,
            operation=operation,
            records_written=count(ADDED_RECORDS),
            records_deleted=count(DELETED_RECORDS),
            files_added=count(ADDED_DATA_FILES) + count(ADDED_DELETE_FILES),
            bytes_added=count(ADDED_FILES_SIZE),
            retries=retries,
            latency_ms=latency_ms,
            summary=dict(summary),
        )
