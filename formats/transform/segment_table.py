"""The chunk-table object of a transformed Kafka segment (``<segment key>.chunks``): the
transform section of spec/transforms.md §3 framed with the segment it belongs to (§8).

A Kafka segment has no index object of ours to carry the section, so it is stored beside the
``.log`` as a small object of its own (rewritten alone by a re-key)::

    magic "LOKT" | version u8 = 1 | segment uuid (16 bytes) | base_offset i64
    section_len u32 | section (spec/transforms.md §3) | crc32c u32 (of every byte before it)

Decoding is bounded and typed: short input ``TruncatedError``, other magic ``BadMagicError``,
other version ``UnsupportedVersionError``, a CRC32C that does not match
``ChecksumMismatchError``, trailing bytes ``CorruptDataError``, a table of another segment
``IndexInconsistentError``. :func:`read_segment_table` decodes one without knowing its segment
(``objects inspect``): every check but the last.
"""

from __future__ import annotations

import struct
import uuid as uuid_mod
from dataclasses import dataclass

from formats.errors import (
    BadMagicError,
    ChecksumMismatchError,
    CorruptDataError,
    IndexInconsistentError,
    TruncatedError,
    UnsupportedVersionError,
)
from formats.extension import crc32c
from formats.transform.section import TransformSection, decode_section, encode_section

TABLE_MAGIC = b"LOKT"
TABLE_VERSION = 1
_HEAD = struct.Struct(">4sB16sqI")
_CRC = struct.Struct(">I")


def encode_segment_table(segment_uuid: str, base_offset: int, section: TransformSection) -> bytes:
    """The ``.chunks`` object of segment ``segment_uuid`` (a UUID string) at ``base_offset``."""
    body = encode_section(section)
    head = _HEAD.pack(
        TABLE_MAGIC, TABLE_VERSION, uuid_mod.UUID(segment_uuid).bytes, base_offset, len(body)
    )
    out = head + body
    return out + _CRC.pack(crc32c(out))


@dataclass(frozen=True)
class SegmentTable:
    """A decoded ``.chunks`` object: the segment it names and its transform section."""

    version: int
    segment_uuid: str
    base_offset: int
    section: TransformSection
    #: the whole object's length and its trailing CRC32C
    length: int
    crc32c: int


def read_segment_table(data: bytes | bytearray | memoryview) -> SegmentTable:
    """Decode a ``.chunks`` object, checking everything but which segment it belongs to."""
    view = memoryview(data).cast("B")
    if len(view) < _HEAD.size + _CRC.size:
        raise TruncatedError(f"segment chunk table is {len(view)} bytes, too short", offset=0)
    magic, version, raw_uuid, base, length = _HEAD.unpack_from(view, 0)
    if magic != TABLE_MAGIC:
        raise BadMagicError(f"segment chunk table magic {bytes(magic)!r}, not 'LOKT'", offset=0)
    if version != TABLE_VERSION:
        raise UnsupportedVersionError(f"segment chunk table version {version}", offset=4)
    end = _HEAD.size + length
    if end + _CRC.size > len(view):
        raise TruncatedError(
            f"segment chunk table ends inside its section ({len(view)} bytes)", offset=len(view)
        )
    if end + _CRC.size != len(view):
        raise CorruptDataError(
            f"{len(view) - end - _CRC.size} bytes after the segment chunk table", offset=end
        )
    (stored_crc,) = _CRC.unpack_from(view, end)
    if crc32c(view[:end]) != stored_crc:
        raise ChecksumMismatchError("segment chunk table CRC32C mismatch", offset=end)
    return SegmentTable(
        version,
        str(uuid_mod.UUID(bytes=raw_uuid)),
        base,
        decode_section(view[_HEAD.size : end]),
        len(view),
        stored_crc,
    )


def decode_segment_table(
    data: bytes | bytearray | memoryview, segment_uuid: str, base_offset: int
) -> TransformSection:
    """The section of a ``.chunks`` object, checked to belong to that segment."""
    table = read_segment_table(data)
    if table.segment_uuid != str(uuid_mod.UUID(segment_uuid)) or table.base_offset != base_offset:
        raise IndexInconsistentError(
            f"segment chunk table belongs to segment {table.segment_uuid} at "
            f"{table.base_offset}, not {segment_uuid} at {base_offset}"
        )
    return table.section
