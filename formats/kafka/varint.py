"""Kafka's zig-zag varints (protobuf style, as in ``ByteUtils.readVarint``/``readVarlong``).

:func:`read_varint` / :func:`read_varlong` decode from a buffer at a position and return the
value and the next position; they raise :class:`~formats.kafka.errors.KafkaTruncatedError` when
the buffer ends inside a varint and :class:`~formats.kafka.errors.KafkaCorruptError` when a
varint is longer than its type allows. :func:`write_varint` encodes (int32 and int64 alike).
"""

from __future__ import annotations

from formats.kafka.errors import KafkaCorruptError, KafkaTruncatedError

Buffer = bytes | bytearray | memoryview

_INT32_MAX_BYTES = 5
_INT64_MAX_BYTES = 10


def _read(buf: Buffer, pos: int, max_bytes: int, what: str) -> tuple[int, int]:
    raw = 0
    shift = 0
    end = len(buf)
    for i in range(max_bytes):
        if pos + i >= end:
            raise KafkaTruncatedError(f"buffer ends inside a {what}", offset=pos)
        byte = buf[pos + i]
        raw |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (raw >> 1) ^ -(raw & 1), pos + i + 1
        shift += 7
    raise KafkaCorruptError(f"{what} longer than {max_bytes} bytes", offset=pos)


def read_varint(buf: Buffer, pos: int) -> tuple[int, int]:
    """A zig-zag int32 varint at ``pos``: ``(value, next position)``."""
    value, nxt = _read(buf, pos, _INT32_MAX_BYTES, "varint")
    if not -(2**31) <= value < 2**31:
        raise KafkaCorruptError("varint out of int32 range", offset=pos)
    return value, nxt


def read_varlong(buf: Buffer, pos: int) -> tuple[int, int]:
    """A zig-zag int64 varlong at ``pos``: ``(value, next position)``."""
    value, nxt = _read(buf, pos, _INT64_MAX_BYTES, "varlong")
    if not -(2**63) <= value < 2**63:
        raise KafkaCorruptError("varlong out of int64 range", offset=pos)
    return value, nxt


def write_varint(value: int) -> bytes:
    """The zig-zag varint encoding of a signed int32 or int64 ``value``."""
    raw = (value << 1) ^ (value >> 63)
    raw &= (1 << 64) - 1
    out = bytearray()
    while raw >= 0x80:
        out.append((raw & 0x7F) | 0x80)
        raw >>= 7
    out.append(raw)
    return bytes(out)
