"""The append-only writer of one open ledger, and a reader of its current entries.

A :class:`LedgerWriter` owns one open ledger file: it frames entries as CRC32C records into a
user-space buffer, writes them with ``pwrite`` and fsyncs according to its fsync policy (see
:mod:`offloader.ledgers.info`), keeps the in-memory offset index, and on :meth:`close` writes
the durable close trailer. It holds an exclusive ``flock`` on the file (taken by the store) so
that no second writer, in this process or another, can open the ledger. Methods are
thread-safe (one lock). A write or fsync failure poisons the writer: every later call raises,
and recovery on the next open decides what survived.
"""

from __future__ import annotations

import dataclasses
import os
import threading
from array import array
from collections.abc import Callable, Iterable
from types import TracebackType

from formats.ledger_metadata import LedgerMetadata
from offloader.errors import LedgerClosedError, LedgerStoreError
from offloader.ledgers.fileformat import (
    LENGTH,
    MAX_ENTRY_SIZE,
    RECORD,
    RECORD_HEADER_SIZE,
    crc32c,
    encode_trailer,
)
from offloader.ledgers.info import FsyncPolicy, LedgerInfo, RecoveryReport
from offloader.ledgers.reader import read_entries
from offloader.ledgers.scan import LedgerLayout

Payload = bytes | bytearray | memoryview
_fdatasync = getattr(os, "fdatasync", os.fsync)


class LedgerWriter:
    """Appends to one open ledger (made by ``LedgerStore.create_ledger``/``open_for_append``)."""

    def __init__(
        self,
        fd: int,
        path: str,
        layout: LedgerLayout,
        *,
        fsync: FsyncPolicy,
        buffer_bytes: int,
        clock_ms: Callable[[], int],
    ) -> None:
        self._fd: int | None = fd
        self._path = path
        self._ledger_id = layout.header.ledger_id
        self._ctime_ms = layout.header.ctime_ms
        self._offsets: array[int] = array("Q", layout.offsets)
        self._total = layout.total_length
        self._written_end = layout.data_end  # bytes handed to the OS
        self._end = layout.data_end  # bytes appended (written + buffered)
        self._buf = bytearray()
        self._durable = len(self._offsets)
        self._policy = fsync
        self._buffer_bytes = buffer_bytes
        self._clock_ms = clock_ms
        self._lock = threading.Lock()
        self._closed_info: LedgerInfo | None = None
        self._failure: BaseException | None = None
        #: how the ledger was recovered when reopened after a crash (None for a new ledger)
        self.recovery: RecoveryReport | None = None

    # --- properties ------------------------------------------------------------------------
    @property
    def ledger_id(self) -> int:
        return self._ledger_id

    @property
    def path(self) -> str:
        return self._path

    @property
    def fsync_policy(self) -> FsyncPolicy:
        return self._policy

    @property
    def ctime_ms(self) -> int:
        return self._ctime_ms

    @property
    def entry_count(self) -> int:
        return len(self._offsets)

    @property
    def last_entry_id(self) -> int:
        """Id of the last appended entry; -1 while the ledger is empty."""
        return len(self._offsets) - 1

    @property
    def durable_last_entry_id(self) -> int:
        """Id of the last entry known to be fsynced; -1 if none."""
        return self._durable - 1

    @property
    def length(self) -> int:
        """Sum of the payload sizes appended so far."""
        return self._total

    @property
    def size_bytes(self) -> int:
        """Bytes of the file once the buffer is written (header and records)."""
        return self._end

    @property
    def is_closed(self) -> bool:
        return self._closed_info is not None or self._fd is None

    # --- appends ---------------------------------------------------------------------------
    def append(self, payload: Payload) -> int:
        """Append one entry; its id. Durable on return under the ``always`` policy."""
        with self._lock:
            self._check_writable()
            entry_id = self._frame(payload)
            if self._policy == "always":
                self._write_out()
                self._sync()
            elif len(self._buf) >= self._buffer_bytes:
                self._write_out()
                if self._policy == "batch":
                    self._sync()
            return entry_id

    def append_batch(self, payloads: Iterable[Payload]) -> int:
        """Append entries in order with one write (and one fsync under ``always``/``batch``).

        Returns the id of the last entry (``last_entry_id`` unchanged if ``payloads`` is empty).
        """
        with self._lock:
            self._check_writable()
            before = len(self._offsets)
            for payload in payloads:
                self._frame(payload)
                if len(self._buf) >= self._buffer_bytes:
                    self._write_out()
            if self._policy != "never" or len(self._buf) >= self._buffer_bytes:
                self._write_out()
            if self._policy != "never" and len(self._offsets) > before:
                self._sync()
            return len(self._offsets) - 1

    def flush(self) -> None:
        """Hand buffered records to the OS (survives a process kill, not a power loss)."""
        with self._lock:
            self._check_writable()
            self._write_out()

    def sync(self) -> None:
        """Write and fsync everything appended so far, whatever the policy."""
        with self._lock:
            self._check_writable()
            self._write_out()
            self._sync()

    # --- reads -----------------------------------------------------------------------------
    def read(self, first: int, last: int) -> list[bytes]:
        """Payloads of appended entries ``first..last`` (buffered ones are written out first)."""
        with self._lock:
            fd = self._check_writable()
            self._write_out()
            return read_entries(fd, self._path, self._offsets, self._end, first, last)

    def reader(self) -> OpenLedgerReader:
        """A ``LedgerReader``-shaped view of the current entries (metadata state OPEN)."""
        return OpenLedgerReader(self)

    # --- closing ---------------------------------------------------------------------------
    def close(self) -> LedgerInfo:
        """Write the close trailer durably; later appends raise :class:`LedgerClosedError`."""
        with self._lock:
            if self._closed_info is not None:
                return self._closed_info
            fd = self._check_writable()
            self._write_out()
            closed_ms = self._clock_ms()
            trailer = encode_trailer(
                self._offsets, self._total, self._end, self._ctime_ms, closed_ms
            )
            self._pwrite_all(trailer, self._end)
            self._sync()
            info = LedgerInfo(
                self._ledger_id,
                len(self._offsets),
                self._total,
                self._ctime_ms,
                closed_ms,
                self._end + len(trailer),
            )
            self._closed_info = info
            self._fd = None
            os.close(fd)
            return info

    def abandon(self) -> None:
        """Drop the file without closing the ledger: what a crash leaves (buffer lost too)."""
        with self._lock:
            self._buf = bytearray()
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None

    def __enter__(self) -> LedgerWriter:
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        if not self.is_closed:
            self.close()

    # --- internals (called with the lock held) --------------------------------------------
    def _check_writable(self) -> int:
        if self._closed_info is not None:
            raise LedgerClosedError(f"ledger {self._ledger_id} is closed ({self._path})")
        if self._failure is not None:
            raise LedgerStoreError(
                f"ledger {self._ledger_id}: an earlier write failed ({self._failure}); "
                "reopen it to recover"
            ) from self._failure
        if self._fd is None:
            raise LedgerStoreError(f"ledger {self._ledger_id}: writer was abandoned")
        return self._fd

    def _frame(self, payload: Payload) -> int:
        size = len(payload) if not isinstance(payload, memoryview) else payload.nbytes
        if size > MAX_ENTRY_SIZE:
            raise LedgerStoreError(f"entry of {size} bytes exceeds {MAX_ENTRY_SIZE}")
        entry_id = len(self._offsets)
        self._offsets.append(self._end)
        self._buf += RECORD.pack(size, crc32c(payload, crc32c(LENGTH.pack(size))))
        self._buf += payload
        self._end += RECORD_HEADER_SIZE + size
        self._total += size
        return entry_id

    def _write_out(self) -> None:
        if not self._buf:
            return
        # hand the buffer off instead of clearing it: a view of it may outlive a failed write
        data, self._buf = self._buf, bytearray()
        self._pwrite_all(data, self._written_end)
        self._written_end += len(data)

    def _pwrite_all(self, data: bytes | bytearray, offset: int) -> None:
        assert self._fd is not None
        try:
            with memoryview(data) as view:
                done = 0
                while done < len(view):
                    done += os.pwrite(self._fd, view[done:], offset + done)
        except OSError as exc:
            self._failure = exc
            raise LedgerStoreError(f"writing ledger {self._path} failed: {exc}") from exc

    def _sync(self) -> None:
        assert self._fd is not None
        try:
            _fdatasync(self._fd)
        except OSError as exc:
            self._failure = exc
            raise LedgerStoreError(f"fsync of ledger {self._path} failed: {exc}") from exc
        self._durable = len(self._offsets)


class OpenLedgerReader:
    """Reads the entries an open ledger holds now (for the managed ledger's tailing reads)."""

    def __init__(self, writer: LedgerWriter) -> None:
        self._writer = writer

    @property
    def ledger_id(self) -> int:
        return self._writer.ledger_id

    @property
    def last_entry_id(self) -> int:
        return self._writer.last_entry_id

    @property
    def length(self) -> int:
        return self._writer.length

    @property
    def metadata(self) -> LedgerMetadata:
        closed = LedgerMetadata.closed_default(
            last_entry_id=self.last_entry_id, length=self.length, ctime=self._writer.ctime_ms
        )
        return dataclasses.replace(closed, state="OPEN")

    def read(self, first: int, last: int) -> list[bytes]:
        return self._writer.read(first, last)
