"""A seekable, buffered view of one object, fetched with ranged GETs (Pulsar's
``BlobStoreBackedInputStreamImpl``, pulsar-format-facts §5.2, with read-ahead).

:class:`RangedStream` keeps one buffer of bytes ``[buf_start, buf_end)`` and a position.
``seek`` inside the buffer costs nothing; outside, the next read GETs from the new position.
Fetches are ``buffer_size`` bytes (1 MiB by default), clipped to a *window* the caller announces
(``set_window``: the bytes the current request can need), and a window of at most
``single_get_max`` bytes is fetched with one GET. A sequential streak (each fetch starting where
the previous one ended) doubles the fetch size up to ``max_fetch`` (8 buffers by default), so a
long sequential read pays the per-request cost of S3 less often; any jump resets it. With
``read_ahead``, the next range of the window is fetched on a background thread while the caller
consumes the current one; once a streak has reached ``max_fetch``, ``READ_AHEAD_DEPTH`` ranges
are kept in flight (on as many threads), so the per-request latency of S3 and the caller's
parsing overlap. A read-ahead that the caller does not use (it seeks elsewhere) is dropped.
Memory per stream: at most ``(1 + READ_AHEAD_DEPTH) x max_fetch`` (the buffer and the
read-aheads).

Every GET checks that the object's real size (the ``size`` of the ranged answer) equals the
length the index promised, which catches a truncated or replaced data object. The stream can
also checksum a contiguous run of consumed bytes (``crc_begin`` / ``crc_end``): the ReadHandle
uses that to verify whole blocks against the CRC32Cs of the index extension.

Not thread-safe: one caller at a time (the read-ahead thread only runs ``store.get_range``).
"""

from __future__ import annotations

import threading
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor

from formats.errors import IndexInconsistentError, TruncatedError
from formats.extension import crc32c
from offloader.errors import AccessDenied, ObjectNotFound, StoreError, StoreUnavailable
from offloader.store.base import ObjectStore

#: read-aheads kept in flight during a sequential streak at full fetch size (1 before it)
READ_AHEAD_DEPTH = 2
#: a fetch larger than this is not copied to join it to the bytes left over before it
JOIN_MAX = 64 * 1024


class RangedStream:
    """Buffered ranged-GET reader over ``key`` whose size must be ``object_length``."""

    def __init__(
        self,
        store: ObjectStore,
        key: str,
        *,
        object_length: int,
        buffer_size: int,
        read_ahead: bool = True,
        single_get_max: int | None = None,
        max_fetch: int | None = None,
        description: str | None = None,
    ) -> None:
        self._store = store
        self._key = key
        self._length = object_length
        self._buffer_size = buffer_size
        self._read_ahead = read_ahead
        self._single_get_max = 4 * buffer_size if single_get_max is None else single_get_max
        self._what = description or key
        self._max_fetch = max(buffer_size, 8 * buffer_size if max_fetch is None else max_fetch)
        self._fetch = buffer_size
        self._last_fetch_end = -1
        self._buf = b""
        self._buf_start = 0
        self._pos = 0
        self._window_end = object_length
        #: read-aheads in flight, contiguous and in order: (start, end, future)
        self._pending: deque[tuple[int, int, Future[bytes]]] = deque()
        self._executor: ThreadPoolExecutor | None = None
        self._gets = 0
        self._gets_lock = threading.Lock()
        #: a fetch whose first bytes were joined to the previous buffer's last ones:
        #: (object offset, bytes), the buffer at the next refill
        self._following: tuple[int, bytes] | None = None
        self._crc_on = False
        self._crc_pos = 0
        self._crc = 0
        self._closed = False

    # --- state ----------------------------------------------------------------------------
    @property
    def position(self) -> int:
        """Object offset of the next byte the caller consumes."""
        return self._pos

    @property
    def gets(self) -> int:
        """Ranged GETs issued so far (read-ahead included)."""
        return self._gets

    @property
    def object_length(self) -> int:
        return self._length

    def buffered(self) -> int:
        """Bytes available from the position without a GET."""
        end = self._buf_start + len(self._buf)
        return end - self._pos if self._buf_start <= self._pos <= end else 0

    def set_window(self, end: int) -> None:
        """The current request needs no byte at or beyond ``end``: fetch no further."""
        self._window_end = max(0, min(end, self._length))

    # --- moving ---------------------------------------------------------------------------
    def seek(self, pos: int) -> None:
        """Move to ``pos``; no GET happens here (inside the buffer, none at all)."""
        if not 0 <= pos <= self._length:
            raise TruncatedError(
                f"{self._what}: seek to {pos} outside the object of {self._length} bytes",
                offset=pos,
            )
        if pos != self._pos:
            self._crc_on = False
        self._pos = pos

    def advance(self, n: int) -> None:
        """Consume ``n`` buffered bytes (the caller got them from :meth:`view`)."""
        self._pos += n

    def view(self, need: int) -> memoryview:
        """The buffered bytes from the position, at least ``need`` of them (fetching if
        needed). The view stays valid after later calls (buffers are immutable bytes)."""
        buf, at = self.buffer(need)
        return memoryview(buf)[at:]

    def buffer(self, need: int) -> tuple[bytes, int]:
        """Like :meth:`view`, as ``(buffer, index of the position in it)``: slicing the bytes
        directly is the cheapest way to cut many small payloads out of a range."""
        if need > self._length - self._pos:
            raise TruncatedError(
                f"{self._what}: {need} bytes needed at offset {self._pos}, the object has "
                f"{self._length} bytes",
                offset=self._pos,
            )
        if self.buffered() < need:
            self._refill(need)
        return self._buf, self._pos - self._buf_start

    def read(self, n: int) -> bytes:
        """Exactly ``n`` bytes from the position."""
        out = bytes(self.view(n)[:n])
        self._pos += n
        return out

    # --- checksums of consumed bytes ------------------------------------------------------
    def crc_begin(self) -> None:
        """Start a CRC32C over the bytes consumed from the current position on; any seek
        elsewhere cancels it."""
        self._crc_on = True
        self._crc_pos = self._pos
        self._crc = 0

    @property
    def crc_active(self) -> bool:
        return self._crc_on

    def crc_end(self) -> int | None:
        """The CRC32C of the bytes consumed since :meth:`crc_begin`, or None if it was
        cancelled by a seek."""
        if not self._crc_on:
            return None
        self._crc_update()
        self._crc_on = False
        return self._crc

    def _crc_update(self) -> None:
        if not self._crc_on or self._pos == self._crc_pos:
            return
        lo = self._crc_pos - self._buf_start
        hi = self._pos - self._buf_start
        if lo < 0 or hi > len(self._buf):
            self._crc_on = False  # bytes were skipped: this run cannot be checked
            return
        if hi > lo:
            self._crc = crc32c(memoryview(self._buf)[lo:hi], self._crc)
        self._crc_pos = self._pos

    # --- fetching -------------------------------------------------------------------------
    def _refill(self, need: int) -> None:
        self._crc_update()
        following = self._following
        if following is not None:
            # the fetch that follows a small joined buffer: switch to it, no copy, no GET
            self._following = None
            f_start, f_buf = following
            if f_start <= self._pos and self._pos + need <= f_start + len(f_buf):
                self._buf = f_buf
                self._buf_start = f_start
                if self._crc_on:
                    self._crc_pos = self._pos
                return
        remainder = b""
        if self.buffered():
            remainder = self._buf[self._pos - self._buf_start :]
        start = self._pos + len(remainder)
        want_end = self._pos + need
        span_end = self._window_end if self._window_end > start else self._length
        span_end = max(span_end, want_end)
        # a sequential streak doubles the fetch size (up to max_fetch); a jump resets it
        if start == self._last_fetch_end:
            self._fetch = min(2 * self._fetch, self._max_fetch)
        else:
            self._fetch = self._buffer_size
        fetch = self._fetch
        if span_end - start <= self._single_get_max:
            target = span_end
        else:
            target = max(want_end, min(start + fetch, span_end))
        chunks: list[bytes] = [remainder] if remainder else []
        pos = start
        while pos < target:
            got = self._take_pending(pos)
            if got is None:
                end = target if target - pos <= self._single_get_max else min(pos + fetch, target)
                got = self._get(pos, end)
            chunks.append(got)
            pos += len(got)
            if pos >= want_end:
                break  # enough: a shorter read-ahead chunk is not topped up with a tiny GET
        if len(chunks) == 2 and remainder and len(chunks[1]) > JOIN_MAX:
            # the bytes left over plus a large fetch: join only what is needed now (a few
            # bytes), and switch to the fetch itself at the next refill, instead of copying it
            head = want_end - start
            self._buf = remainder + chunks[1][:head] if head > 0 else remainder
            self._following = (start, chunks[1])
        else:
            self._buf = chunks[0] if len(chunks) == 1 else b"".join(chunks)
        self._buf_start = self._pos
        if self._crc_on:
            self._crc_pos = self._pos
        self._last_fetch_end = pos
        if self._read_ahead and not self._closed:
            pending = self._pending
            if pending and pending[0][0] != pos:
                self._drop_pending()
            size = min(2 * fetch, self._max_fetch)
            depth = READ_AHEAD_DEPTH if size >= self._max_fetch else 1
            ahead = pending[-1][1] if pending else pos
            while len(pending) < depth and ahead < span_end:
                end = min(ahead + size, span_end)
                self._start_read_ahead(ahead, end)
                ahead = end

    def _take_pending(self, start: int) -> bytes | None:
        pending = self._pending
        if not pending:
            return None
        if pending[0][0] != start:
            self._drop_pending()  # read-aheads we no longer want (their results are dropped)
            return None
        return pending.popleft()[2].result()

    def _drop_pending(self) -> None:
        pending = self._pending
        while pending:
            pending.pop()[2].cancel()

    def _start_read_ahead(self, start: int, end: int) -> None:
        if self._executor is None:
            self._executor = ThreadPoolExecutor(
                max_workers=READ_AHEAD_DEPTH, thread_name_prefix="read-ahead"
            )
        self._pending.append((start, end, self._executor.submit(self._get, start, end)))

    def _get(self, start: int, end: int) -> bytes:
        with self._gets_lock:
            self._gets += 1
        try:
            result = self._store.get_range(self._key, start, end)
        except ObjectNotFound as exc:
            raise ObjectNotFound(f"{self._what}: the data object is missing ({exc})") from exc
        except (StoreUnavailable, AccessDenied):
            raise
        except StoreError as exc:
            self._check_size_after_failure(exc)
            raise
        if result.size != self._length:
            raise IndexInconsistentError(
                f"{self._what}: the data object is {result.size} bytes, the index says "
                f"{self._length}"
            )
        if len(result.data) != end - start:
            raise TruncatedError(
                f"{self._what}: asked for bytes [{start}, {end}), got {len(result.data)}",
                offset=start,
            )
        return result.data

    def _check_size_after_failure(self, cause: StoreError) -> None:
        """A refused range on a shorter object than the index promised is an inconsistency."""
        try:
            size = self._store.head(self._key).size
        except StoreError:
            return
        if size != self._length:
            raise IndexInconsistentError(
                f"{self._what}: the data object is {size} bytes, the index says {self._length}"
            ) from cause

    def close(self) -> None:
        self._closed = True
        self._drop_pending()
        self._following = None
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None
        self._buf = b""
