"""Reading the structure of a ledger file: the closed fast path and the recovery scan.

This module owns the decision every crash recovery turns on: which bytes at the end of a file
that was not closed are a **torn tail** (safe to drop: a partial record, a record whose CRC does
not match with nothing valid after it, or a half-written close trailer) and which are
**corruption** (a damaged record followed by a valid one: raised as
:class:`~offloader.errors.CorruptLedgerError` naming the offset, never dropped silently).

A damaged record is classified as corruption when a valid record (or a valid close trailer)
starts anywhere after it. The search tries the end the damaged record's length field claims
first, then every later byte offset, so its cost is bounded by the size of the tail.
(A torn tail whose partial payload happens to contain a complete, valid record of this format
would be reported as corruption: a false alarm, never a silent loss.)
"""

from __future__ import annotations

import mmap
import os
from array import array
from dataclasses import dataclass

from offloader.errors import CorruptLedgerError
from offloader.ledgers.fileformat import (
    FOOTER_SIZE,
    HEADER_SIZE,
    LENGTH,
    MARKER,
    MAX_ENTRY_SIZE,
    RECORD,
    RECORD_HEADER_SIZE,
    Footer,
    Header,
    check_index,
    crc32c,
    decode_footer,
    decode_header,
    offsets_from_bytes,
)


@dataclass
class LedgerLayout:
    """Where everything is in one ledger file."""

    header: Header
    #: file offset of each record, by entry id
    offsets: array[int]
    #: end of the last valid record (where the trailer starts, or the next append goes)
    data_end: int
    #: sum of payload sizes
    total_length: int
    #: the close footer, None while the ledger is open
    footer: Footer | None
    #: bytes after ``data_end`` that are not a valid trailer (a torn tail; 0 if none)
    torn_bytes: int


def pread_exact(fd: int, size: int, offset: int) -> bytes:
    """Exactly ``size`` bytes at ``offset`` (looping over short reads); short at end of file."""
    data = os.pread(fd, size, offset)
    if len(data) == size or not data:
        return data
    parts = [data]
    got = len(data)
    while got < size:
        more = os.pread(fd, size - got, offset + got)
        if not more:
            break
        parts.append(more)
        got += len(more)
    return b"".join(parts)


def read_header(fd: int, path: str) -> Header:
    header = decode_header(pread_exact(fd, HEADER_SIZE, 0))
    if isinstance(header, str):
        raise CorruptLedgerError(header, path=path, offset=0)
    return header


def read_closed(fd: int, path: str) -> LedgerLayout | None:
    """The layout from the close trailer, without a scan; None if the file has no valid trailer."""
    size = os.fstat(fd).st_size
    if size < HEADER_SIZE + 4 + FOOTER_SIZE:
        return None
    footer = decode_footer(pread_exact(fd, FOOTER_SIZE, size - FOOTER_SIZE))
    if footer is None or footer.file_size != size or footer.data_end < HEADER_SIZE:
        return None
    tail = pread_exact(fd, 4 + 8 * footer.entry_count, footer.data_end)
    if LENGTH.unpack_from(tail)[0] != MARKER or crc32c(tail[4:]) != footer.index_crc:
        return None
    offsets = offsets_from_bytes(tail[4:])
    if check_index(footer, offsets) is not None:
        return None
    header = read_header(fd, path)
    return LedgerLayout(header, offsets, footer.data_end, footer.total_length, footer, 0)


def _record_at(mv: memoryview, pos: int, size: int) -> int | None:
    """Payload length of the valid record at ``pos``, or None."""
    if size - pos < RECORD_HEADER_SIZE:
        return None
    length: int
    crc: int
    length, crc = RECORD.unpack_from(mv, pos)
    end = pos + RECORD_HEADER_SIZE + length
    if length > MAX_ENTRY_SIZE or end > size:
        return None
    if crc32c(mv[pos + RECORD_HEADER_SIZE : end], crc32c(mv[pos : pos + 4])) != crc:
        return None
    return length


def _trailer_at(mv: memoryview, pos: int, size: int) -> Footer | None:
    """The footer if a complete, valid close trailer starts at ``pos`` and ends the file."""
    if size - pos < 4 + FOOTER_SIZE or LENGTH.unpack_from(mv, pos)[0] != MARKER:
        return None
    footer = decode_footer(mv[size - FOOTER_SIZE : size])
    if footer is None or footer.data_end != pos or footer.file_size != size:
        return None
    if crc32c(mv[pos + 4 : size - FOOTER_SIZE]) != footer.index_crc:
        return None
    return footer


def _valid_after(mv: memoryview, bad: int, size: int) -> int | None:
    """Offset of a valid record or trailer starting after the damaged record at ``bad``."""
    if size - bad >= RECORD_HEADER_SIZE:
        claimed: int = bad + RECORD_HEADER_SIZE + RECORD.unpack_from(mv, bad)[0]
        if claimed < size and (
            _record_at(mv, claimed, size) is not None or _trailer_at(mv, claimed, size)
        ):
            return claimed
    for pos in range(bad + 1, size - RECORD_HEADER_SIZE + 1):
        length: int = LENGTH.unpack_from(mv, pos)[0]
        if length == MARKER:
            if _trailer_at(mv, pos, size) is not None:
                return pos
        elif pos + RECORD_HEADER_SIZE + length <= size and _record_at(mv, pos, size) is not None:
            return pos
    return None


def scan(fd: int, path: str, *, limit: int | None = None) -> LedgerLayout:
    """Scan every record (verifying each CRC32C) up to a valid trailer, a torn tail or EOF.

    ``limit``: stop after that many records (a reader of an open ledger's first entries: the
    rest of the file is not read; the layout then has no footer and no torn bytes).
    Raises :class:`CorruptLedgerError` for a damaged header or damage followed by valid data.
    """
    header = read_header(fd, path)
    size = os.fstat(fd).st_size
    offsets: array[int] = array("Q")
    total = 0
    pos = HEADER_SIZE
    footer: Footer | None = None
    if size == HEADER_SIZE:
        return LedgerLayout(header, offsets, pos, 0, None, 0)
    with mmap.mmap(fd, size, access=mmap.ACCESS_READ) as mm:
        mv = memoryview(mm)
        try:
            while pos < size:
                if limit is not None and len(offsets) >= limit:
                    return LedgerLayout(header, offsets, pos, total, None, 0)
                length = _record_at(mv, pos, size)
                if length is not None:
                    offsets.append(pos)
                    total += length
                    pos += RECORD_HEADER_SIZE + length
                    continue
                footer = _trailer_at(mv, pos, size)
                if footer is not None:
                    break
                found = _valid_after(mv, pos, size)
                if found is not None:
                    raise CorruptLedgerError(
                        f"damaged record (entry {len(offsets)}) followed by valid data at "
                        f"offset {found}; not a torn tail, refusing to drop it",
                        path=path,
                        offset=pos,
                    )
                break
        finally:
            mv.release()
    if footer is not None and (footer.entry_count != len(offsets) or footer.total_length != total):
        raise CorruptLedgerError("close footer contradicts the records", path=path, offset=pos)
    torn = 0 if footer is not None else size - pos
    return LedgerLayout(header, offsets, pos, total, footer, torn)
