"""A seekable, buffered view of one object, fetched with ranged GETs (Pulsar's
``BlobStoreBackedInputStreamImpl``, with read-ahead).

:class:`RangedStream` keeps one buffer of bytes ``[buf_start, buf_end)`` and a position.
``seek`` inside the buffer costs nothing; outside, the next read fetches from the new position.
The caller announces a *window* (``set_window``: the bytes the current request can need), and
the stream fetches in one of two ways:

* a window of at most ``single_get_max`` bytes from the position (a single entry, a short
  read) is fetched with one ranged GET;
* a longer one, with ``read_ahead``, is **streamed**: one ranged GET for the rest of the
  window, its body read ``STREAM_CHUNK_BUFFERS x buffer_size`` bytes (2 MiB) at a time, into
  a few reused buffers, by a :class:`~offloader.read.prefetch.RangePrefetcher` thread, at most
  ``PREFETCH_DEPTH`` chunks ahead of the caller, so the caller's parsing overlaps the transfer
  and S3's per-request cost is paid once per window. A seek elsewhere drops the stream (its
  read-ahead is discarded).

Without ``read_ahead`` (and when emulating Pulsar), long windows are fetched with ranged GETs
of ``buffer_size`` bytes; a sequential streak (each fetch starting where the previous one
ended) doubles the fetch size up to ``max_fetch``, and any jump resets it. Memory per stream:
the buffer plus at most ``PREFETCH_DEPTH x STREAM_CHUNK_BUFFERS x buffer_size`` read ahead
(8 MiB; or one ``max_fetch``), in at most ``PREFETCH_DEPTH + POOL_SPARE`` pooled chunk buffers
while the caller keeps no batch; the pool is kept for the next window until :meth:`close`.

Every GET checks that the object's real size equals the length the index promised, which
catches a truncated or replaced data object. The stream can also checksum a contiguous run of
consumed bytes (``crc_begin`` / ``crc_end``): the ReadHandle uses that to verify whole blocks
against the CRC32Cs of the index extension. When the run begins at one of ``crc_boundaries``
(the block boundaries) and its bytes come from a streamed window, the prefetch thread sums
them as they arrive (off the caller's thread); a run whose bytes come partly from elsewhere
continues from the thread's sum on the caller's thread, so every consumed byte is summed
exactly once, wherever it came from.

Not thread-safe: one caller at a time (the prefetch thread only reads the streamed body).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NoReturn

from formats.errors import IndexInconsistentError, TruncatedError
from formats.extension import crc32c
from offloader.errors import AccessDenied, ObjectNotFound, StoreError, StoreUnavailable
from offloader.read.objects import check_data_version
from offloader.read.prefetch import ChunkPool, RangePrefetcher
from offloader.store.base import ObjectStore

#: a streamed window's body is read in chunks of STREAM_CHUNK_BUFFERS x ``buffer_size``
#: bytes (2 MiB with the default 1 MiB): each chunk costs a hand-over between the threads,
#: a pass of the caller's cut loop and a queue round trip, so fewer, larger ones cost less
#: CPU per byte (measured: 10-15% of a 1 KiB-entry scan's) for the same read-ahead memory
STREAM_CHUNK_BUFFERS = 2
#: chunks a streamed window reads ahead of the caller (4 x 2 MiB: the 8 MiB of read-ahead
#: eight 1 MiB chunks gave)
PREFETCH_DEPTH = 4
#: a fetch larger than this is not copied to join it to the bytes left over before it
JOIN_MAX = 64 * 1024
#: buffers a stream's chunk pool keeps beyond the read-ahead (the caller's current buffer,
#: the one being filled, a joined one)
POOL_SPARE = 3

#: bytes, or a read-only view of a pooled chunk buffer
Chunk = bytes | memoryview


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
        crc_boundaries: Sequence[int] = (),
        check_version: bool = False,
    ) -> None:
        """``check_version``: Pulsar's format-version check of the object's user metadata on
        the first response (a data object of an offloaded ledger)."""
        self._store = store
        self._key = key
        self._length = object_length
        self._buffer_size = buffer_size
        self._stream_chunk = STREAM_CHUNK_BUFFERS * buffer_size
        self._read_ahead = read_ahead
        self._single_get_max = 4 * buffer_size if single_get_max is None else single_get_max
        self._what = description or key
        self._max_fetch = max(buffer_size, 8 * buffer_size if max_fetch is None else max_fetch)
        self._fetch = buffer_size
        self._last_fetch_end = -1
        self._buf: Chunk = b""
        self._buf_start = 0
        self._pos = 0
        self._window_end = object_length
        #: the streamed GET of a long window, while the caller reads it sequentially
        self._prefetch: RangePrefetcher | None = None
        #: the prefetcher that ended at its range's end, while no other fetch followed it:
        #: the buffered bytes of its range are still its own (for :meth:`summed_crc`)
        self._finished_prefetch: RangePrefetcher | None = None
        self._gets = 0
        #: a fetch whose first bytes were joined to the previous buffer's last ones:
        #: (object offset, bytes), the buffer at the next refill
        self._following: tuple[int, Chunk] | None = None
        #: the streamed windows' chunk buffers, reused across windows (made at the first)
        self._pool: ChunkPool | None = None
        self._crc_bounds = tuple(sorted(set(crc_boundaries)))
        self._crc_on = False
        self._crc_start = 0
        #: summing on the caller's thread: the CRC of [crc_start, crc_pos)
        self._crc_pos = 0
        self._crc = 0
        #: summing on a prefetch thread instead: the prefetcher whose bytes these are
        self._crc_src: RangePrefetcher | None = None
        self._closed = False
        #: Pulsar's format-version check, on the first response (its user metadata)
        self._version_checked = not check_version

    def _check_version(self, metadata: Mapping[str, str]) -> None:
        if not self._version_checked:
            check_data_version(metadata, self._key, self._what)
            self._version_checked = True

    # --- state ----------------------------------------------------------------------------
    @property
    def position(self) -> int:
        """Object offset of the next byte the caller consumes."""
        return self._pos

    @property
    def gets(self) -> int:
        """Ranged GETs issued so far (a streamed window counts once)."""
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
            self._crc_cancel()
        self._pos = pos

    def advance(self, n: int) -> None:
        """Consume ``n`` buffered bytes (the caller got them from :meth:`view`)."""
        self._pos += n

    def view(self, need: int) -> memoryview:
        """The buffered bytes from the position, at least ``need`` of them (fetching if
        needed). The view stays valid after later calls (buffers are bytes, or read-only
        views of pooled chunks, which are not reused while anything refers to them)."""
        buf, at = self.buffer(need)
        return memoryview(buf)[at:]

    def buffer(self, need: int) -> tuple[Chunk, int]:
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
        self._crc_start = self._crc_pos = self._pos
        self._crc = 0
        prefetch = self._prefetch
        # the prefetch thread sums the run if every byte from here on comes from it
        self._crc_src = (
            prefetch
            if prefetch is not None and prefetch.sums_region(self._pos) and not prefetch.exhausted
            else None
        )

    @property
    def crc_active(self) -> bool:
        return self._crc_on

    @property
    def crc_on_prefetch_thread(self) -> bool:
        """Whether the current run is being summed by the prefetch thread."""
        return self._crc_on and self._crc_src is not None

    def crc_end(self) -> int | None:
        """The CRC32C of the bytes consumed since :meth:`crc_begin`, or None if it was
        cancelled by a seek."""
        if not self._crc_on:
            return None
        src = self._crc_src
        if src is None:
            self._crc_update()
        self._crc_cancel()
        if src is not None:
            # None if the thread's sum does not end exactly here (not a region's end)
            return src.region_crc(self._crc_start, self._pos)
        return self._crc if self._crc_pos == self._pos else None

    def _crc_cancel(self) -> None:
        self._crc_on = False
        self._crc_src = None

    def _crc_update(self) -> None:
        """Sum the bytes consumed since the last update (caller's thread only)."""
        if not self._crc_on or self._crc_src is not None or self._pos <= self._crc_pos:
            return
        lo = self._crc_pos - self._buf_start
        hi = self._pos - self._buf_start
        if lo < 0 or hi > len(self._buf):
            self._crc_cancel()  # bytes were skipped: this run cannot be checked
            return
        self._crc = crc32c(memoryview(self._buf)[lo:hi], self._crc)
        self._crc_pos = self._pos

    def _crc_source(self, prefetch: RangePrefetcher | None) -> None:
        """The bytes after the buffer come from ``prefetch`` (None: from ranged GETs): a
        run summed by another prefetcher continues on the caller's thread from that
        thread's sum; a run that has consumed nothing yet moves to a new prefetcher."""
        if not self._crc_on:
            return
        src = self._crc_src
        if src is not None and src is not prefetch:
            # the run's prefetcher has delivered all it will (it is exhausted): continue
            # from its sum, at the offset after its last byte
            reached = src.next_offset
            crc = src.region_crc(self._crc_start, reached)
            self._crc_src = None
            if crc is None or not src.exhausted:
                self._crc_cancel()
                return
            self._crc, self._crc_pos = crc, reached
        elif (
            src is None
            and prefetch is not None
            and self._crc_pos == self._crc_start == prefetch.start
            and prefetch.sums_region(self._crc_start)
        ):
            self._crc_src = prefetch

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
                return
        remainder: Chunk = b""
        if self.buffered():
            remainder = self._buf[self._pos - self._buf_start :]
        start = self._pos + len(remainder)
        want_end = self._pos + need
        span_end = self._window_end if self._window_end > start else self._length
        span_end = max(span_end, want_end)
        chunks: list[Chunk] = [remainder] if remainder else []
        pos = start  # the object offset after the last chunk
        if following is not None and following[0] <= start < following[0] + len(following[1]):
            # a second refill before the joined buffer was consumed (a header, then its
            # entry): the rest of the fetch it was joined from comes first, no new request
            f_start, f_buf = following
            chunks.append(f_buf[start - f_start :])
            pos = f_start + len(f_buf)
        if pos < want_end:
            prefetch = self._prefetcher(pos, span_end)
            self._crc_source(prefetch)
            if prefetch is not None:
                while pos < want_end:
                    got = self._take(prefetch)
                    chunks.append(got)
                    pos += len(got)
                if prefetch.exhausted:
                    self._drop_prefetch()
                    self._finished_prefetch = prefetch
            else:
                self._finished_prefetch = None
                pos = self._fetch_with_gets(chunks, pos, want_end, span_end)
        if len(chunks) == 2 and remainder and len(chunks[1]) > JOIN_MAX:
            # the bytes left over plus a large fetch: join only what is needed now (a few
            # bytes), and switch to the fetch itself at the next refill, instead of copying it
            head = want_end - start
            self._buf = b"".join((remainder, chunks[1][:head])) if head > 0 else remainder
            self._following = (start, chunks[1])
        else:
            self._buf = chunks[0] if len(chunks) == 1 else b"".join(chunks)
        self._buf_start = self._pos
        self._last_fetch_end = pos

    def _fetch_with_gets(
        self, chunks: list[Chunk], start: int, want_end: int, span_end: int
    ) -> int:
        """Ranged GETs from ``start`` to at least ``want_end`` (appended to ``chunks``);
        returns the end offset fetched."""
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
        pos = start
        while pos < target:
            end = target if target - pos <= self._single_get_max else min(pos + fetch, target)
            got = self._get(pos, end)
            chunks.append(got)
            pos += len(got)
        return pos

    def _prefetcher(self, start: int, span_end: int) -> RangePrefetcher | None:
        """The stream to take bytes at ``start`` from: the current one if it is there, a new
        one for a long window, else None (fetch with GETs)."""
        prefetch = self._prefetch
        if prefetch is not None:
            if prefetch.next_offset == start and not prefetch.exhausted:
                return prefetch
            self._drop_prefetch()  # a jump: its read-ahead is not wanted
        self._finished_prefetch = None  # other bytes are fetched now
        if not self._read_ahead or self._closed or span_end - start <= self._single_get_max:
            return None
        self._gets += 1
        if self._pool is None:
            self._pool = ChunkPool(self._stream_chunk, PREFETCH_DEPTH + POOL_SPARE)
        self._prefetch = RangePrefetcher(
            self._store,
            self._key,
            start,
            span_end,
            chunk=self._stream_chunk,
            depth=PREFETCH_DEPTH,
            crc_boundaries=self._crc_bounds,
            pool=self._pool,
        )
        return self._prefetch

    def _take(self, prefetch: RangePrefetcher) -> Chunk:
        start = prefetch.next_offset
        try:
            data = prefetch.take()
        except Exception as exc:
            self._drop_prefetch()
            self._check_size(prefetch.object_size)
            self._raise_fetch_error(exc)
        self._check_size(prefetch.object_size)
        self._check_version(prefetch.object_metadata)
        if not data:
            raise TruncatedError(f"{self._what}: no bytes at offset {start}", offset=start)
        return data

    def _check_size(self, size: int | None) -> None:
        if size is not None and size != self._length:
            raise IndexInconsistentError(
                f"{self._what}: the data object is {size} bytes, the index says {self._length}"
            )

    def summed_crc(self, start: int, end: int) -> int | None:
        """The CRC32C of object bytes ``[start, end)`` when a prefetch thread summed exactly
        them (``start`` and ``end`` two consecutive ``crc_boundaries``) as it received the
        very bytes the buffer holds (hot in that core's cache, off the caller's thread); else
        None (the caller sums them itself). Handed over once."""
        for prefetch in (self._prefetch, self._finished_prefetch):
            if prefetch is not None:
                crc = prefetch.take_region_crc(start, end)
                if crc is not None:
                    return crc
        return None

    def _drop_prefetch(self) -> None:
        self._finished_prefetch = None
        prefetch, self._prefetch = self._prefetch, None
        if prefetch is not None:
            prefetch.close()

    def _get(self, start: int, end: int) -> bytes:
        self._gets += 1
        try:
            result = self._store.get_range(self._key, start, end)
        except StoreError as exc:
            self._raise_fetch_error(exc)
        self._check_size(result.size)
        self._check_version(result.metadata)
        if len(result.data) != end - start:
            raise TruncatedError(
                f"{self._what}: asked for bytes [{start}, {end}), got {len(result.data)}",
                offset=start,
            )
        return result.data

    def _raise_fetch_error(self, exc: Exception) -> NoReturn:
        """Raise a failed fetch's error, named for this object: a missing data object, or a
        shorter object than the index promised (an inconsistency, not a store error)."""
        if isinstance(exc, ObjectNotFound):
            raise ObjectNotFound(f"{self._what}: the data object is missing ({exc})") from exc
        if isinstance(exc, StoreError) and not isinstance(exc, StoreUnavailable | AccessDenied):
            self._check_size_after_failure(exc)
        raise exc

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
        self._drop_prefetch()
        self._finished_prefetch = None
        self._following = None
        self._buf = b""
        self._pool = None
