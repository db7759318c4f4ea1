"""A minimal protobuf (proto2) wire codec: varints, tags, length-delimited fields.

Only what the BookKeeper ``LedgerMetadataFormat`` message needs. Decoding is bounded: every read
checks the remaining length and raises :class:`~formats.errors.ProtobufError` with the offset.
"""

from __future__ import annotations

from collections.abc import Iterator

from formats.errors import ProtobufError

VARINT = 0
FIXED64 = 1
LENGTH_DELIMITED = 2
FIXED32 = 5
_MASK64 = (1 << 64) - 1


def encode_varint(value: int) -> bytes:
    """Unsigned LEB128; negative ints are written as their 64-bit two's complement (10 bytes)."""
    value &= _MASK64
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def encode_tag(field_number: int, wire_type: int) -> bytes:
    return encode_varint((field_number << 3) | wire_type)


def field_varint(field_number: int, value: int) -> bytes:
    return encode_tag(field_number, VARINT) + encode_varint(value)


def field_bytes(field_number: int, value: bytes) -> bytes:
    return encode_tag(field_number, LENGTH_DELIMITED) + encode_varint(len(value)) + value


def decode_varint(buf: memoryview, pos: int, base: int = 0) -> tuple[int, int]:
    """Read a varint at ``pos``; returns (unsigned value, next position)."""
    if pos < len(buf):
        first = buf[pos]
        if first < 0x80:  # one byte: tags, small numbers, lengths (the common case)
            return first, pos + 1
    result = 0
    shift = 0
    end = len(buf)
    while True:
        if pos >= end:
            raise ProtobufError("truncated varint", offset=base + pos)
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            if result > _MASK64:
                raise ProtobufError("varint longer than 64 bits", offset=base + pos)
            return result, pos
        shift += 7
        if shift >= 70:
            raise ProtobufError("varint longer than 10 bytes", offset=base + pos)


def to_signed64(value: int) -> int:
    return value - (1 << 64) if value & (1 << 63) else value


def to_signed32(value: int) -> int:
    """proto2 int32: negative values arrive sign-extended to 64 bits."""
    value = to_signed64(value)
    if not -(1 << 31) <= value < (1 << 31):
        raise ProtobufError(f"int32 field out of range: {value}")
    return value


def iter_fields(buf: memoryview, base: int = 0) -> Iterator[tuple[int, int, int | memoryview, int]]:
    """Yield ``(field_number, wire_type, value, offset)`` for each field of a message.

    ``value`` is an int for varint/fixed fields and a memoryview for length-delimited ones;
    ``offset`` is where the field's tag starts (``base`` added, for error messages).
    """
    pos = 0
    end = len(buf)
    while pos < end:
        start = pos
        key, pos = decode_varint(buf, pos, base)
        field_number, wire_type = key >> 3, key & 7
        if field_number == 0:
            raise ProtobufError("field number 0", offset=base + start)
        value: int | memoryview
        if wire_type == VARINT:
            value, pos = decode_varint(buf, pos, base)
        elif wire_type == LENGTH_DELIMITED:
            length, pos = decode_varint(buf, pos, base)
            if length > end - pos:
                raise ProtobufError(
                    f"length-delimited field {field_number} of {length} bytes overruns the message",
                    offset=base + start,
                )
            value = buf[pos : pos + length]
            pos += length
        elif wire_type in (FIXED64, FIXED32):
            size = 8 if wire_type == FIXED64 else 4
            if size > end - pos:
                raise ProtobufError("truncated fixed-width field", offset=base + start)
            value = int.from_bytes(buf[pos : pos + size], "little")
            pos += size
        else:
            raise ProtobufError(f"unsupported wire type {wire_type}", offset=base + start)
        yield field_number, wire_type, value, base + start
