"""RangePrefetcher: one streamed ranged GET read ahead of its consumer on a background thread.

A sequential scan through a :class:`~offloader.read.ranged_stream.RangedStream` reads its window
(up to a whole data object) as **one** ranged GET (:meth:`ObjectStore.open_range`) whose body a
background thread reads ``chunk`` bytes at a time (a RangedStream's: two ``read_buffer_size``, 2
MiB) into a bounded queue, at most ``depth`` chunks ahead. The consumer parses chunk *k* while
chunk *k + 1* comes off the socket (the socket read releases the GIL), and S3's per-request cost
(about 2 ms of client CPU per GET here) is paid once per window instead of once per buffer.

Given the offsets where checksummed regions begin and end (``crc_boundaries``: the ReadHandle
passes its block boundaries), the thread also computes the running CRC32C of every region
that begins at or after ``start``, right after receiving each chunk, while its bytes are still
in that core's cache (``crc32c`` releases the GIL, so this overlaps the consumer's parsing).
:meth:`region_crc` hands the result to the consumer; a region's state is recorded before the
chunk that reaches it is queued, so it is there once the consumer has taken that chunk.

With a :class:`ChunkPool` (the :class:`~offloader.read.ranged_stream.RangedStream` passes
its own), the thread reads each chunk straight into a reused buffer (the reader's
``readinto``: on S3 from the socket with no copy) and hands out a read-only view of it; a
buffer is reused only once nothing but the pool refers to it (no view of it, no batch cut
from it, no queued chunk is left), so a chunk's bytes never change while anyone can see
them. Reused buffers are why a long scan takes a few page faults instead of one per page
read: fresh chunk buffers freed on another thread go back to the allocator, which gives
them back to the kernel, and every chunk faults its pages in again. Without a pool (or from
a reader without ``readinto``), each chunk is new ``bytes``.

Memory is bounded by ``depth x chunk`` (with a pool: by the pool's buffers, plus those the
consumer still holds). The thread ends at the range's end, on the first
error (handed to the consumer, which raises it from :meth:`take`), or soon after
:meth:`close` (it checks between chunks, and a blocked hand-over gives up within 50 ms); a
body read can block for at most the store's read timeout times its attempts.
"""

from __future__ import annotations

import bisect
import queue
import sys
import threading
from collections.abc import Callable, Mapping, Sequence

from formats.extension import crc32c
from offloader.errors import ReadError
from offloader.store.base import ObjectStore, RangeReader

__all__ = ["ChunkPool", "RangePrefetcher"]

_END = object()
#: seconds between the thread's checks for close() while the queue is full
_PUT_POLL = 0.05
#: seconds between the consumer's checks that the thread is alive while it waits
_TAKE_POLL = 1.0


class ChunkPool:
    """Buffers of ``size`` bytes for the chunks of one reader's prefetchers, reused once free.

    A buffer is free when the pool holds the only reference to it: every view of it, every
    batch cut from it and every queued chunk holds one (a memoryview holds its buffer
    alive), so a buffer is never written while any of those exists. At most ``keep``
    buffers are kept; when all are in use a new one is made (and dropped after use)."""

    def __init__(self, size: int, keep: int) -> None:
        self.size = max(1, size)
        self._keep = max(1, keep)
        self._bufs: list[bytearray] = []
        #: several prefetch threads may take from one pool (one closing, the next starting)
        self._lock = threading.Lock()
        #: buffers made (the pool's and the extra ones), for tests and benchmarks
        self.made = 0

    def take(self) -> bytearray:
        """A free buffer (the pool's first free one, else a new one)."""
        with self._lock:
            bufs = self._bufs
            for i in range(len(bufs)):
                # two references: the pool's list and getrefcount's argument
                if sys.getrefcount(bufs[i]) <= 2:
                    return bufs[i]
            buf = bytearray(self.size)
            self.made += 1
            if len(bufs) < self._keep:
                bufs.append(buf)
            return buf


class RangePrefetcher:
    """Bytes ``[start, end)`` of ``key``, as chunks in order (:meth:`take`)."""

    def __init__(
        self,
        store: ObjectStore,
        key: str,
        start: int,
        end: int,
        *,
        chunk: int,
        depth: int,
        crc_boundaries: Sequence[int] = (),
        pool: ChunkPool | None = None,
    ) -> None:
        """``pool``: reuse its buffers for the chunks (see :class:`ChunkPool`; each chunk is
        then a read-only memoryview of ``pool.size`` bytes at most)."""
        self.start = start
        self.end = end
        #: object offset of the first byte of the next chunk :meth:`take` returns
        self.next_offset = start
        #: the whole object's size, once the request has been answered
        self.object_size: int | None = None
        #: the object's user metadata, from the same response (set before the first chunk)
        self.object_metadata: Mapping[str, str] = {}
        self._store = store
        self._key = key
        self._chunk = max(1, chunk)
        self._pool = pool if pool is not None and pool.size >= self._chunk else None
        self._queue: queue.Queue[object] = queue.Queue(maxsize=max(1, depth))
        self._stop = threading.Event()
        # region checksums: sorted boundaries, the region being summed (its start offset, or
        # None before the first boundary), and each region's (offset reached, running CRC)
        self._bounds = crc_boundaries
        self._bound_set = frozenset(crc_boundaries)
        self._region: int | None = start if start in self._bound_set else None
        self._region_crc = 0
        self._regions: dict[int, tuple[int, int]] = {}
        self._thread = threading.Thread(target=self._run, name="range-prefetch", daemon=True)
        self._thread.start()

    @property
    def exhausted(self) -> bool:
        return self.next_offset >= self.end

    def take(self) -> bytes | memoryview:
        """The next chunk (blocks until it has arrived); the thread's error, if it failed."""
        if self.exhausted:
            raise ReadError(f"prefetch of [{self.start}, {self.end}) is exhausted")
        while True:
            try:
                item = self._queue.get(timeout=_TAKE_POLL)
                break
            except queue.Empty:
                if not self._thread.is_alive() and self._queue.empty():
                    raise ReadError("the prefetch thread ended without an answer") from None
        if isinstance(item, BaseException):
            self.next_offset = self.end  # nothing more will come
            raise item
        if item is _END or not isinstance(item, bytes | memoryview):
            self.next_offset = self.end
            raise ReadError(f"prefetch of [{self.start}, {self.end}) ended early")
        self.next_offset += len(item)
        return item

    def sums_region(self, region_start: int) -> bool:
        """Whether the thread computes the CRC32C of the region beginning at
        ``region_start`` (a boundary at or after this prefetch's start)."""
        return region_start >= self.start and region_start in self._bound_set

    def region_crc(self, region_start: int, end: int) -> int | None:
        """The CRC32C of bytes ``[region_start, end)`` if the thread has summed exactly
        those (``region_start`` a boundary, ``end`` the offset it had reached, a boundary or
        the end of its range), else None."""
        state = self._regions.get(region_start)
        return state[1] if state is not None and state[0] == end else None

    def take_region_crc(self, region_start: int, end: int) -> int | None:
        """Like :meth:`region_crc`, for a region whose bytes the consumer has taken from
        this prefetcher (``[region_start, end)`` inside ``[start, next_offset)``), and
        forgotten once handed over (a scan that checks every span this way keeps no state
        per span)."""
        if region_start < self.start or end > self.next_offset:
            return None
        state = self._regions.get(region_start)
        if state is None or state[0] != end:
            return None
        del self._regions[region_start]
        return state[1]

    def close(self) -> None:
        """Stop the thread (it drops the rest of the body) and free the queued chunks."""
        self._stop.set()
        while True:
            try:
                self._queue.get_nowait()
            except queue.Empty:
                break

    # --- the thread -----------------------------------------------------------------------
    def _run(self) -> None:
        reader: RangeReader | None = None
        try:
            reader = self._store.open_range(self._key, self.start, self.end)
            self.object_size = reader.size
            self.object_metadata = reader.metadata
            offset = self.start
            left = min(self.end, reader.size) - offset
            into: Callable[[memoryview], int] | None = getattr(reader, "readinto", None)
            pool = self._pool
            while left > 0 and not self._stop.is_set():
                data: bytes | memoryview
                if pool is not None and into is not None:
                    data = self._fill(pool.take(), into, min(self._chunk, left))
                else:
                    data = reader.read(min(self._chunk, left))
                if not data:
                    break
                if self._bounds:
                    self._checksum(data, offset)
                offset += len(data)
                left -= len(data)
                self._put(data)
                del data  # the chunk is the consumer's now: no reference left here
            self._put(_END)
        except BaseException as exc:  # handed to the consumer, raised there
            self._put(exc)
        finally:
            if reader is not None:
                reader.close()

    def _fill(self, buf: bytearray, into: Callable[[memoryview], int], n: int) -> memoryview:
        """``n`` bytes read into ``buf`` (fewer only at the body's end), as a read-only view."""
        view = memoryview(buf)
        got = 0
        while got < n and not self._stop.is_set():
            step = into(view[got:n])
            if not step:
                break
            got += step
        return view[:got].toreadonly()

    def _checksum(self, data: bytes | memoryview, offset: int) -> None:
        """Fold ``data`` (object bytes from ``offset``) into the running region CRC32Cs."""
        bounds = self._bounds
        end = offset + len(data)
        i = bisect.bisect_right(bounds, offset)
        pos = offset
        view = memoryview(data)
        while pos < end:
            piece_end = min(bounds[i], end) if i < len(bounds) else end
            if self._region is not None:
                self._region_crc = crc32c(view[pos - offset : piece_end - offset], self._region_crc)
                self._regions[self._region] = (piece_end, self._region_crc)
            pos = piece_end
            if i < len(bounds) and pos == bounds[i]:
                self._region, self._region_crc = pos, 0
                i += 1

    def _put(self, item: object) -> None:
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=_PUT_POLL)
                return
            except queue.Full:
                continue
