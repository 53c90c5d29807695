"""What a schema-driven format's decode needs in Spark's Python workers: the :class:`Codec`.

Its own module so that the decoders it drives (``schemaful``, ``avro_jvm``) both take it without
importing each other.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql.types import StructType


@dataclass(frozen=True)
class Codec:
    """Everything a Python worker needs to decode a partition (pickled to Spark's workers)."""

    fmt: str  # avro, protobuf, json_schema, or json (Debezium JSON)
    part: str  # value or key
    source: str  # the frame column holding the payload
    wire: bool  # Confluent wire format (magic byte and schema id)
    columns: StructType
    writers: dict[int, str] = field(default_factory=dict)  # schema id → schema text (avro, json_schema)
    protos: dict[int, tuple[bytes, ...]] = field(default_factory=dict)  # schema id → serialized file set
    unknown: frozenset[int] = frozenset()
    plain_schema: str | None = None  # avro without a registry
    envelope: str = "none"
    upsert: bool = False

    @property
    def known_ids(self) -> set[int]:
        """The schema ids this codec has a schema for or knows the registry has none for."""
        return {*self.writers, *self.protos, *self.unknown}
