"""The typed model of pipeline files: one :class:`Pipeline` holding :class:`TableSpec` entries.

Every key of PRODUCT.md's table-spec table lives here with its default. Field validators reject a
bad value where it stands (so the error names its exact key path); checks that span several keys
live in :mod:`kafka_iceberg.spec.load`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from kafka_iceberg.config import IDENTIFIER, IDENTIFIER_EXPECTED, Frozen
from kafka_iceberg.spec.partitioning import PartitionField, parse_partition_field
from kafka_iceberg.spec.types import normalize_type

Format = Literal["text", "csv", "json", "flatten", "binary", "avro", "protobuf", "json_schema"]
Mode = Literal["key", "value", "default"]
FORMATS: tuple[str, ...] = ("text", "csv", "json", "flatten", "binary", "avro", "protobuf", "json_schema")
SCHEMA_FORMATS: tuple[str, ...] = ("avro", "protobuf", "json_schema")  # columns from a schema registry
SubjectStrategy = Literal["topic", "record", "topic_record"]
Envelope = Literal["none", "debezium"]
REGISTRY_RETRIES_DEFAULT = 3
DEBEZIUM_POSITION = "_source_position"  # the sequence column of a Debezium table: source.lsn, else ts_ms
DEBEZIUM_OP = "_op"
Window = Literal["day", "hour", "minute", "none"]
CommitMode = Literal["append", "overwrite", "upsert"]
Evolution = Literal["strict", "add_columns", "full"]
Action = Literal["warn", "drop", "quarantine", "fail"]
Codec = Literal["none", "snappy", "gzip", "lz4", "zstd", "brotli"]

MAX_RECORDS_PER_BATCH_DEFAULT = 100_000
TARGET_FILE_SIZE_MB_DEFAULT = 128
COMPACTION_TARGET_MB_DEFAULT = 256  # OSS Tables' managed compaction target
EXPIRE_OLDER_THAN_DAYS_DEFAULT = 10  # OSS Tables: non-current files after 10 days
RETAIN_LAST_DEFAULT = 1
ORPHAN_OLDER_THAN_DAYS_DEFAULT = 4  # OSS Tables: unreferenced files after 4 days


def _identifier(value: str) -> str:
    if not IDENTIFIER.match(value):
        raise ValueError(IDENTIFIER_EXPECTED)
    return value


class CsvLayout(Frozen):
    """How a CSV message maps onto columns."""

    columns: list[str] | None = None  # message field order; defaults to schema.columns order
    delimiter: str = ","
    quote: str = '"'
    null_value: str | None = None

    @field_validator("delimiter", "quote")
    @classmethod
    def _one_char(cls, value: str) -> str:
        if len(value) != 1:
            raise ValueError("a single character")
        return value


class RegistryAuth(Frozen):
    """Schema registry credentials: basic (``username``/``password``) or a ``bearer`` token, from references."""

    username: str | None = None
    password: str | None = Field(default=None, repr=False)
    bearer: str | None = Field(default=None, repr=False)

    @model_validator(mode="after")
    def _one_kind(self) -> RegistryAuth:
        basic = self.username is not None or self.password is not None
        if basic == (self.bearer is not None) or (basic and (self.username is None or self.password is None)):
            raise ValueError("either username and password (basic), or bearer")
        return self


class SchemaRegistry(Frozen):
    """A Confluent-compatible schema registry (Confluent, Redpanda, Apicurio's ccompat API, Karapace)."""

    url: str
    auth: RegistryAuth | None = None
    subject_strategy: SubjectStrategy = "topic"
    retries: int = Field(REGISTRY_RETRIES_DEFAULT, ge=0)
    timeout_seconds: float = Field(10.0, gt=0)

    @field_validator("url")
    @classmethod
    def _http(cls, value: str) -> str:
        if not value.startswith(("http://", "https://", "${")):
            raise ValueError("an http:// or https:// URL (or a ${env:...} / ${local:...} reference)")
        return value.rstrip("/")

    def unresolved_values(self) -> dict[str, Any]:
        """The values that may hold ``${...}`` references: the URL and the credentials."""
        return {"url": self.url, "auth": self.auth.model_dump() if self.auth is not None else None}

    def resolved(self, values: Mapping[str, Any]) -> SchemaRegistry:
        """A copy with :meth:`unresolved_values` replaced by ``values``, their resolved form."""
        auth = self.auth.model_copy(update=values["auth"]) if self.auth is not None else None
        return self.model_copy(update={"url": values["url"], "auth": auth})


class AvroFile(Frozen):
    """Plain Avro (no wire-format header) decoded with one writer schema from a file."""

    schema_file: str


class SourceSpec(Frozen):
    """Where records come from and how the message is read."""

    topics: list[str] | None = None
    topic_pattern: str | None = None
    format: Format = "text"
    mode: Mode | None = None
    starting_offsets: Literal["earliest", "latest"] | dict[str, dict[str, int]] = "earliest"
    max_records_per_batch: int = Field(MAX_RECORDS_PER_BATCH_DEFAULT, gt=0)
    decoder: Literal["auto", "spark", "arrow"] = "auto"
    csv: CsvLayout | None = None
    include_headers: bool = False
    schema_registry: SchemaRegistry | None = None
    avro: AvroFile | None = None
    envelope: Envelope = "none"

    @field_validator("topic_pattern")
    @classmethod
    def _regex(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                re.compile(value)
            except re.error as exc:
                raise ValueError(f"a valid regular expression ({exc})") from None
        return value

    @model_validator(mode="after")
    def _one_subscription(self) -> SourceSpec:
        if bool(self.topics) == bool(self.topic_pattern):
            raise ValueError("exactly one of topics (a non-empty list) or topic_pattern")
        return self

    @property
    def uses_registry(self) -> bool:
        """Whether messages carry the Confluent wire format (schema id) read through a registry."""
        return self.format in SCHEMA_FORMATS and self.avro is None

    @property
    def reads_env_registry(self) -> bool:
        """Whether the environment's ``schema_registry`` serves this source (a registry format without its own)."""
        return self.uses_registry and self.schema_registry is None

    @property
    def effective_mode(self) -> str:
        """The mode in force: ``default`` for text and binary, ``value`` otherwise, unless set."""
        if self.mode:
            return self.mode
        return "default" if self.format in ("text", "binary") else "value"


class SchemaSpec(Frozen):
    """Declared table columns, or a JSON Schema file to map them from."""

    columns: dict[str, str] | None = None
    json_schema: str | None = None

    @field_validator("columns")
    @classmethod
    def _columns(cls, value: dict[str, str] | None) -> dict[str, str] | None:
        if value is None:
            return None
        out = {}
        for name, col_type in value.items():
            _identifier(name)
            out[name] = normalize_type(col_type)
        return out

    @model_validator(mode="after")
    def _exactly_one(self) -> SchemaSpec:
        if (self.columns is None) == (self.json_schema is None):
            raise ValueError("exactly one of columns or json_schema")
        return self


class Expectation(Frozen):
    """A data-quality rule: a SQL boolean expression and what to do with rows failing it."""

    expr: str
    on_violation: Action = "warn"


class ErrorHandling(Frozen):
    """Where bad records go (MaxCompute semantics, extended with a quarantine table)."""

    skip_error: bool = False
    error_topic: str | None = None
    quarantine_table: str | None = None

    @field_validator("quarantine_table")
    @classmethod
    def _ns_table(cls, value: str | None) -> str | None:
        if value is not None:
            parts = value.split(".")
            if len(parts) != 2 or not all(IDENTIFIER.match(p) for p in parts):
                raise ValueError("namespace.table, each " + IDENTIFIER_EXPECTED)
        return value

    @property
    def has_target(self) -> bool:
        """True when failed records are routed somewhere rather than failing or being dropped."""
        return bool(self.error_topic or self.quarantine_table)


class WriteSpec(Frozen):
    """Iceberg write settings."""

    target_file_size_mb: int = Field(TARGET_FILE_SIZE_MB_DEFAULT, gt=0)
    compression: Codec = "zstd"
    sort_order: list[str] = Field(default_factory=list)
    properties: dict[str, str] = Field(default_factory=dict)
    # Who writes the data files: Spark's Iceberg writer, or pyarrow inside Spark tasks (append only).
    engine: Literal["auto", "spark", "arrow"] = "auto"

    @field_validator("properties", mode="before")
    @classmethod
    def _stringify(cls, value: Any) -> Any:
        if isinstance(value, dict):
            return {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in value.items()}
        return value


_DURATION_WORDS = {"second": 1, "minute": 60, "hour": 3600, "day": 86400}
_WORDS = re.compile(r"^(\d+(?:\.\d+)?)\s*(second|minute|hour|day)s?$")
_ISO = re.compile(r"^P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?$")


def parse_duration(text: str) -> float:
    """``"1 minute"``, ``"30 seconds"`` or ISO-8601 ``"PT5M"`` → seconds.

    Raises:
        ValueError: not a duration in either form.
    """
    raw = str(text).strip()
    words = _WORDS.match(raw.lower())
    if words:
        return float(words[1]) * _DURATION_WORDS[words[2]]
    iso = _ISO.match(raw.upper())
    if iso and raw.upper() not in ("P", "PT"):
        days, hours, minutes, seconds = (float(g) if g else 0.0 for g in iso.groups())
        return days * 86400 + hours * 3600 + minutes * 60 + seconds
    raise ValueError("a duration such as '1 minute', '30 seconds' or ISO-8601 'PT5M'")


class Trigger(Frozen):
    """``available_now`` drains what is there and exits; ``processing_time`` runs continuously."""

    available_now: bool | None = None
    processing_time: str | None = None

    @field_validator("processing_time")
    @classmethod
    def _duration(cls, value: str | None) -> str | None:
        if value is not None and parse_duration(value) <= 0:
            raise ValueError("a positive duration")
        return value

    @model_validator(mode="after")
    def _one(self) -> Trigger:
        if bool(self.available_now) == bool(self.processing_time):
            raise ValueError("exactly one of available_now: true or processing_time: <duration>")
        return self

    @property
    def interval_seconds(self) -> float | None:
        """Seconds between batches for ``processing_time``; None for ``available_now``."""
        return parse_duration(self.processing_time) if self.processing_time else None


class Compaction(Frozen):
    """``rewrite_data_files`` settings."""

    enabled: bool = True
    target_file_size_mb: int = Field(COMPACTION_TARGET_MB_DEFAULT, gt=0)


class ExpireSnapshots(Frozen):
    """``expire_snapshots`` settings."""

    enabled: bool = True
    older_than_days: float = Field(EXPIRE_OLDER_THAN_DAYS_DEFAULT, ge=0)
    retain_last: int = Field(RETAIN_LAST_DEFAULT, ge=1)


class OrphanFiles(Frozen):
    """``remove_orphan_files`` settings (Iceberg refuses an age under one day)."""

    enabled: bool = True
    older_than_days: float = Field(ORPHAN_OLDER_THAN_DAYS_DEFAULT, ge=1)


class Maintenance(Frozen):
    """What ``kafka-iceberg maintain`` does for a table; defaults mirror OSS Tables' managed maintenance."""

    enabled: bool = True
    compaction: Compaction = Field(default_factory=Compaction)
    expire_snapshots: ExpireSnapshots = Field(default_factory=ExpireSnapshots)
    orphan_files: OrphanFiles = Field(default_factory=OrphanFiles)
    rewrite_manifests: bool = True

    @model_validator(mode="before")
    @classmethod
    def _off(cls, value: Any) -> Any:
        # YAML 1.1 reads a bare `off` as False.
        if value is False or (isinstance(value, str) and value.lower() == "off"):
            return {"enabled": False}
        return value


class SourceLocation(Frozen):
    """Where a table was declared (file and line), for error messages."""

    file: str
    line: int | None = None


class TableSpec(Frozen):
    """One target table: where records come from, how they are decoded, checked and written."""

    name: str
    namespace: str
    catalog: str | None = None
    source: SourceSpec
    schema_: SchemaSpec | None = Field(None, alias="schema")
    partition_window: Window = "hour"
    partitioning: list[str] = Field(default_factory=list)
    commit_mode: CommitMode = "append"
    key_fields: list[str] = Field(default_factory=list)
    sequence_field: str | None = None
    schema_evolution: Evolution = "add_columns"
    expectations: dict[str, Expectation] = Field(default_factory=dict)
    errors: ErrorHandling = Field(default_factory=ErrorHandling)
    write: WriteSpec = Field(default_factory=WriteSpec)
    trigger: Trigger = Field(default_factory=lambda: Trigger(available_now=True))
    maintenance: Maintenance = Field(default_factory=Maintenance)
    transform: str | None = None
    defined_at: SourceLocation | None = Field(None, exclude=True)

    @field_validator("name", "namespace")
    @classmethod
    def _ident(cls, value: str) -> str:
        return _identifier(value)

    @model_validator(mode="before")
    @classmethod
    def _debezium_sequence(cls, value: Any) -> Any:
        # A Debezium table orders changes by their source position unless told otherwise.
        if isinstance(value, dict) and "sequence_field" not in value:
            source = value.get("source")
            if isinstance(source, dict) and source.get("envelope") == "debezium":
                return {**value, "sequence_field": DEBEZIUM_POSITION}
        return value

    @field_validator("partitioning", mode="before")
    @classmethod
    def _rejoin_flow_items(cls, value: Any) -> Any:
        # YAML flow style splits `[bucket(16, id)]` at the comma into "bucket(16" and "id)".
        if not isinstance(value, list):
            return value
        out: list[Any] = []
        for item in value:
            if out and isinstance(item, str) and isinstance(out[-1], str) and out[-1].count("(") > out[-1].count(")"):
                out[-1] = f"{out[-1]}, {item.strip()}"
            else:
                out.append(item)
        return out

    @field_validator("partitioning")
    @classmethod
    def _partitioning(cls, value: list[str]) -> list[str]:
        for entry in value:
            parse_partition_field(entry)
        return value

    @field_validator("transform")
    @classmethod
    def _transform_ref(cls, value: str | None) -> str | None:
        if value is not None and not re.fullmatch(r"[\w./-]+(\.py)?:[A-Za-z_][\w.]*", value):
            raise ValueError("module:function (for example my_pkg.transforms:clean_orders)")
        return value

    @property
    def identifier(self) -> str:
        """``namespace.name``."""
        return f"{self.namespace}.{self.name}"

    @property
    def declared_in(self) -> str:
        """Where the table was declared, for error messages: its file, else ``table <namespace.name>``."""
        return self.defined_at.file if self.defined_at else f"table {self.identifier}"

    @property
    def partition_fields(self) -> list[PartitionField]:
        """Parsed ``partitioning`` entries."""
        return [parse_partition_field(p) for p in self.partitioning]

    def with_registry(self, registry: SchemaRegistry) -> TableSpec:
        """A copy reading ``registry`` (the environment's, or its own with references resolved)."""
        return self.model_copy(update={"source": self.source.model_copy(update={"schema_registry": registry})})

    # What ``commit_mode`` implies for every stage, decided here and nowhere else.
    @property
    def upserts(self) -> bool:
        """Rows merge on ``key_fields`` and a null value (or a Debezium delete) deletes its key.

        Decode emits tombstone rows, checks reject rows without keys, write merges (merge-on-read
        tables). Under append and overwrite a null value is an error record.
        """
        return self.commit_mode == "upsert"

    @property
    def replaces_rows(self) -> bool:
        """A batch may replace rows already committed (overwrite, upsert): rows are not records one to one."""
        return self.commit_mode in ("overwrite", "upsert")


class Pipeline(Frozen):
    """A pipeline file: an id, a default catalog and its tables."""

    pipeline: str
    catalog: str | None = None
    definitions: list[str] = Field(default_factory=list)
    tables: list[TableSpec] = Field(default_factory=list)
    source_file: str = Field("", exclude=True)

    @field_validator("pipeline")
    @classmethod
    def _ident(cls, value: str) -> str:
        return _identifier(value)

    def tables_of_format(self, fmt: str) -> list[TableSpec]:
        """The tables whose messages are in ``fmt``."""
        return [t for t in self.tables if t.source.format == fmt]
