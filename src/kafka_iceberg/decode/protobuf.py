"""Protobuf through a registry: descriptors from the registered schemas, messages → Python values.

The registry holds each file either as ``.proto`` text (Confluent, Apicurio) or, asked with
``format=serialized``, as a base64 ``FileDescriptorProto`` (what confluent-kafka registers).
Text is compiled with the ``protoc`` that grpcio-tools bundles; imports come from the schema's
references, and the well-known types from protobuf itself.

Mapping: message → struct, repeated → array, map → map, enum → string, int32/sint32/sfixed32 →
int, int64/sint64/sfixed64/uint32/fixed32 → long, uint64/fixed64 → decimal(20,0), float → float,
double → double, bool → boolean, string → string, bytes → binary; well-known types
``google.protobuf.Timestamp`` → timestamp, ``Duration`` → long (microseconds), wrappers
(``Int64Value``...) → their optional scalar, ``Struct``/``Value``/``Any`` → string (JSON).
"""

from __future__ import annotations

import base64
import binascii
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kafka_iceberg.decode.registry import RegisteredSchema, RegistryClient
from kafka_iceberg.decode.wire import message_indexes

if TYPE_CHECKING:
    from pyspark.sql.types import DataType, StructType

_WRAPPERS = {
    f"google.protobuf.{n}Value"
    for n in ("Double", "Float", "Int64", "UInt64", "Int32", "UInt32", "Bool", "String", "Bytes")
}
_JSONISH = {"google.protobuf.Struct", "google.protobuf.Value", "google.protobuf.ListValue", "google.protobuf.Any"}


def _well_known(name: str) -> bytes | None:
    from google.protobuf import (  # noqa: F401 (importing registers the files in the default pool)
        any_pb2,
        descriptor_pool,
        duration_pb2,
        empty_pb2,
        struct_pb2,
        timestamp_pb2,
        wrappers_pb2,
    )

    try:
        return bytes(descriptor_pool.Default().FindFileByName(name).serialized_pb)
    except KeyError:
        return None


def file_set(client: RegistryClient, schema: RegisteredSchema, name: str = "schema.proto") -> tuple[bytes, ...]:
    """Serialized ``FileDescriptorProto``s of ``schema`` and everything it imports, imports first."""
    out: list[bytes] = []
    seen: set[str] = set()

    def add(current: RegisteredSchema, file_name: str) -> None:
        if file_name in seen:
            return
        seen.add(file_name)
        for ref in current.references:
            found = client.version(ref.subject, ref.version, "PROTOBUF")
            if found is not None:
                add(found, ref.name)
        out.append(_to_file(current, file_name, out))

    add(schema, name)
    return tuple(out)


def _to_file(schema: RegisteredSchema, file_name: str, deps: list[bytes]) -> bytes:
    from google.protobuf import descriptor_pb2

    try:
        proto = descriptor_pb2.FileDescriptorProto()
        proto.ParseFromString(base64.b64decode(schema.schema, validate=True))
        if proto.message_type or proto.enum_type:
            return bytes(proto.SerializeToString())
    except (binascii.Error, ValueError, Exception):
        pass
    return compile_proto(schema.schema, file_name, deps)


def compile_proto(text: str, file_name: str, deps: list[bytes]) -> bytes:
    """Compile ``.proto`` text with grpcio-tools' protoc; returns the serialized FileDescriptorProto.

    Raises:
        ValueError: the text does not compile (protoc's message).
        NotInstalledError: grpcio-tools is missing.
    """
    from google.protobuf import descriptor_pb2

    from kafka_iceberg.errors import NotInstalledError

    try:
        import grpc_tools
        from grpc_tools import protoc
    except ImportError as exc:
        raise NotInstalledError("Protobuf .proto schemas need protoc: pip install 'kafka-iceberg[protobuf]'") from exc
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for dep in deps:
            proto = descriptor_pb2.FileDescriptorProto()
            proto.ParseFromString(dep)
            descriptor_set = descriptor_pb2.FileDescriptorSet(file=[proto])
            (root / (proto.name + ".pb")).parent.mkdir(parents=True, exist_ok=True)
            (root / (proto.name + ".pb")).write_bytes(descriptor_set.SerializeToString())
        (root / file_name).parent.mkdir(parents=True, exist_ok=True)
        (root / file_name).write_text(text)
        out = root / "out.pb"
        include = Path(grpc_tools.__file__).parent / "_proto"
        code = protoc.main(["protoc", f"-I{root}", f"-I{include}", f"--descriptor_set_out={out}", file_name])
        if code != 0 or not out.exists():
            raise ValueError(f"the registered .proto schema {file_name} does not compile (protoc exit {code})")
        parsed = descriptor_pb2.FileDescriptorSet()
        parsed.ParseFromString(out.read_bytes())
        return bytes(parsed.file[-1].SerializeToString())


def _pool(files: tuple[bytes, ...]) -> tuple[Any, Any]:
    """(pool, the last file's descriptor) with the well-known types available."""
    from google.protobuf import descriptor_pb2, descriptor_pool

    pool = descriptor_pool.DescriptorPool()
    added: set[str] = set()

    def add(data: bytes) -> Any:
        proto = descriptor_pb2.FileDescriptorProto()
        proto.ParseFromString(data)
        for dep in proto.dependency:
            if dep not in added and (known := _well_known(dep)) is not None:
                add(known)
        if proto.name not in added:
            pool.Add(proto)
            added.add(proto.name)
        return pool.FindFileByName(proto.name)

    last = None
    for data in files:
        last = add(data)
    return pool, last


def _message(file_desc: Any, indexes: list[int]) -> Any:
    types = list(file_desc.message_types_by_name.values())
    desc = None
    for depth, index in enumerate(indexes):
        if index >= len(types):
            raise ValueError(f"message index {indexes} not in the schema")
        desc = types[index]
        if depth + 1 < len(indexes):
            types = list(desc.nested_types)
    return desc


def columns(files: tuple[bytes, ...], indexes: list[int]) -> StructType:
    """The columns of the message at ``indexes`` (``[0]``: the first top-level message)."""
    _, file_desc = _pool(files)
    return spark_type_of_message(_message(file_desc, indexes))


def spark_type_of_message(desc: Any, depth: int = 0) -> StructType:
    """A message descriptor as a struct."""
    from pyspark.sql import types as T

    return T.StructType([T.StructField(f.name, _field_type(f, depth), True) for f in desc.fields])


def _field_type(f: Any, depth: int) -> DataType:
    from pyspark.sql import types as T

    if f.message_type is not None and f.message_type.GetOptions().map_entry:
        key, value = f.message_type.fields_by_name["key"], f.message_type.fields_by_name["value"]
        return T.MapType(_scalar(key, depth), _scalar(value, depth), True)
    element = _scalar(f, depth)
    repeated = f.is_repeated if hasattr(f, "is_repeated") else f.label == f.LABEL_REPEATED
    return T.ArrayType(element, True) if repeated else element


def _scalar(f: Any, depth: int) -> DataType:
    from google.protobuf.descriptor import FieldDescriptor as F
    from pyspark.sql import types as T

    if f.type in (F.TYPE_MESSAGE, F.TYPE_GROUP):
        name = f.message_type.full_name
        if name == "google.protobuf.Timestamp":
            return T.TimestampType()
        if name == "google.protobuf.Duration":
            return T.LongType()
        if name in _WRAPPERS:
            return _scalar(f.message_type.fields_by_name["value"], depth)
        if name in _JSONISH or depth > 32:
            return T.StringType()
        return spark_type_of_message(f.message_type, depth + 1)
    ints = {F.TYPE_INT32, F.TYPE_SINT32, F.TYPE_SFIXED32}
    longs = {F.TYPE_INT64, F.TYPE_SINT64, F.TYPE_SFIXED64, F.TYPE_UINT32, F.TYPE_FIXED32}
    if f.type in ints:
        return T.IntegerType()
    if f.type in longs:
        return T.LongType()
    if f.type in (F.TYPE_UINT64, F.TYPE_FIXED64):
        return T.DecimalType(20, 0)
    simple = {
        F.TYPE_FLOAT: T.FloatType(),
        F.TYPE_DOUBLE: T.DoubleType(),
        F.TYPE_BOOL: T.BooleanType(),
        F.TYPE_STRING: T.StringType(),
        F.TYPE_BYTES: T.BinaryType(),
        F.TYPE_ENUM: T.StringType(),
    }
    return simple[f.type]


class Reader:
    """Decodes wire-format Protobuf payloads of one writer schema (per process, cached)."""

    def __init__(self, files: tuple[bytes, ...]):
        self.pool, self.file = _pool(files)
        self._classes: dict[tuple[int, ...], Any] = {}

    def read(self, payload: bytes) -> dict[str, Any]:
        """The message as Python values.

        Raises:
            ValueError: a bad index list, or bytes that do not parse as the message.
        """
        from google.protobuf import message_factory
        from google.protobuf.message import DecodeError

        indexes, data = message_indexes(payload)
        key = tuple(indexes)
        if key not in self._classes:
            self._classes[key] = message_factory.GetMessageClass(_message(self.file, indexes))
        message = self._classes[key]()
        try:
            message.ParseFromString(data)
        except DecodeError as exc:
            raise ValueError(f"not a valid Protobuf message: {exc}") from None
        return to_python(message)


def to_python(message: Any) -> dict[str, Any]:
    """A message's fields as Python values (unset scalars are their defaults, unset messages None)."""
    from google.protobuf.descriptor import FieldDescriptor as F

    out: dict[str, Any] = {}
    for f in message.DESCRIPTOR.fields:
        value = getattr(message, f.name)
        repeated = f.is_repeated if hasattr(f, "is_repeated") else f.label == f.LABEL_REPEATED
        if f.message_type is not None and f.message_type.GetOptions().map_entry:
            value_field = f.message_type.fields_by_name["value"]
            out[f.name] = {k: _value(v, value_field) for k, v in value.items()}
        elif repeated:
            out[f.name] = [_value(v, f) for v in value]
        elif f.type == F.TYPE_MESSAGE and not message.HasField(f.name):
            out[f.name] = None
        else:
            out[f.name] = _value(value, f)
    return out


def _value(value: Any, f: Any) -> Any:
    import decimal

    from google.protobuf import json_format
    from google.protobuf.descriptor import FieldDescriptor as F

    if f.type == F.TYPE_ENUM:
        known = f.enum_type.values_by_number.get(value)
        return known.name if known is not None else str(value)
    if f.type in (F.TYPE_UINT64, F.TYPE_FIXED64):
        return decimal.Decimal(value)
    if f.type != F.TYPE_MESSAGE:
        return value
    name = f.message_type.full_name
    if name == "google.protobuf.Timestamp":
        return value.ToDatetime(tzinfo=__import__("datetime").timezone.utc)
    if name == "google.protobuf.Duration":
        return value.ToMicroseconds()
    if name in _WRAPPERS:
        return _value(value.value, f.message_type.fields_by_name["value"])
    if name in _JSONISH:
        return json_format.MessageToJson(value, indent=None)
    return to_python(value)
