"""Schema-driven formats: Avro, Protobuf and JSON Schema (Confluent wire format), and Debezium events.

On the driver, per batch: the distinct schema ids of the batch are read (one small aggregation;
the Arrow writer's pass starts from the subjects' latest ids instead, :func:`latest_ids`, and
learns the others from its tasks, ``run/batch.py``), their writer
schemas fetched from the registry (cached per process), and the table's columns taken from the
registry's latest schema for the subject. Then each partition is decoded in Python
(``mapInArrow``) into the Spark decoder's outcome shape, so rows and error rows are split exactly
as for every other format (:func:`kafka_iceberg.decode.plan.split`).

Per-record errors: a wrong magic byte, a message shorter than the header, an unknown schema id,
bytes that do not match the writer schema, a value that does not fit its column. A registry that
does not answer fails the batch (:class:`~kafka_iceberg.errors.RegistryUnavailableError`) after
bounded retries: no record is ever dropped for it.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from kafka_iceberg.decode import avro, avro_jvm, debezium
from kafka_iceberg.decode.codec import Codec
from kafka_iceberg.decode.plan import FAILED, FIELDS, TOMB, Plan, payload_part
from kafka_iceberg.decode.registry import SCHEMA_TYPES, RegisteredSchema, RegistryClient, subject_name
from kafka_iceberg.decode.values import arrow_type, converter
from kafka_iceberg.decode.wire import WireError, header_sql, split_header
from kafka_iceberg.errors import ConfigError
from kafka_iceberg.spec.model import TableSpec
from kafka_iceberg.tasks import map_in_arrow

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType

REASON = "_ki_reason"
SKIP = "_ki_skip"


def is_schemaful(spec: TableSpec) -> bool:
    """Whether ``spec`` is decoded here (a registry format, plain Avro, or a Debezium envelope)."""
    return spec.source.format in SCHEMA_TYPES or spec.source.envelope == "debezium"


def registry_client(spec: TableSpec) -> RegistryClient:
    """The registry client of ``spec``, references (``${env:}``, ``${secret:}``, ``${local:}``) resolved."""
    from kafka_iceberg.environment import local_resolver

    reg = spec.source.schema_registry
    assert reg is not None
    resolve = local_resolver().value
    auth = reg.auth
    return _client(
        resolve(reg.url),
        resolve(auth.username) if auth and auth.username else None,
        resolve(auth.password) if auth and auth.password else None,
        resolve(auth.bearer) if auth and auth.bearer else None,
        reg.retries,
        reg.timeout_seconds,
    )


@functools.lru_cache(maxsize=32)
def _client(  # noqa: PLR0917 (lru_cache keys on positional arguments)
    url: str, username: str | None, password: str | None, bearer: str | None, retries: int, timeout: float
) -> RegistryClient:
    # One client per registry and credentials per process: its schema-id cache lives as long.
    return RegistryClient(url, username, password, bearer, retries=retries, timeout=timeout)


def decode_schemaful(
    frame: DataFrame,
    spec: TableSpec,
    *,
    base_dir: Path | None,
    codec: Codec | None = None,
) -> tuple[DataFrame, Plan, StructType, list[DataFrame]]:
    """(outcome, its plan, payload columns, passes) of a batch of a schema-driven format.

    The outcome and plan are read as the SQL formats' are (``decode/plan.py``: ``split``,
    ``single_frame``); the payload columns are the decoded ``_ki_fields``. The passes are what to
    persist, in order, so each decodes once: the Python decoder's outcome; for Avro the JVM decodes
    (``decode/avro_jvm.py``), the JVM's pass and Python's outcome of the records it left.

    ``codec``: the batch's, when it was built already (for a frame holding these records).
    """
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    codec = codec or build_codec(frame, spec, base_dir=base_dir)
    out_schema = T.StructType(
        [
            *frame.schema.fields,
            T.StructField(FIELDS, codec.columns, True),
            T.StructField(FAILED, T.BooleanType(), False),
            T.StructField(TOMB, T.BooleanType(), False),
            T.StructField(SKIP, T.BooleanType(), False),
            T.StructField(REASON, T.StringType(), True),
        ]
    )
    python = functools.partial(decode_batches, codec=codec)
    writers = avro_jvm.jvm_writers(frame, codec)
    passes: list[DataFrame] = []
    if writers:  # Avro: the JVM decodes what it decodes as Python would; Python the rest
        false = F.lit(False)
        flags = [false.alias(FAILED), false.alias(TOMB), false.alias(SKIP), F.lit(None).cast("string").alias(REASON)]
        parsed, good, left = avro_jvm.split(frame, codec, writers, fields=FIELDS, flags=flags)
        left = map_in_arrow(left, python, out_schema)
        passes = [parsed, left]  # cached, each runs once; the outcome is a union over them
        outcome = good.unionByName(left)
    else:
        outcome = map_in_arrow(frame, python, out_schema)
        passes = [outcome]
    outcome = outcome.where(f"NOT {SKIP}")
    plan = Plan(payload={f.name: f.dataType.simpleString() for f in codec.columns.fields})
    plan.checks.problem(f"{REASON} IS NOT NULL", REASON)
    return outcome, plan, codec.columns, passes


def build_codec(
    frame: DataFrame, spec: TableSpec, *, base_dir: Path | None = None, ids: Iterable[int] | None = None
) -> Codec:
    """Fetch what the batch needs from the registry (driver side) and decide the columns.

    ``ids``: the schema ids to fetch, when the caller knows them (``run/batch.py`` keeps those of
    earlier batches); None reads the batch's own in one small Spark job.

    Raises:
        RegistryUnavailableError: the registry did not answer through every retry.
        ConfigError: a streaming DataFrame (the batch's schema ids must be read first).
    """
    src = spec.source
    part, source = payload_part(spec)
    upsert = spec.upserts
    if frame.isStreaming:
        raise ConfigError.one(
            spec.declared_in,
            "source.format",
            src.format,
            "decode each micro-batch (foreachBatch): schema ids are read per batch",
            "IMPOSSIBLE_COMBINATION",
        )
    if src.format == "json":  # Debezium JSON
        schemas = [
            r[0]
            for r in frame.where(f"{source} IS NOT NULL")
            .selectExpr(f"get_json_object(CAST({source} AS STRING), '$.schema') AS s")
            .where("s IS NOT NULL")
            .distinct()
            .collect()
        ]
        try:
            image = debezium.json_image(sorted(schemas))
        except ValueError as exc:
            raise ConfigError.one(
                spec.declared_in, "source.envelope", "debezium", str(exc), "IMPOSSIBLE_COMBINATION"
            ) from None
        return Codec(
            "json", part, source, False, debezium.with_change_columns(image), envelope="debezium", upsert=upsert
        )
    if src.avro is not None:  # plain Avro from a file
        path = Path(src.avro.schema_file)
        if not path.is_absolute() and base_dir is not None:
            path = base_dir / path
        text = path.read_text()
        columns = avro.record_columns(text)
        if src.envelope == "debezium":
            columns = debezium.with_change_columns(debezium.avro_image(columns))
        return Codec("avro", part, source, False, columns, plain_schema=text, envelope=src.envelope, upsert=upsert)

    client = registry_client(spec)
    schema_type = SCHEMA_TYPES[src.format]
    if ids is None:
        ids = [
            int(r[0])
            for r in frame.where(f"{source} IS NOT NULL AND {header_sql(source)}")
            .selectExpr(f"conv(hex(substring({source}, 2, 4)), 16, 10) AS id")
            .distinct()
            .collect()
        ]
    writers: dict[int, RegisteredSchema] = {}
    unknown: set[int] = set()
    for schema_id in sorted(ids):
        found = client.by_id(schema_id, schema_type)
        if found is None or (found.schema_type or "AVRO").upper() != schema_type:
            unknown.add(schema_id)
        else:
            writers[schema_id] = found
    topics = list(src.topics or [r[0] for r in frame.select("topic").distinct().collect()])
    latest = _latest(client, spec, topics, writers, schema_type, is_key=part == "key")
    columns = _columns(src.format, [*latest, *writers.values()], client)
    if src.envelope == "debezium":
        columns = debezium.with_change_columns(debezium.avro_image(columns))
    protos: dict[int, tuple[bytes, ...]] = {}
    if src.format == "protobuf":
        from kafka_iceberg.decode import protobuf

        protos = {sid: protobuf.file_set(client, schema) for sid, schema in writers.items()}
    return Codec(
        src.format,
        part,
        source,
        True,
        columns,
        writers={sid: s.schema for sid, s in writers.items()},
        protos=protos,
        unknown=frozenset(unknown),
        envelope=src.envelope,
        upsert=upsert,
    )


def latest_ids(spec: TableSpec) -> set[int] | None:
    """The schema ids of the latest version of each subject ``spec``'s topics name, or None.

    What producers write now, known with no Spark job: a batch's first codec can start from them,
    and the tasks report any other id they meet (``run/batch.py``). None where the topics do not
    name every subject (a pattern, the ``record`` and ``topic_record`` strategies, which need the
    record's name from a writer schema), or a subject has no version of the format's type.
    """
    src = spec.source
    reg = src.schema_registry
    if reg is None or src.avro is not None or not src.topics or reg.subject_strategy != "topic":
        return None
    if src.format not in SCHEMA_TYPES or src.envelope == "debezium":
        return None
    client, schema_type = registry_client(spec), SCHEMA_TYPES[src.format]
    is_key = payload_part(spec)[0] == "key"
    ids = set()
    for topic in src.topics:
        subject = subject_name("topic", topic, None, is_key=is_key)
        assert subject is not None  # the topic strategy needs no record name
        found = client.version(subject, "latest", schema_type)
        if found is None or (found.schema_type or "AVRO").upper() != schema_type:
            return None
        ids.add(found.id)
    return ids


def _latest(
    client: RegistryClient,
    spec: TableSpec,
    topics: list[str],
    writers: dict[int, RegisteredSchema],
    schema_type: str,
    *,
    is_key: bool,
) -> list[RegisteredSchema]:
    """The latest registered schema of every subject the batch's records belong to."""
    reg = spec.source.schema_registry
    assert reg is not None
    names = {_record_name(spec.source.format, w) for w in writers.values()} or {None}
    subjects = {
        s for t in topics for n in names if (s := subject_name(reg.subject_strategy, t, n, is_key=is_key)) is not None
    }
    out = []
    for subject in sorted(subjects):
        found = client.version(subject, "latest", schema_type)
        if found is not None:
            out.append(found)
    return out


def _record_name(fmt: str, schema: RegisteredSchema) -> str | None:
    if fmt == "avro":
        return avro.record_name(schema.schema)
    if fmt == "json_schema":
        title = json.loads(schema.schema).get("title")
        return str(title) if title else None
    return None  # protobuf: the record strategies name the message; the topic strategy is the common one


def _columns(fmt: str, schemas: list[RegisteredSchema], client: RegistryClient) -> StructType:
    """Columns from the first schema (the latest), then fields only older writers still have."""
    from pyspark.sql import types as T

    merged: dict[str, T.StructField] = {}
    for schema in schemas:
        if fmt == "avro":
            struct = avro.record_columns(schema.schema)
        elif fmt == "json_schema":
            from kafka_iceberg.decode import jsonschema as js

            struct = js.columns(schema.schema)
        else:
            from kafka_iceberg.decode import protobuf

            struct = protobuf.columns(protobuf.file_set(client, schema), [0])
        for f in struct.fields:
            merged.setdefault(f.name, f)
    return T.StructType(list(merged.values()))


# -- Python side (Spark's Python workers) -----------------------------------------------------------
class Readers:
    """Per-process decoders by schema id, built once from the codec's schema texts."""

    def __init__(self, codec: Codec):
        self.codec = codec
        self._cache: dict[int | None, Any] = {}
        self.conform = converter(codec.columns)  # the table's columns, their checks decided once
        self._plain: dict[int | None, bool] = {}

    def plain(self, schema_id: int | None) -> bool:
        """Whether values of writer ``schema_id`` go to Arrow as fastavro gives them, without :attr:`conform`.

        Only an Avro record writer whose columns are the codec's, type for type, with nothing to
        convert (:func:`~kafka_iceberg.decode.avro.plain_values`). Arrow then checks what
        ``conform`` would (integer ranges, decimal digits); a batch Arrow refuses is conformed
        value by value, which gives each record its reason (:func:`decode_batch`).
        """
        if schema_id not in self._plain:
            codec = self.codec
            text = codec.plain_schema if schema_id is None else codec.writers.get(schema_id)
            plain = codec.fmt == "avro" and codec.envelope == "none" and text is not None
            self._plain[schema_id] = plain and avro.plain_record(str(text), codec.columns)
        return self._plain[schema_id]

    def read(self, schema_id: int | None, payload: bytes) -> Any:
        """The value of ``payload`` written with schema ``schema_id`` (None: plain Avro's schema file).

        Raises:
            ValueError: the payload does not match the schema.
        """
        codec = self.codec
        if schema_id not in self._cache:
            if codec.fmt == "avro":
                text = codec.plain_schema if schema_id is None else codec.writers[schema_id]
                self._cache[schema_id] = avro.parse(str(text))
            elif codec.fmt == "json_schema":
                from kafka_iceberg.decode import jsonschema as js

                self._cache[schema_id] = js.validator(codec.writers[schema_id or 0])
            elif codec.fmt == "protobuf":
                from kafka_iceberg.decode import protobuf

                self._cache[schema_id] = protobuf.Reader(codec.protos[schema_id or 0])
        reader = self._cache.get(schema_id)
        if codec.fmt == "avro":
            return avro.read(payload, reader)
        if codec.fmt == "json_schema":
            from kafka_iceberg.decode import jsonschema as js

            return js.read(payload, reader)
        if codec.fmt == "protobuf":
            assert reader is not None
            return reader.read(payload)
        try:
            event = json.loads(payload)
        except ValueError:
            raise ValueError(f"invalid JSON in {codec.part}") from None
        if isinstance(event, dict) and isinstance(event.get("schema"), dict) and "payload" in event:
            event = debezium.connect_values(event["payload"], event["schema"])
        return event


def decode_batches(batches: Iterator[pa.RecordBatch], codec: Codec) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` function: each batch with the decoded fields and the outcome flags."""
    readers = Readers(codec)
    for batch in batches:
        yield decode_batch(batch, codec, readers)


def decode_batch(batch: pa.RecordBatch, codec: Codec, readers: Readers | None = None) -> pa.RecordBatch:
    """Decode one Arrow batch of the Kafka frame (see :func:`decode_record`)."""
    return _decode_batch(batch, codec, readers or Readers(codec))[0]


def _decode_batch(batch: pa.RecordBatch, codec: Codec, readers: Readers) -> tuple[pa.RecordBatch, list[int]]:
    """:func:`decode_batch`, and the rows whose error is settled (:attr:`Outcome.settled`)."""
    import pyarrow as pa

    payloads = batch.column(codec.source).to_pylist()
    rows: list[dict[str, Any] | None] = []
    failed, tomb, skip, reasons, settled = [], [], [], [], []
    as_read = []  # rows of plain writers, not conformed (Readers.plain)
    for i, data in enumerate(payloads):
        outcome = decode_record(data, codec, readers)
        rows.append(outcome.row)
        failed.append(outcome.reason is not None)
        tomb.append(outcome.is_delete)
        skip.append(outcome.skipped)
        reasons.append(outcome.reason)
        if outcome.plain:
            as_read.append(i)
        if outcome.settled:
            settled.append(i)
    struct = arrow_type(codec.columns)
    try:
        fields = pa.array(rows, type=struct)
    except (pa.ArrowException, ValueError, TypeError, OverflowError):
        for i in as_read:  # conform gives each record refused its reason, as without the shortcut
            try:
                rows[i] = readers.conform(rows[i])
            except (ValueError, TypeError, ArithmeticError) as exc:
                rows[i], failed[i], reasons[i] = None, True, str(exc)
        try:
            fields = pa.array(rows, type=struct)
        except (pa.ArrowException, ValueError, TypeError, OverflowError):
            fields = _one_by_one(rows, struct, failed, reasons)
    out = [
        *batch.columns,
        fields,
        pa.array(failed, pa.bool_()),
        pa.array(tomb, pa.bool_()),
        pa.array(skip, pa.bool_()),
        pa.array(reasons, pa.string()),
    ]
    names = [*batch.schema.names, FIELDS, FAILED, TOMB, SKIP, REASON]
    return pa.RecordBatch.from_arrays(out, names=names), settled


def decoded_fields(
    batch: pa.RecordBatch, codec: Codec, readers: Readers
) -> tuple[pa.Array, pa.RecordBatch, dict[str, pa.Array], dict[int, str]]:
    """The records of ``batch`` that decode, and their columns: ``(decoded mask, those records, columns, errors)``.

    For the Arrow writer's single pass (``write/certified.py``). ``errors``: the records whose
    error is settled (:attr:`Outcome.settled`: the bytes or the writer schema refused them), by
    their row in ``batch``, with the reason Spark's side would give them; the task routes those
    itself. Any other record that does not decode is left to Spark, whose decoder (this module's,
    again, with the schema ids the tasks report) gives it its error row.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    if avro_jvm.OK in batch.schema.names:
        ok, decoded, fields, errors = _jvm_then_python(batch, codec, readers)
    else:
        out, settled = _decode_batch(batch, codec, readers)
        ok = pc.invert(pc.or_(out.column(FAILED), out.column(SKIP)))
        decoded = out.filter(ok)
        fields = decoded.column(FIELDS)
        errors = _settled_errors(out, settled, range(batch.num_rows))
    assert isinstance(fields, pa.StructArray)
    return ok, decoded, {f.name: fields.field(i) for i, f in enumerate(fields.type)}, errors


def _settled_errors(out: pa.RecordBatch, settled: list[int], rows: Any) -> dict[int, str]:
    """``{row in the batch: reason}`` of the settled errors in ``out`` (:func:`_decode_batch`; its row i is rows[i])."""
    reasons = out.column(REASON)
    return {int(rows[i]): reasons[i].as_py() for i in settled}


def _jvm_then_python(
    batch: pa.RecordBatch, codec: Codec, readers: Readers
) -> tuple[pa.Array, pa.RecordBatch, Any, dict[int, str]]:
    """:func:`decoded_fields` of a batch the JVM decoded first (``avro_jvm.staged``): Python decodes the rest.

    A record the JVM kept, its text UTF-8, has its value as the JVM read it (the same as Python's,
    by ``avro_jvm``'s rules); the others are decoded as they would be without the JVM. The decoded
    records keep the batch's order.
    """
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    jvm = batch.column(avro_jvm.OK).to_numpy(zero_copy_only=False).astype(bool)
    kafka = batch.drop_columns([avro_jvm.DECODED, avro_jvm.OK])
    values = batch.column(avro_jvm.DECODED).filter(pa.array(jvm))
    text = avro_jvm.not_utf8(values)  # the JVM did not check its strings (avro_jvm.staged, text=False)
    if text.any():
        jvm[np.flatnonzero(jvm)[text]] = False
        values = values.filter(pa.array(~text))
    values = values.cast(arrow_type(codec.columns))
    ok = jvm.copy()
    errors: dict[int, str] = {}
    if not jvm.all():
        rest = np.flatnonzero(~jvm)
        out, settled = _decode_batch(kafka.take(pa.array(rest)), codec, readers)
        python = pc.invert(pc.or_(out.column(FAILED), out.column(SKIP))).to_numpy(zero_copy_only=False)
        ok[rest[python]] = True
        errors = _settled_errors(out, settled, rest)
        values = pa.concat_arrays([values, out.column(FIELDS).filter(pa.array(python))])
        # the JVM's records first, then Python's: back to the batch's order
        order = np.argsort(np.concatenate([np.flatnonzero(jvm), rest[python]]), kind="stable")
        values = values.take(pa.array(order))
    decoded = kafka.filter(pa.array(ok)).append_column(FIELDS, values)
    return pa.array(ok), decoded, values, errors


def unseen_ids(batch: pa.RecordBatch, codec: Codec) -> set[int]:
    """The schema ids in ``batch``'s wire headers that ``codec`` neither has nor knows to be unknown."""
    if not codec.wire:
        return set()
    known = codec.known_ids
    out = set()
    for data in batch.column(codec.source).to_pylist():
        try:
            schema_id = split_header(data, codec.part)[0] if data is not None else None
        except WireError:
            continue
        if schema_id is not None and schema_id not in known:
            out.add(schema_id)
    return out


def row_schema(codec: Codec, pt: str | None) -> StructType:
    """The columns Spark's decoder gives a row of ``codec`` (:func:`decode_schemaful`), without its flags."""
    from pyspark.sql import types as T

    from kafka_iceberg.spec.columns import PT_COLUMN

    types = {"topic": T.StringType(), "partition": T.IntegerType(), "offset": T.LongType()}
    kafka = [T.StructField(name, t, True) for name, t in (types | {"timestamp": T.TimestampType()}).items()]
    pt_field = [T.StructField(PT_COLUMN, T.StringType(), False)] if pt is not None else []
    return T.StructType([*kafka, *codec.columns.fields, *pt_field])


def _one_by_one(rows: list[Any], struct: pa.DataType, failed: list[bool], reasons: list[str | None]) -> pa.Array:
    import pyarrow as pa

    parts = []
    for i, row in enumerate(rows):
        try:
            parts.append(pa.array([row], type=struct))
        except (pa.ArrowException, ValueError, TypeError, OverflowError) as exc:
            failed[i], reasons[i] = True, f"value does not fit the table's columns: {exc}"
            parts.append(pa.nulls(1, struct))
    return pa.concat_arrays(parts) if parts else pa.array([], type=struct)


class Outcome(NamedTuple):
    """One message decoded (:func:`decode_record`)."""

    row: dict[str, Any] | None
    is_delete: bool
    skipped: bool  # a Debezium tombstone, which follows a delete
    reason: str | None  # why it is an error; None when it decoded
    plain: bool = False  # the row is fastavro's value, not conformed (:meth:`Readers.plain`)
    # An error the table's columns play no part in (the bytes, the wire header or the writer schema
    # refused the message): decoded again with any codec of the same schema ids, it fails the same way.
    settled: bool = False


def decode_record(data: bytes | None, codec: Codec, readers: Readers) -> Outcome:
    """One message's row, or why it is an error.

    A plain row (:attr:`Outcome.plain`) is checked by Arrow in :func:`decode_batch`, which
    conforms it where Arrow refuses the batch.
    """
    part = codec.part
    if data is None:
        if codec.envelope == "debezium":
            return Outcome(None, False, True, None)  # the tombstone Debezium sends after a delete
        if codec.upsert and part == "value":
            reason = f"null value (tombstone): deletes need source.envelope debezium for format {codec.fmt}"
            return Outcome(None, False, False, reason, settled=True)
        return Outcome(None, False, False, f"null {part}: format {codec.fmt} decodes the message {part}, which is null",
                       settled=True)  # fmt: skip
    schema_id = None
    payload = data
    try:
        if codec.wire:
            schema_id, payload = split_header(data, part)
            if schema_id in codec.unknown or (schema_id not in codec.writers and schema_id not in codec.protos):
                reason = f"unknown schema id {schema_id} in {part} (the schema registry has no such {codec.fmt} schema)"
                return Outcome(None, False, False, reason, settled=schema_id in codec.unknown)  # else: fetched
        elif len(data) == 0 and codec.fmt == "json":
            return Outcome(None, False, False, f"empty {part} (0 bytes)", settled=True)
    except WireError as exc:
        return Outcome(None, False, False, str(exc), settled=True)
    try:
        value = readers.read(schema_id, payload)
    except ValueError as exc:
        which = f"writer schema {schema_id}" if schema_id is not None else "the writer schema"
        if codec.fmt == "json":
            return Outcome(None, False, False, str(exc), settled=True)
        return Outcome(None, False, False, f"{part} does not match {which}: {exc}", settled=True)
    is_delete = False
    try:
        if codec.envelope == "debezium":
            value, is_delete = debezium.change(value)
        elif readers.plain(schema_id):
            return Outcome(value, False, False, None, plain=True)  # Arrow checks it (decode_batch)
        elif not isinstance(value, dict):
            value = {"value": value}
        return Outcome(readers.conform(value), is_delete, False, None)
    except (ValueError, TypeError, ArithmeticError) as exc:
        return Outcome(None, False, False, str(exc))
