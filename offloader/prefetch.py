"""RangePrefetcher: one streamed ranged GET read ahead of its consumer on a background thread.

A sequential scan through a :class:`~offloader.ranged_stream.RangedStream` reads its window
(up to a whole data object) as **one** ranged GET (:meth:`ObjectStore.open_range`) whose body
a background thread reads ``chunk`` bytes at a time (``read_buffer_size``, 1 MiB) into a
bounded queue, at most ``depth`` chunks ahead. The consumer parses chunk *k* while chunk
*k + 1* comes off the socket (the socket read releases the GIL), and S3's per-request cost
(about 2 ms of client CPU per GET here) is paid once per window instead of once per buffer.

Memory is bounded by ``depth x chunk``. The thread ends at the range's end, on the first
error (handed to the consumer, which raises it from :meth:`take`), or soon after
:meth:`close` (it checks between chunks, and a blocked hand-over gives up within 50 ms); a
body read can block for at most the store's read timeout times its attempts.
"""

from __future__ import annotations

import queue
import threading

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
        self, store: ObjectStore, key: str, start: int, end: int, *, chunk: int, depth: int
    ) -> None:
        self.start = start
        self.end = end
        #: object offset of the first byte of the next chunk :meth:`take` returns
        self.next_offset = start
        #: the whole object's size, once the request has been answered
        self.object_size: int | None = None
        self._store = store
        self._key = key
        self._chunk = max(1, chunk)
        self._queue: queue.Queue[object] = queue.Queue(maxsize=max(1, depth))
        self._stop = threading.Event()
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
            left = min(self.end, reader.size) - self.start
            while left > 0 and not self._stop.is_set():
                data = reader.read(min(self._chunk, left))
                if not data:
                    break
                left -= len(data)
                self._put(data)
            self._put(_END)
        except BaseException as exc:  # handed to the consumer, raised there
            self._put(exc)
        finally:
            if reader is not None:
                reader.close()

    def _put(self, item: object) -> None:
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=_PUT_POLL)
                return
            except queue.Full:
                continue
