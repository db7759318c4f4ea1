"""The process's pool of block buffers, reused from one plain offload to the next.

A broker (or the service) offloads ledger after ledger; each plain offload frames its blocks
into ``offload_concurrency`` buffers of ``max_block_size`` bytes (4 x 64 MiB by default). A
fresh buffer costs a page fault per 4 KiB page when first written (~25 ms of CPU per 64 MiB
here, about a third of the extra client CPU a 512 MiB offload of 1 KiB entries spent over a raw
multipart upload). :data:`BLOCK_BUFFERS` keeps the buffers of the last offload that finished,
so only the first offload of a process pays those faults.

What it keeps is bounded: at most ``keep`` buffers (the ``offload_concurrency`` of the offload
that gave them back), all of one size (a buffer of another size, or one more than ``keep``,
is let go), so a process holds at most ``offload_concurrency x max_block_size`` bytes between
offloads: the same memory one offload holds while it runs. :meth:`BlockBufferPool.clear`
lets them go. A buffer is taken back only when nothing else refers to it (no view, no other
reference: a store that kept the bytes it was given keeps them unchanged); offloads running
at once in one process each take their own buffers (the pool is thread-safe).
"""

from __future__ import annotations

import sys
import threading

__all__ = ["BLOCK_BUFFERS", "BlockBufferPool", "is_referenced"]


def is_referenced(buf: bytearray, owners: int = 1) -> bool:
    """Whether anything but the caller's ``owners`` references (the caller's variables, a
    list) refers to ``buf``, or a memoryview or other buffer export of it is alive.

    A bytearray cannot change size while exported: the probe pops its last byte and puts it
    back (a shrink by one byte never reallocates; a grow could)."""
    # getrefcount's own argument and this function's parameter add two
    if sys.getrefcount(buf) > owners + 2:
        return True
    if not buf:
        return False
    try:
        last = buf.pop()
    except BufferError:
        return True
    buf.append(last)
    return False


class BlockBufferPool:
    """Block buffers kept between offloads (see the module docstring)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._free: list[bytearray] = []
        #: what the pool handed out again, and what it was given and let go (for tests, logs)
        self.reused = 0
        self.dropped = 0

    def __len__(self) -> int:
        with self._lock:
            return len(self._free)

    def take(self, size: int, count: int) -> list[bytearray]:
        """Up to ``count`` kept buffers of exactly ``size`` bytes (maybe none): the caller
        owns them (their bytes are what the last offload left; a writer overwrites every
        byte of a block it frames)."""
        with self._lock:
            if self._free and len(self._free[0]) != size:
                self.dropped += len(self._free)
                self._free.clear()
            taken = self._free[:count]
            del self._free[:count]
            self.reused += len(taken)
            return taken

    def give(self, buffers: list[bytearray], keep: int) -> None:
        """Take ``buffers`` back (the caller's list is emptied), keeping at most ``keep`` of
        one size; a buffer something else still refers to is let go, never reused."""
        with self._lock:
            while buffers:
                buf = buffers.pop()
                # owners: `buf` here; the list no longer holds it
                if is_referenced(buf, owners=1):
                    self.dropped += 1
                    continue
                if self._free and len(self._free[0]) != len(buf):
                    self.dropped += len(self._free)
                    self._free.clear()
                if len(self._free) >= keep:
                    self.dropped += 1
                    continue
                self._free.append(buf)

    def clear(self) -> None:
        """Let every kept buffer go (its memory returns to the allocator)."""
        with self._lock:
            self._free.clear()


#: the process's pool, used by :class:`~offloader.offload.writer.PlainUpload`
BLOCK_BUFFERS = BlockBufferPool()
