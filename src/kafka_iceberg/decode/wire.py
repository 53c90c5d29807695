"""The Confluent wire format: magic byte 0, a 4-byte big-endian schema id, then the payload.

Protobuf payloads start with the message-index list: a zigzag varint count, then that many zigzag
varint indexes (the path from the file's top-level messages to the nested message); a single 0
byte stands for ``[0]``, the first top-level message.
"""

from __future__ import annotations

MAGIC = 0
HEADER_BYTES = 5


class WireError(ValueError):
    """The bytes are not in the Confluent wire format; the message is the per-record reason."""


def split_header(data: bytes, part: str = "value") -> tuple[int, bytes]:
    """``(schema id, payload)`` of a message in the Confluent wire format.

    Raises:
        WireError: empty, shorter than the 5-byte header, or a magic byte other than 0.
    """
    if len(data) == 0:
        raise WireError(f"empty {part} (0 bytes)")
    if data[0] != MAGIC:
        raise WireError(f"wrong magic byte 0x{data[0]:02x} in {part} (the Confluent wire format starts with 0x00)")
    if len(data) < HEADER_BYTES:
        raise WireError(f"{part} of {len(data)} bytes is shorter than the 5-byte Confluent header")
    return int.from_bytes(data[1:HEADER_BYTES], "big"), data[HEADER_BYTES:]


def header_sql(column: str) -> str:
    """SQL true where ``column`` starts with a valid header (the rule of :func:`split_header`)."""
    return f"octet_length({column}) >= {HEADER_BYTES} AND substring({column}, 1, 1) = X'{MAGIC:02X}'"


def schema_id_of(data: bytes | None) -> int | None:
    """The schema id of a wire-format message, or None when it has no valid header."""
    if data is None or len(data) < HEADER_BYTES or data[0] != MAGIC:
        return None
    return int.from_bytes(data[1:HEADER_BYTES], "big")


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data):
            raise WireError("truncated Protobuf message-index list")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (result >> 1) ^ -(result & 1), pos  # zigzag
        shift += 7
        if shift > 63:
            raise WireError("malformed varint in the Protobuf message-index list")


def message_indexes(payload: bytes) -> tuple[list[int], bytes]:
    """``(indexes, message bytes)`` of a Protobuf wire-format payload.

    Raises:
        WireError: the index list is truncated or malformed.
    """
    count, pos = _varint(payload, 0)
    if count == 0:
        return [0], payload[pos:]
    if count < 0 or count > 100:
        raise WireError(f"implausible Protobuf message-index count {count}")
    out = []
    for _ in range(count):
        index, pos = _varint(payload, pos)
        if index < 0:
            raise WireError(f"negative Protobuf message index {index}")
        out.append(index)
    return out, payload[pos:]


def encode_indexes(indexes: list[int]) -> bytes:
    """The wire bytes of a message-index list (``[0]`` → a single 0 byte), for tests and tools."""
    if indexes == [0]:
        return b"\x00"

    def zigzag(n: int) -> bytes:
        value = (n << 1) ^ (n >> 63)
        out = bytearray()
        while True:
            byte = value & 0x7F
            value >>= 7
            if value:
                out.append(byte | 0x80)
            else:
                out.append(byte)
                return bytes(out)

    return zigzag(len(indexes)) + b"".join(zigzag(i) for i in indexes)
