"""Reading entries from a ledger file: the closed-ledger :class:`LedgerReader` (with the
optional span read of :class:`~offloader.ledgers.base.SpanLedgerReader`) and the shared range
reads.

A read of entries ``first..last`` is one ``os.pread`` of the byte range those records occupy
(found in the in-memory offset index), then one pass that checks every record's length field
against the index and its CRC32C (:data:`formats.framing.record_spans`, in C when built, the
GIL released) and finds each payload; a bad record raises
:class:`~offloader.errors.CorruptLedgerError` naming the entry and the record's offset.
:func:`read_entry_spans` returns the payloads as :class:`~formats.spans.EntrySpans` over the
bytes read (no object per entry); :func:`read_entries` copies them out as ``bytes``; both go
through the same checks, so they raise the same errors.
"""

from __future__ import annotations

import os
import weakref
from array import array
from operator import sub
from types import TracebackType

from formats.framing import record_spans
from formats.ledger_metadata import LedgerMetadata
from formats.spans import EntrySpans
from offloader.errors import CorruptLedgerError, EntryOutOfRange, LedgerStoreError
from offloader.ledgers.fileformat import LENGTH, RECORD_HEADER_SIZE
from offloader.ledgers.scan import LedgerLayout, pread_exact


def read_entry_spans(
    fd: int, path: str, offsets: array[int], data_end: int, first: int, last: int
) -> EntrySpans:
    """Entries ``first..last`` (inclusive), verified, with one ``pread``: spans of the bytes
    read, payload ``i`` being entry ``first + i``."""
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
    raw_starts, raw_lengths, bad, reason = record_spans(data, offsets[first : last + 1], start, end)
    if bad >= 0:
        raise _record_error(path, data, start, first + bad, offsets[first + bad], reason)
    starts, lengths = array("q"), array("q")
    starts.frombytes(raw_starts)
    lengths.frombytes(raw_lengths)
    return EntrySpans(data, starts, lengths)


def _record_error(
    path: str, data: bytes, start: int, entry_id: int, offset: int, reason: str | None
) -> CorruptLedgerError:
    """The error for the record of ``entry_id`` at file ``offset`` (``data`` was read from file
    offset ``start``) that :data:`record_spans` found bad for ``reason``."""
    if reason == "length":
        (length,) = LENGTH.unpack_from(data, offset - start)  # its header is inside ``data``
        message = f"entry {entry_id}: record length field {length} does not match the index"
    elif reason == "crc":
        message = f"entry {entry_id}: CRC32C mismatch"
    else:  # "header": offsets that do not increase (never in a layout read from a file)
        message = f"entry {entry_id}: record header is outside the bytes of entries read"
    return CorruptLedgerError(message, path=path, offset=offset)


def read_entries(
    fd: int, path: str, offsets: array[int], data_end: int, first: int, last: int
) -> list[bytes]:
    """Payloads of entries ``first..last`` (inclusive), verified, with one ``pread``."""
    spans = read_entry_spans(fd, path, offsets, data_end, first, last)
    data = spans.data
    return [data[at : at + size] for at, size in zip(spans.starts, spans.lengths, strict=True)]


class ClosedLedgerReader:
    """A closed ledger file, read through its offset index (implements ``SpanLedgerReader``,
    hence ``LedgerReader``).

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

    def entry_lengths(self) -> list[int]:
        """Every entry's payload length, from the offset index alone (the writer plans an
        offload with these instead of reading the whole file twice; each record's length
        field and CRC32C are still checked when the offload reads it, and a record that
        disagrees fails the offload with :class:`CorruptLedgerError`)."""
        layout = self._layout
        offsets = layout.offsets
        if not offsets:
            return []
        ends = offsets[1:]
        ends.append(layout.data_end)
        lengths = list(map(sub, ends, map(RECORD_HEADER_SIZE.__add__, offsets)))
        if min(lengths) < 0:
            bad = next(i for i, n in enumerate(lengths) if n < 0)
            raise CorruptLedgerError(
                f"entry {bad}: the offset index leaves no room for its record header",
                path=self._path,
                offset=offsets[bad],
            )
        return lengths

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

    def read_spans(self, first: int, last: int) -> EntrySpans:
        """Entries ``first..last`` as spans of the one buffer read (the same checks and errors
        as :meth:`read`)."""
        if not self._finalizer.alive:
            raise LedgerStoreError(f"{self._path}: reader is closed")
        layout = self._layout
        return read_entry_spans(self._fd, self._path, layout.offsets, layout.data_end, first, last)

    def close(self) -> None:
        self._finalizer()

    def __enter__(self) -> ClosedLedgerReader:
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
