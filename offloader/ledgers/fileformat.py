"""The byte layout of one local ledger file: header, records, close trailer. Pure; no I/O.

A ledger file (all integers big-endian)::

    header   32 bytes  magic "OFLL" | version u16 (1) | flags u16 (0) | ledger_id i64 |
                       ctime_ms i64 | reserved u32 (0) | crc32c of the previous 28 bytes u32
    record*            length u32 | crc32c u32 | payload (length bytes)
                       crc32c covers the 4 length bytes then the payload
    trailer            (present only once the ledger is closed)
                       marker u32 0xFFFFFFFF | index: entry_count x u64 (file offset of each
                       record) | footer 52 bytes: entry_count u64 | total_length u64 |
                       data_end u64 (offset of the marker) | ctime_ms i64 | closed_ms i64 |
                       index crc32c u32 | footer crc32c u32 (of the 44 bytes before it) |
                       end magic "OFLE"

A record's length is at most :data:`MAX_ENTRY_SIZE` (< the marker), so the marker can never be
mistaken for a record. A closed ledger is recognised from its last 52 bytes; its index gives
every record offset without a scan. Reads check a batch of records in one pass with
:data:`formats.framing.record_spans` (C, with a Python twin), which knows the record layout
above: a change to it goes there too.
"""

from __future__ import annotations

import struct
import sys
from array import array
from dataclasses import dataclass

import crc32c as _crc32c

MAGIC = b"OFLL"
END_MAGIC = b"OFLE"
VERSION = 1
HEADER = struct.Struct(">4sHHqqII")
HEADER_SIZE = HEADER.size  # 32
RECORD = struct.Struct(">II")
RECORD_HEADER_SIZE = RECORD.size  # 8
LENGTH = struct.Struct(">I")
MARKER = 0xFFFF_FFFF
MARKER_BYTES = LENGTH.pack(MARKER)
FOOTER = struct.Struct(">QQQqqII4s")
FOOTER_SIZE = FOOTER.size  # 52
MAX_ENTRY_SIZE = 0x7FFF_FFFF

assert HEADER_SIZE == 32 and FOOTER_SIZE == 52


def crc32c(data: bytes | bytearray | memoryview, value: int = 0) -> int:
    """CRC32C (Castagnoli) of ``data``, continuing from ``value``."""
    return int(_crc32c.crc32c(data, value))


def record_crc(payload: bytes | bytearray | memoryview) -> int:
    """The CRC32C a record stores: over its 4 length bytes, then its payload."""
    return crc32c(payload, crc32c(LENGTH.pack(len(payload))))


def encode_header(ledger_id: int, ctime_ms: int) -> bytes:
    body = HEADER.pack(MAGIC, VERSION, 0, ledger_id, ctime_ms, 0, 0)[:-4]
    return body + LENGTH.pack(crc32c(body))


@dataclass(frozen=True)
class Header:
    ledger_id: int
    ctime_ms: int


def decode_header(data: bytes | memoryview) -> Header | str:
    """The header, or a string saying what is wrong with it."""
    if len(data) < HEADER_SIZE:
        return f"file is {len(data)} bytes, shorter than the {HEADER_SIZE}-byte header"
    magic, version, _flags, ledger_id, ctime_ms, _reserved, crc = HEADER.unpack_from(data)
    if magic != MAGIC:
        return f"bad magic {bytes(magic)!r} (expected {MAGIC!r}): not a ledger file"
    if crc != crc32c(data[: HEADER_SIZE - 4]):
        return "header checksum mismatch"
    if version != VERSION:
        return f"unsupported ledger file version {version}"
    return Header(ledger_id, ctime_ms)


def offsets_to_bytes(offsets: array[int]) -> bytes:
    """The index section: each record offset as a big-endian u64."""
    if sys.byteorder == "big":
        return offsets.tobytes()
    swapped = array("Q", offsets)
    swapped.byteswap()
    return swapped.tobytes()


def offsets_from_bytes(data: bytes | memoryview) -> array[int]:
    out = array("Q")
    out.frombytes(data)
    if sys.byteorder == "little":
        out.byteswap()
    return out


@dataclass(frozen=True)
class Footer:
    entry_count: int
    total_length: int
    data_end: int
    ctime_ms: int
    closed_ms: int
    index_crc: int

    @property
    def file_size(self) -> int:
        """Size of the whole closed file this footer describes."""
        return self.data_end + 4 + 8 * self.entry_count + FOOTER_SIZE


def encode_trailer(
    offsets: array[int], total_length: int, data_end: int, ctime_ms: int, closed_ms: int
) -> bytes:
    index = offsets_to_bytes(offsets)
    body = FOOTER.pack(
        len(offsets), total_length, data_end, ctime_ms, closed_ms, crc32c(index), 0, END_MAGIC
    )[:44]
    return b"".join((MARKER_BYTES, index, body, LENGTH.pack(crc32c(body)), END_MAGIC))


def decode_footer(data: bytes | memoryview) -> Footer | None:
    """The footer in the last 52 bytes ``data``, or None if they are not a valid footer."""
    if len(data) != FOOTER_SIZE:
        return None
    count, total, data_end, ctime_ms, closed_ms, index_crc, crc, magic = FOOTER.unpack(data)
    if magic != END_MAGIC or crc != crc32c(data[:44]):
        return None
    return Footer(count, total, data_end, ctime_ms, closed_ms, index_crc)


def check_index(footer: Footer, offsets: array[int]) -> str | None:
    """Why ``offsets`` cannot be the index ``footer`` describes (None when consistent)."""
    n = len(offsets)
    if n != footer.entry_count:
        return "index entry count does not match the footer"
    if footer.data_end - HEADER_SIZE != RECORD_HEADER_SIZE * n + footer.total_length:
        return "footer lengths do not add up"
    if n == 0:
        return None
    if offsets[0] != HEADER_SIZE:
        return "first record offset is not right after the header"
    previous = offsets[0]
    for offset in offsets[1:]:
        if offset < previous + RECORD_HEADER_SIZE:
            return "record offsets do not increase"
        previous = offset
    if footer.data_end < previous + RECORD_HEADER_SIZE:
        return "last record offset is past the end of the data"
    return None
