"""RangePrefetcher: one streamed ranged GET read ahead of its consumer on a background thread.

A sequential scan through a :class:`~offloader.read.ranged_stream.RangedStream` reads its window
(up to a whole data object) as **one** ranged GET (:meth:`ObjectStore.open_range`) whose body
a background thread reads ``chunk`` bytes at a time (``read_buffer_size``, 1 MiB) into a
bounded queue, at most ``depth`` chunks ahead. The consumer parses chunk *k* while chunk
*k + 1* comes off the socket (the socket read releases the GIL), and S3's per-request cost
(about 2 ms of client CPU per GET here) is paid once per window instead of once per buffer.

Given the offsets where checksummed regions begin and end (``crc_boundaries``: the ReadHandle
passes its block boundaries), the thread also computes the running CRC32C of every region
that begins at or after ``start``, right after receiving each chunk, while its bytes are still
in that core's cache (``crc32c`` releases the GIL, so this overlaps the consumer's parsing).
:meth:`region_crc` hands the result to the consumer; a region's state is recorded before the
chunk that reaches it is queued, so it is there once the consumer has taken that chunk.

Memory is bounded by ``depth x chunk``. The thread ends at the range's end, on the first
error (handed to the consumer, which raises it from :meth:`take`), or soon after
:meth:`close` (it checks between chunks, and a blocked hand-over gives up within 50 ms); a
body read can block for at most the store's read timeout times its attempts.
"""

from __future__ import annotations

import bisect
import queue
import threading
from collections.abc import Mapping, Sequence

from formats.extension import crc32c
from offloader.errors import ReadError
from offloader.store.base import ObjectStore, RangeReader

__all__ = ["RangePrefetcher"]

_END = object()
#: seconds between the thread's checks for close() while the queue is full
_PUT_POLL = 0.05
#: seconds between the consumer's checks that the thread is alive while it waits
_TAKE_POLL = 1.0


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
    ) -> None:
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

    def take(self) -> bytes:
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
        if item is _END or not isinstance(item, bytes):
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
            while left > 0 and not self._stop.is_set():
                data = reader.read(min(self._chunk, left))
                if not data:
                    break
                if self._bounds:
                    self._checksum(data, offset)
                offset += len(data)
                left -= len(data)
                self._put(data)
            self._put(_END)
        except BaseException as exc:  # handed to the consumer, raised there
            self._put(exc)
        finally:
            if reader is not None:
                reader.close()

    def _checksum(self, data: bytes, offset: int) -> None:
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
