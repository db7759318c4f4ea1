"""Large buffers reused across blocks once nothing views them any more.

A Spark task packs one block's payloads into a buffer of the block's size (64 MiB by default)
and hands Arrow slices of it to Spark. A fresh buffer of that size is mapped fresh by the
kernel: about 16,000 page faults and 30 ms of system CPU per block on this project's machines,
as much as the rest of the task's Python work. :class:`ReusableBuffers` keeps the last few
buffers of a process and hands one out again only when no view of it is left: no memoryview,
no Arrow buffer, no :class:`~formats.block.PackedEntries`. A bytearray knows that itself (it
refuses to change size while it is exported), so reuse cannot overwrite bytes anyone can
still read; a buffer still viewed is skipped and a new one allocated.

:meth:`ReusableBuffers.take` returns a memoryview, which is itself such a view: the buffer is
busy from the moment it is taken until the caller drops every view.
"""

from __future__ import annotations

import threading

__all__ = ["BLOCK_BUFFERS", "ReusableBuffers", "is_viewed"]


def is_viewed(buf: bytearray) -> bool:
    """Whether a memoryview or another buffer export of ``buf`` is alive.

    A bytearray cannot change size while exported. The probe shrinks it by one byte and puts
    the byte back: growing it instead (an append) would make CPython reallocate a full buffer
    with an eighth more room, a copy of the block and a larger buffer from then on."""
    if not buf:
        try:
            buf.append(0)
        except BufferError:
            return True
        del buf[-1]
        return False
    try:
        last = buf.pop()
    except BufferError:
        return True
    buf.append(last)
    return False


class ReusableBuffers:
    """At most ``keep`` buffers of this process, each handed out again when nothing views it."""

    def __init__(self, keep: int = 2) -> None:
        if keep < 1:
            raise ValueError(f"ReusableBuffers: keep must be at least 1, not {keep}")
        self._keep = keep
        self._buffers: list[bytearray] = []  # oldest first
        self._lock = threading.Lock()

    def take(self, size: int) -> memoryview:
        """A writable view of at least ``size`` bytes that no one else views (its contents are
        whatever the last user left). A new buffer is allocated when none is free and large
        enough; the oldest is forgotten (freed when its last view goes) beyond ``keep``."""
        if size < 0:
            raise ValueError(f"ReusableBuffers: size {size} is negative")
        with self._lock:
            for buf in self._buffers:
                if len(buf) >= size and not is_viewed(buf):
                    return memoryview(buf)
            buf = bytearray(size)
            self._buffers.append(buf)
            del self._buffers[: -self._keep]
            return memoryview(buf)

    def __len__(self) -> int:
        """How many buffers are kept."""
        return len(self._buffers)


#: this process's block-sized buffers: a Spark Python worker's blocks, read by the RDD reader
#: (:func:`offloader.spark.tasks.read_task`) or packed by the DataFrame source
#: (:func:`offloader.spark.source.read_block_batches`), reused once nothing views them
BLOCK_BUFFERS = ReusableBuffers(keep=2)
