"""Decode stage: a Kafka-shaped DataFrame → table rows plus error rows (see ``docs/decode.md``).

Everything is lazy and vectorised (Spark SQL expressions, no Python per record), for batch and
streaming DataFrames alike. The one exception is flatten with schema discovery (no declared
schema, or ``schema_evolution`` other than strict): finding new keys needs to look at the batch.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from kafka_iceberg.decode.arrow import Layout, arrow_parses, decode_with_arrow, layout_for, uses_arrow
from kafka_iceberg.decode.codec import Codec
from kafka_iceberg.decode.csv import csv_plan
from kafka_iceberg.decode.discover import discover
from kafka_iceberg.decode.flatten import flatten_plan, parse_stages
from kafka_iceberg.decode.plan import (
    ERROR_STAGE,
    Plan,
    apply_stages,
    kafka_frame,
    outcome_of,
    single_frame,
    split,
)
from kafka_iceberg.decode.pt import pt_value
from kafka_iceberg.decode.schemaful import decode_schemaful, is_schemaful
from kafka_iceberg.decode.simple import binary_plan, json_plan, text_plan
from kafka_iceberg.decode.sql import new_nonce
from kafka_iceberg.errors import ConfigError
from kafka_iceberg.records import ERROR_COLUMN_TYPES as ERROR_COLUMNS
from kafka_iceberg.records import HEADERS_TYPE as HEADERS_ARRAY_TYPE
from kafka_iceberg.records import TOMBSTONE_COLUMN
from kafka_iceberg.spec.columns import payload_columns
from kafka_iceberg.spec.model import TableSpec
from kafka_iceberg.spec.types import columns_from_json_schema

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = [
    "ERROR_COLUMNS",
    "ERROR_STAGE",
    "HEADERS_ARRAY_TYPE",
    "TOMBSTONE_COLUMN",
    "Decoded",
    "decode",
    "discovers_columns",
    "pt_value",
]


@dataclass(frozen=True)
class Decoded:
    """The outcome of decoding one batch.

    Its two views of the batch are built when first read, so each path pays only for its own: the
    step-by-step path reads ``rows`` and ``errors``, the single pass reads ``single`` (every
    ``select`` is analysed by Spark as it is built, a fixed cost per batch).

    Attributes:
        new_columns: flatten only: payload columns found in the data but not known
            (name → canonical type), in first-seen order. They are also columns of ``rows``.
        outcome: the per-record decode outcome that ``rows`` and ``errors`` are both filtered
            from. Persist it before using either and the batch is decoded once, not once for
            the rows and again for the errors.
        parsed: the Arrow decoder's pass, which ``outcome`` reads (None for the Spark decoder).
        passes: what to persist instead of ``parsed`` and ``outcome`` (the schema-driven formats:
            ``decode/schemaful.py``); None for the others.
        layout: what the Arrow decoder parses, or would with ``decoder: arrow`` (None where it
            cannot: text, binary, flatten finding new columns); the single pass writes the records
            it certifies where they are parsed (``write/certified.py``).
        plan: how ``outcome`` is read into rows and error rows (``decode/plan.py``).
        pt, include_headers: the batch's ``pt`` value (None: no such column) and whether rows
            carry the headers map.
    """

    new_columns: dict[str, str]
    outcome: DataFrame
    plan: Plan = field(repr=False)
    pt: str | None
    include_headers: bool
    parsed: DataFrame | None = None
    passes: list[DataFrame] | None = None
    layout: Layout | None = None

    @cached_property
    def _split(self) -> tuple[DataFrame, DataFrame]:
        return split(self.outcome, self.plan, pt=self.pt, include_headers=self.include_headers)

    @property
    def rows(self) -> DataFrame:
        """The table's columns in table order plus ``_ki_tombstone`` BOOLEAN."""
        return self._split[0]

    @property
    def errors(self) -> DataFrame:
        """One row per record that could not be decoded, with :data:`ERROR_COLUMNS`."""
        return self._split[1]

    @cached_property
    def single(self) -> tuple[DataFrame, list[str]]:
        """Rows and error rows in one frame, and the row's column names.

        What one pass over the batch reads (:func:`~kafka_iceberg.decode.plan.single_frame`).
        """
        return single_frame(self.outcome, self.plan, pt=self.pt, include_headers=self.include_headers)

    def to_persist(self) -> list[DataFrame]:
        """What to persist, in this order, so each decoding pass runs once per batch.

        The Arrow decoder has two passes: its own (``parsed``), then the Spark decoder's over the
        records it did not certify (``outcome``, which reads ``parsed``). The schema-driven formats
        name theirs (``passes``).
        """
        if self.passes is not None:
            return list(self.passes)
        return [frame for frame in (self.parsed, self.outcome) if frame is not None]


def discovers_columns(spec: TableSpec) -> bool:
    """Whether decoding reads the batch once more before decoding it: flatten finding new keys."""
    return spec.source.format == "flatten" and spec.schema_evolution != "strict"


def decode(
    df: DataFrame,
    spec: TableSpec,
    *,
    flush_time: datetime,
    known_columns: Mapping[str, str] | None = None,
    base_dir: Path | None = None,
    decoder: Literal["spark", "arrow"] | None = None,
    codec: Codec | None = None,
) -> Decoded:
    """Decode a Kafka-shaped DataFrame with the table spec's format and mode.

    Args:
        df: ``key BINARY, value BINARY, topic STRING, partition INT, offset BIGINT,
            timestamp TIMESTAMP, headers ARRAY<STRUCT<key STRING, value BINARY>>`` (headers
            may be NULL or absent); batch or streaming.
        spec: the table spec.
        flush_time: the batch's flush time, which sets ``pt`` (UTC; naive means UTC).
        known_columns: the existing table's payload columns (name → canonical type); their
            types win over the declared schema and over inference.
        base_dir: directory that a relative ``schema.json_schema`` path is resolved against.
        decoder: the decoder to use in place of ``source.decoder``: ``spark`` for the records the
            Arrow decoder already left to it, ``arrow`` where the single pass resolves ``auto`` to it
            (``run/batch.py``); the Arrow decoder still applies only where it can.
        codec: a schema-driven format's codec for this batch, built already from a frame holding
            these records (:func:`~kafka_iceberg.decode.schemaful.build_codec`): not built again.

    Returns:
        Rows, error rows and (flatten) new columns.

    Raises:
        ConfigError: the spec cannot be decoded (csv without columns, ``mode: default`` for a
            structured format, or flatten schema discovery on a streaming DataFrame).
        OSError: the JSON Schema file cannot be read.
        ValueError: ``df`` is not Kafka-shaped, or the JSON Schema is not an object schema.
    """
    fmt, mode = spec.source.format, spec.source.effective_mode
    if mode == "default" and fmt not in ("text", "binary"):
        raise _config_error(spec, "source.mode", mode, f"key or value (format {fmt} decodes one part)")
    nonce = new_nonce()
    frame = kafka_frame(df)
    pt = pt_value(spec.partition_window, flush_time)
    include_headers = spec.source.include_headers
    if is_schemaful(spec):
        staged, schema_plan, columns, passes = decode_schemaful(frame, spec, base_dir=base_dir, codec=codec)
        known = dict(known_columns or {})
        new = {f.name: f.dataType.simpleString() for f in columns.fields if f.name not in known}
        return Decoded(new, staged, schema_plan, pt, include_headers, passes=passes)
    new_columns: dict[str, str] = {}
    arrow_columns: dict[str, str] = {}
    required: set[str] = set()
    if fmt == "text":
        plan = text_plan(spec)
    elif fmt == "binary":
        plan = binary_plan(spec)
    elif fmt == "json":
        plan = json_plan(spec, nonce)
    else:
        plan, new_columns, arrow_columns, required = _structured_plan(
            frame, spec, nonce, streaming=df.isStreaming, known_columns=known_columns, base_dir=base_dir
        )
    parsed: DataFrame | None = None
    layout = layout_for(spec, arrow_columns, required) if arrow_parses(spec) else None
    if layout is not None and uses_arrow(spec, decoder):
        outcome, parsed = decode_with_arrow(frame, spec, plan, layout)
    else:
        outcome = outcome_of(frame, plan)
    return Decoded(new_columns, outcome, plan, pt, include_headers, parsed=parsed, layout=layout)


def _structured_plan(
    frame: DataFrame,
    spec: TableSpec,
    nonce: str,
    *,
    streaming: bool,
    known_columns: Mapping[str, str] | None,
    base_dir: Path | None,
) -> tuple[Plan, dict[str, str], dict[str, str], set[str]]:
    """The plan for csv or flatten, (flatten) the new columns, the Arrow-parsed columns, the required ones.

    The Arrow decoder parses every payload column for flatten, and the CSV fields' columns (in
    field order) for csv.
    """
    known = dict(known_columns or {})
    declared = payload_columns(spec, base_dir) or {}
    required = _required(spec, base_dir)
    payload = {name: known.get(name) or declared[name] for name in [*known, *declared]}  # table types win
    if spec.source.format == "csv":
        if not payload:
            raise _config_error(spec, "schema", None, "schema.columns (or json_schema) naming the CSV columns")
        layout = spec.source.csv
        order = list(layout.columns) if layout and layout.columns else list(declared or payload)
        fields = {name: payload[name] for name in order}
        return csv_plan(spec, payload, order, required, nonce), {}, fields, required
    if spec.schema_evolution == "strict":
        if not payload:
            raise _config_error(spec, "schema_evolution", "strict", "add_columns or full, or a declared schema")
        return flatten_plan(spec, payload, required, nonce, rejected={}), {}, payload, required
    if streaming:
        raise _config_error(
            spec,
            "schema_evolution",
            spec.schema_evolution,
            "strict with a declared schema, or decode each micro-batch (foreachBatch): "
            "finding new flatten columns needs a batch DataFrame",
        )
    probe = Plan(payload={})
    parsed = parse_stages(probe, spec, nonce)
    found = discover(apply_stages(frame, probe), parsed, payload)
    payload.update(found.new_columns)
    plan = flatten_plan(spec, payload, required, nonce, rejected=found.rejected)
    return plan, found.new_columns, payload, required


def _required(spec: TableSpec, base_dir: Path | None) -> set[str]:
    """Columns a JSON Schema marks required (declared columns are all optional)."""
    if spec.schema_ is None or spec.schema_.json_schema is None:
        return set()
    path = Path(spec.schema_.json_schema)
    if not path.is_absolute() and base_dir is not None:
        path = base_dir / path
    mapped = columns_from_json_schema(json.loads(path.read_text()))
    return {name for name, (_type, required) in mapped.items() if required}


def _config_error(spec: TableSpec, key: str, value: object, expected: str) -> ConfigError:
    return ConfigError.one(spec.declared_in, key, value, expected, "IMPOSSIBLE_COMBINATION")
