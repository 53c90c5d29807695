"""The few places the writer talks to Iceberg's Java API through py4j.

Spark SQL cannot read snapshot summaries cheaply or attach properties to a MERGE's snapshot, so:

- :class:`IcebergTable` loads the table Spark's catalog holds (the same cached instance Spark writes
  through), refreshes it, and reads schema, partition spec, sort order, properties and snapshots.
- :func:`with_commit_properties` runs a Spark action inside
  ``org.apache.iceberg.spark.CommitMetadata.withCommitProperties``, so every snapshot that action
  commits carries the given summary entries. One mechanism for append, overwrite and MERGE.
  It needs a classic (py4j) session: Spark Connect has no JVM gateway.
- :func:`conflict_reason` recognises a commit conflict in an exception surfaced through py4j, and
  :func:`cleanable_failure` a failure after which the commit surely did not land.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pyspark.sql.types import StructType

from kafka_iceberg.errors import CommitMarkerError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

COMMIT_METADATA = "org.apache.iceberg.spark.CommitMetadata"
COMMIT_FAILED = "org.apache.iceberg.exceptions.CommitFailedException"
COMMIT_STATE_UNKNOWN = "org.apache.iceberg.exceptions.CommitStateUnknownException"
VALIDATION = "org.apache.iceberg.exceptions.ValidationException"
# Iceberg's mark for a failure that proves a commit did not land (a conflict, a failed validation, a
# table gone, a request the catalog refused): its own commit cleans up after these and only these.
CLEANABLE = "org.apache.iceberg.exceptions.CleanableFailure"
# ValidationException also reports schema and argument problems; only these messages are conflicts
# with a concurrent commit (Iceberg's MergingSnapshotProducer / BaseOverwriteFiles / BaseRowDelta).
CONFLICT_MESSAGES = ("conflicting", "missing required files to delete", "cannot commit, found new", "concurrent")
_MAX_CAUSES = 20

# Iceberg's transform names (Transform.toString) for the table-spec transforms.
TRANSFORM_NAMES = {"identity": "identity", "years": "year", "months": "month", "days": "day", "hours": "hour"}

_callback_lock = threading.Lock()
_callback_started: set[int] = set()


def jvm(spark: SparkSession) -> Any:
    """The session's py4j JVM view.

    Raises:
        CommitMarkerError: the session has no JVM gateway (Spark Connect).
    """
    view = spark.sparkContext._jvm
    if view is None:
        raise CommitMarkerError("the writer needs a classic Spark session with a JVM gateway, not Spark Connect")
    return view


def transform_name(transform: str, width: int | None) -> str:
    """Iceberg's ``Transform.toString()`` for a table-spec transform: ``bucket(16, c)`` → ``bucket[16]``."""
    if transform in ("bucket", "truncate"):
        return f"{transform}[{width}]"
    return TRANSFORM_NAMES[transform]


@dataclass(frozen=True)
class SnapshotInfo:
    """One snapshot as the writer needs it."""

    snapshot_id: int
    parent_id: int | None
    operation: str | None
    java: Any
    # Summaries read so far, by snapshot id, shared by the table's snapshots: a snapshot never changes.
    summaries: dict[int, dict[str, str]] = field(default_factory=dict, compare=False, repr=False)

    def get(self, key: str) -> str | None:
        """One summary entry."""
        return self._summary().get(key)

    def summary(self) -> dict[str, str]:
        """The whole summary."""
        return dict(self._summary())

    def _summary(self) -> dict[str, str]:
        found = self.summaries.get(self.snapshot_id)
        if found is None:
            found = self.summaries[self.snapshot_id] = string_map(self.java.summary())
        return found


def string_map(java_map: Any) -> dict[str, str]:
    """A Java ``Map<String, String>`` in one py4j call (read entry by entry it costs two per entry)."""
    text = str(_json_mapper(java_map).writeValueAsString(java_map))
    return {str(k): str(v) for k, v in json.loads(text).items()}


def _json_mapper(java_object: Any) -> Any:
    """Jackson's ObjectMapper in the JVM behind ``java_object`` (Spark ships Jackson)."""
    gateway = java_object._gateway_client
    mapper = _mappers.get(id(gateway))
    if mapper is None or mapper._gateway_client is not gateway:  # a new gateway may reuse an old one's id
        from py4j.java_gateway import JavaClass

        mapper = _mappers[id(gateway)] = JavaClass("com.fasterxml.jackson.databind.ObjectMapper", gateway)()
    return mapper


_mappers: dict[int, Any] = {}


class IcebergTable:
    """An Iceberg table seen through Spark's catalog (``catalog.namespace.name``)."""

    def __init__(self, spark: SparkSession, name: str):
        self._spark = spark
        self.name = name
        self._java: Any = None
        self._summaries: dict[int, dict[str, str]] = {}  # by snapshot id (SnapshotInfo)
        # What was read of the table's current schema, spec, sort order and properties (and what is
        # built from them): read again only when one of them changed, not at each commit's new
        # metadata file, since py4j makes each read many round trips.
        self._read_at: str | None = None  # the metadata file last checked
        self._shape: tuple[Any, ...] | None = None  # what the reads were made of (:meth:`_shape_of`)
        self._read: dict[str, Any] = {}

    @property
    def java(self) -> Any:
        """The ``org.apache.iceberg.Table``, loaded on first use."""
        if self._java is None:
            spark3 = jvm(self._spark).org.apache.iceberg.spark.Spark3Util
            self._java = spark3.loadIcebergTable(self._spark._jsparkSession, self.name)
        return self._java

    def refresh(self) -> IcebergTable:
        """Reload the table's current metadata from the catalog (other writers' commits included)."""
        self.java.refresh()
        return self

    def forget(self) -> None:
        """Drop the loaded instance (after the table was created or dropped)."""
        self._java = None

    def of_metadata(self, what: str, read: Callable[[], Any]) -> Any:
        """``read()`` of the table's current schema, spec, sort order and properties, computed again when they change.

        Every commit writes a new metadata file; only one that changes what ``read`` reads is read
        again: the ids of the schema, spec and sort order, the location, and the table's and its
        FileIO's properties (vended credentials change with the latter).
        """
        current = self.java.operations().current()
        location = _location_of(current)
        if location is None:  # a catalog that names no metadata file: nothing tells two versions apart
            return read()
        if location != self._read_at:
            self._read_at = location
            shape = self._shape_of(current)
            if not self._same_shape(shape):
                self._shape, self._read = shape, {}
        if what not in self._read:
            self._read[what] = read()
        return self._read[what]

    def _shape_of(self, current: Any) -> tuple[Any, ...]:
        """What the cached reads are made of in ``current`` (an ``org.apache.iceberg.TableMetadata``)."""
        ids = (
            str(current.uuid()),
            int(current.formatVersion()),
            int(current.currentSchemaId()),
            int(current.defaultSpecId()),
            int(current.defaultSortOrderId()),
            str(current.location()),
        )
        return (ids, current.properties(), self.java.io().properties())  # Java maps: compared in the JVM

    def _same_shape(self, shape: tuple[Any, ...]) -> bool:
        old = self._shape
        if old is None or old[0] != shape[0]:
            return False
        return all(bool(a.equals(b)) for a, b in zip(old[1:], shape[1:], strict=True))

    def schema(self) -> StructType:
        """The table schema as a Spark StructType (nullability included)."""

        def read() -> str:
            return str(jvm(self._spark).org.apache.iceberg.spark.SparkSchemaUtil.convert(self.java.schema()).json())

        return StructType.fromJson(json.loads(self.of_metadata("schema", read)))

    def partition_fields(self) -> list[tuple[str, str]]:
        """``(transform, source column)`` of the current spec, ``void`` fields left out."""

        def read() -> list[tuple[str, str]]:
            schema = self.java.schema()
            out = []
            for f in self.java.spec().fields():
                transform = str(f.transform().toString())
                if transform != "void":
                    out.append((transform, str(schema.findColumnName(f.sourceId()))))
            return out

        return list(self.of_metadata("partition_fields", read))

    def sort_fields(self) -> list[tuple[str, str]]:
        """``(column, ASC|DESC)`` of the current sort order (identity transforms only)."""

        def read() -> list[tuple[str, str]]:
            schema = self.java.schema()
            return [
                (str(schema.findColumnName(f.sourceId())), str(f.direction().toString()))
                for f in self.java.sortOrder().fields()
            ]

        return list(self.of_metadata("sort_fields", read))

    def properties(self) -> dict[str, str]:
        """Table properties."""
        return dict(self.of_metadata("properties", lambda: string_map(self.java.properties())))

    def _location(self) -> str | None:
        return _location_of(self.java.operations().current())

    def metadata_location(self) -> str:
        """Location of the current metadata file."""
        return str(self._location())

    def ancestry(self) -> Iterator[SnapshotInfo]:
        """The current snapshot, then its parent, and so on (snapshots of other branches left out)."""
        snap = self.java.currentSnapshot()
        while snap is not None:
            parent = snap.parentId()
            op = snap.operation()
            yield SnapshotInfo(
                int(snap.snapshotId()),
                None if parent is None else int(parent),
                None if op is None else str(op),
                snap,
                self._summaries,
            )
            snap = None if parent is None else self.java.snapshot(parent)


def _location_of(metadata: Any) -> str | None:
    """The metadata file of ``metadata`` (an ``org.apache.iceberg.TableMetadata``), None when the catalog names none."""
    location = metadata.metadataFileLocation()
    return None if location is None else str(location)


class _Action:
    """A Python ``java.util.concurrent.Callable``: runs ``fn`` and keeps its exception for Python."""

    def __init__(self, fn: Callable[[], object]):
        self.fn = fn
        self.error: BaseException | None = None

    def call(self) -> None:
        try:
            self.fn()
        except Exception as exc:  # re-raised in the calling thread with its py4j details intact
            self.error = exc

    class Java:
        implements = ["java.util.concurrent.Callable"]


def with_commit_properties(spark: SparkSession, properties: Mapping[str, str], fn: Callable[[], object]) -> None:
    """Run ``fn`` so that every snapshot it commits carries ``properties`` in its summary.

    The properties live in a JVM thread-local; with py4j's pinned threads (Spark's default) the
    callback and the Spark calls it makes run on the JVM thread that set them.
    """
    from pyspark.java_gateway import ensure_callback_server_started

    gateway = spark.sparkContext._gateway
    with _callback_lock:
        if id(gateway) not in _callback_started:
            ensure_callback_server_started(gateway)  # type: ignore[no-untyped-call]
            _callback_started.add(id(gateway))
    view = jvm(spark)
    props = view.java.util.HashMap()
    for key, value in properties.items():
        props.put(key, value)
    action = _Action(fn)
    exc_class = view.java.lang.Class.forName("java.lang.RuntimeException")
    view.org.apache.iceberg.spark.CommitMetadata.withCommitProperties(props, action, exc_class)
    if action.error is not None:
        raise action.error


def java_causes(exc: BaseException) -> Iterator[tuple[str, str]]:
    """``(class name, message)`` of the Java exception behind ``exc`` and each of its causes."""
    java = getattr(exc, "java_exception", None) or getattr(exc, "_origin", None)
    depth = 0
    while java is not None and depth < _MAX_CAUSES:
        try:
            name = str(java.getClass().getName())
            message = str(java.getMessage() or "")
            java = java.getCause()
        except Exception:  # not a live Java object
            return
        depth += 1
        yield name, message


def cleanable_failure(exc: BaseException) -> bool:
    """Whether the Java exception ``exc`` surfaces is one of Iceberg's ``CleanableFailure``s.

    Iceberg's own commit deletes what it wrote after these only; after anything else (a timeout, a
    lost connection, ``CommitStateUnknownException``) the commit may have landed. Only the exception
    Java threw counts, as in Iceberg, not its causes.
    """
    java = getattr(exc, "java_exception", None)
    try:
        cls = java.getClass() if java is not None else None
        while cls is not None:
            if any(str(i.getName()) == CLEANABLE for i in cls.getInterfaces()):
                return True
            cls = cls.getSuperclass()
    except Exception:  # not a live Java object
        return False
    return False


def conflict_reason(exc: BaseException) -> str | None:
    """The commit conflict behind ``exc`` (``"CommitFailedException: ..."``), or None if it is something else."""
    for name, message in java_causes(exc):
        short = name.rsplit(".", 1)[-1]
        if name in (COMMIT_FAILED, COMMIT_STATE_UNKNOWN):
            return f"{short}: {message}"
        if name == VALIDATION and any(m in message.lower() for m in CONFLICT_MESSAGES):
            return f"{short}: {message}"
    # No live Java exception (a converted pyspark error, a test double): read the text.
    text = str(exc)
    for name in (COMMIT_FAILED, COMMIT_STATE_UNKNOWN, VALIDATION):
        if name not in text:
            continue
        lines = text.split(name, 1)[1].lstrip(": ").splitlines()
        tail = lines[0] if lines else ""
        if name != VALIDATION or any(m in tail.lower() for m in CONFLICT_MESSAGES):
            return f"{name.rsplit('.', 1)[-1]}: {tail}"
    return None
