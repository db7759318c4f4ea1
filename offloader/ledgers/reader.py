"""Reading entries from a ledger file: the closed-ledger :class:`LedgerReader` and the shared
range read.

A read of entries ``first..last`` is one ``os.pread`` of the byte range those records occupy
(found in the in-memory offset index), then a CRC32C check of every record;
a mismatch raises :class:`~offloader.errors.CorruptLedgerError` naming the record's offset.
"""

from __future__ import annotations

import os
import weakref
from array import array
from types import TracebackType

from formats.ledger_metadata import LedgerMetadata
from offloader.errors import CorruptLedgerError, EntryOutOfRange, LedgerStoreError
from offloader.ledgers.fileformat import RECORD, RECORD_HEADER_SIZE, crc32c
from offloader.ledgers.scan import LedgerLayout, pread_exact


def read_entries(
    fd: int, path: str, offsets: array[int], data_end: int, first: int, last: int
) -> list[bytes]:
    """Payloads of entries ``first..last`` (inclusive), verified, with one ``pread``."""
    count = len(offsets)
    if first < 0 or last < first or last >= count:
        raise EntryOutOfRange(f"{path}: entries {first}..{last} are not inside 0..{count - 1}")
    start = offsets[first]
    end = offsets[last + 1] if last + 1 < count else data_end
    data = pread_exact(fd, end - start, start)
    if len(data) != end - start:
        raise CorruptLedgerError(
            f"file ends before entry {last} (read {len(data)} of {end - start} bytes)",
            path=path,
            offset=start + len(data),
        )
    mv = memoryview(data)
    out: list[bytes] = []
    for entry_id in range(first, last + 1):
        rel = offsets[entry_id] - start
        rec_end = (offsets[entry_id + 1] if entry_id + 1 < count else data_end) - start
        length, crc = RECORD.unpack_from(mv, rel)
        if length != rec_end - rel - RECORD_HEADER_SIZE:
            raise CorruptLedgerError(
                f"entry {entry_id}: record length field {length} does not match the index",
                path=path,
                offset=start + rel,
            )
        payload = mv[rel + RECORD_HEADER_SIZE : rec_end]
        if crc32c(payload, crc32c(mv[rel : rel + 4])) != crc:
            raise CorruptLedgerError(
                f"entry {entry_id}: CRC32C mismatch", path=path, offset=start + rel
            )
        out.append(payload.tobytes())
    return out


class ClosedLedgerReader:
    """A closed ledger file, read through its offset index (implements ``LedgerReader``).

    Holds the file open until :meth:`close` (or garbage collection); a deleted file stays
    readable through an open reader, as on any POSIX system.
    """

    def __init__(self, fd: int, path: str, layout: LedgerLayout) -> None:
        if layout.footer is None:
            raise ValueError("ClosedLedgerReader needs a closed ledger layout")
        self._fd = fd
        self._path = path
        self._layout = layout
        self._closed_ms = layout.footer.closed_ms
        self._finalizer = weakref.finalize(self, os.close, fd)

    @property
    def ledger_id(self) -> int:
        return self._layout.header.ledger_id

    @property
    def path(self) -> str:
        return self._path

    @property
    def last_entry_id(self) -> int:
        return len(self._layout.offsets) - 1

    @property
    def entry_count(self) -> int:
        return len(self._layout.offsets)

    @property
    def length(self) -> int:
        return self._layout.total_length

    @property
    def ctime_ms(self) -> int:
        return self._layout.header.ctime_ms

    @property
    def closed_ms(self) -> int:
        return self._closed_ms

    @property
    def metadata(self) -> LedgerMetadata:
        return LedgerMetadata.closed_default(
            last_entry_id=self.last_entry_id, length=self.length, ctime=self.ctime_ms
        )

    def read(self, first: int, last: int) -> list[bytes]:
        if not self._finalizer.alive:
            raise LedgerStoreError(f"{self._path}: reader is closed")
        layout = self._layout
        return read_entries(self._fd, self._path, layout.offsets, layout.data_end, first, last)

    def close(self) -> None:
        self._finalizer()

    def __enter__(self) -> ClosedLedgerReader:
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
