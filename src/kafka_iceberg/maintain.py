"""Table maintenance: compaction, snapshot expiry, orphan files, manifest rewrites.

Runs Iceberg's Spark actions directly (not the SQL procedures) for one reason: snapshots that
maintenance creates must carry the pipeline's commit marker. Compaction writes a ``replace``
snapshot; if it lacked the marker, expiring older snapshots (``retain_last: 1``) would erase the
only record of the offsets the table holds, and the next run would read Kafka from the start.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kafka_iceberg.observe.report import MaintenanceReport
from kafka_iceberg.spec.model import TableSpec
from kafka_iceberg.write.jvm import IcebergTable, jvm
from kafka_iceberg.write.marker import (
    BATCH_ID_KEY,
    COPIED_FROM_KEY,
    OTHER_MARKERS_KEY,
    PIPELINE_KEY,
    STREAM_KEY,
    summaries_in,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

MB = 1024 * 1024
DAY_MS = 86_400_000
Clock = Callable[[], dt.datetime]


def _now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


@dataclass
class TableMaintainer:
    """Maintains one table as its spec's ``maintenance`` key says.

    Args:
        spark: the session (with the table's catalog attached).
        catalog: Spark catalog name.
        spec: the table spec (maintenance settings, identifier).
        pipeline: pipeline id, for the reports.
        clock: "now" for the age thresholds (injectable so tests can age files without waiting).
    """

    spark: SparkSession
    catalog: str
    spec: TableSpec
    pipeline: str
    clock: Clock = field(default=_now)

    @property
    def table_name(self) -> str:
        """``catalog.namespace.table``."""
        return f"{self.catalog}.{self.spec.identifier}"

    def _table(self) -> Any:
        # Spark's catalog cache may hold an instance from before other writers' commits: plan on the
        # current metadata, or a compaction running next to ingestion misses the newest files.
        return IcebergTable(self.spark, self.table_name).refresh().java

    def _actions(self) -> Any:
        return jvm(self.spark).org.apache.iceberg.spark.actions.SparkActions.get(self.spark._jsparkSession)

    def _marker(self) -> dict[str, str]:
        """The commit markers to copy into the snapshot the action creates (tagged as copies).

        The newest marker in the ancestry goes in the snapshot's own entries, as a commit's would;
        the newest marker of every other pipeline and stream (two pipelines writing one table, a
        Spark query that got a new checkpoint) goes in ``kafka-iceberg.other-markers``, so that
        expiring the snapshots below keeps every writer's offsets, not only the last one's.
        """
        primary: dict[str, str] = {}
        newest: dict[tuple[str, str], tuple[int, dict[str, str]]] = {}
        for snap in IcebergTable(self.spark, self.table_name).refresh().ancestry():
            for marker in summaries_in(snap.summary()):
                marker.setdefault(COPIED_FROM_KEY, str(snap.snapshot_id))
                if not primary:
                    primary = marker
                key = (marker.get(PIPELINE_KEY, ""), marker.get(STREAM_KEY, ""))
                batch = marker.get(BATCH_ID_KEY, "")
                batch_id = int(batch) if batch.isdigit() else -1
                if key not in newest or batch_id > newest[key][0]:
                    newest[key] = (batch_id, marker)
        if not primary:
            return {}
        mine = (primary.get(PIPELINE_KEY, ""), primary.get(STREAM_KEY, ""))
        primary = newest[mine][1]  # a copy on top may be older than a commit that landed below it
        others = [m for key, (_, m) in sorted(newest.items()) if key != mine]
        if others:
            primary = {**primary, OTHER_MARKERS_KEY: json.dumps(others, sort_keys=True, separators=(",", ":"))}
        return primary

    def _report(self, action: str, started: float, details: dict[str, Any], table: Any) -> MaintenanceReport:
        table.refresh()
        current = table.currentSnapshot()
        return MaintenanceReport(
            pipeline=self.pipeline,
            table=self.spec.identifier,
            action=action,
            details=details,
            snapshot_id=int(current.snapshotId()) if current is not None else None,
            duration_s=time.monotonic() - started,
        )

    # -- actions -----------------------------------------------------------------------------------
    def compact(self) -> MaintenanceReport:
        """``rewrite_data_files`` to the target size: binpack, or sort when the table has a sort order."""
        started, table = time.monotonic(), self._table()
        target = self.spec.maintenance.compaction.target_file_size_mb * MB
        action = self._actions().rewriteDataFiles(table).option("target-file-size-bytes", str(target))
        # Small tables have few files: compact whenever there is more than one file to merge.
        action = action.option("min-input-files", "2")
        sorted_table = not table.sortOrder().isUnsorted()
        action = action.sort() if sorted_table else action.binPack()
        for key, value in self._marker().items():
            action = action.snapshotProperty(key, value)
        result = action.execute()
        details = {
            "strategy": "sort" if sorted_table else "binpack",
            "target_file_size_bytes": target,
            "rewritten_data_files": int(result.rewrittenDataFilesCount()),
            "added_data_files": int(result.addedDataFilesCount()),
            "rewritten_bytes": int(result.rewrittenBytesCount()),
        }
        return self._report("rewrite_data_files", started, details, table)

    def rewrite_manifests(self) -> MaintenanceReport:
        """``rewrite_manifests``: fewer, larger manifests after many small commits."""
        started, table = time.monotonic(), self._table()
        action = self._actions().rewriteManifests(table)
        for key, value in self._marker().items():
            action = action.snapshotProperty(key, value)
        result = action.execute()
        details = {
            "rewritten_manifests": len(list(result.rewrittenManifests())),
            "added_manifests": len(list(result.addedManifests())),
        }
        return self._report("rewrite_manifests", started, details, table)

    def expire_snapshots(self) -> MaintenanceReport:
        """``expire_snapshots``: older than ``older_than_days``, always keeping ``retain_last``."""
        started, table = time.monotonic(), self._table()
        settings = self.spec.maintenance.expire_snapshots
        older_than = int(self.clock().timestamp() * 1000 - settings.older_than_days * DAY_MS)
        before = len(list(table.snapshots()))
        result = (
            self._actions()
            .expireSnapshots(table)
            .expireOlderThan(older_than)
            .retainLast(settings.retain_last)
            .execute()
        )
        table.refresh()
        details = {
            "older_than": dt.datetime.fromtimestamp(older_than / 1000, dt.timezone.utc).isoformat(),
            "retain_last": settings.retain_last,
            "expired_snapshots": before - len(list(table.snapshots())),
            "deleted_data_files": int(result.deletedDataFilesCount()),
            "deleted_manifests": int(result.deletedManifestsCount()),
            "deleted_manifest_lists": int(result.deletedManifestListsCount()),
        }
        return self._report("expire_snapshots", started, details, table)

    def remove_orphan_files(self) -> MaintenanceReport:
        """``remove_orphan_files`` older than ``older_than_days``.

        The age floor is at least a day: younger unreferenced files may belong to a commit in flight.
        """
        started, table = time.monotonic(), self._table()
        days = self.spec.maintenance.orphan_files.older_than_days
        older_than = int(self.clock().timestamp() * 1000 - days * DAY_MS)
        action = self._actions().deleteOrphanFiles(table).olderThan(older_than)
        # py4j resolves the class through Spark's class loader (Class.forName would not see spark.jars).
        prefix_io = jvm(self.spark).org.apache.iceberg.io.SupportsPrefixOperations._java_lang_class
        if prefix_io.isInstance(table.io()):
            # S3FileIO lists by prefix; the default Hadoop listing needs an s3 FileSystem (S3A) that
            # the local runtime does not ship and that clusters need not have for an S3 Tables bucket.
            action = action.usePrefixListing(True)
        result = action.execute()
        removed = sorted(str(p) for p in result.orphanFileLocations())
        details = {
            "older_than": dt.datetime.fromtimestamp(older_than / 1000, dt.timezone.utc).isoformat(),
            "removed": len(removed),
            "locations": removed[:100],
        }
        return self._report("remove_orphan_files", started, details, table)

    def run(self) -> list[MaintenanceReport]:
        """Every enabled action, in the order that frees the most: compact, manifests, expire, orphans."""
        settings = self.spec.maintenance
        if not settings.enabled:
            return []
        steps: list[tuple[bool, Callable[[], MaintenanceReport]]] = [
            (settings.compaction.enabled, self.compact),
            (settings.rewrite_manifests, self.rewrite_manifests),
            (settings.expire_snapshots.enabled, self.expire_snapshots),
            (settings.orphan_files.enabled, self.remove_orphan_files),
        ]
        reports = []
        for enabled, step in steps:
            if not enabled:
                continue
            started = time.monotonic()
            try:
                reports.append(step())
            except Exception as exc:  # one failing action must not hide the others' results
                log.exception("%s: %s failed", self.spec.identifier, step.__name__)
                reports.append(
                    MaintenanceReport(
                        pipeline=self.pipeline,
                        table=self.spec.identifier,
                        action=step.__name__,
                        duration_s=time.monotonic() - started,
                        error=f"{type(exc).__name__}: {str(exc).splitlines()[0][:500]}",
                    )
                )
        return reports
