"""A local segment's ``.log`` as the uploader reads it: positioned reads of one open handle.

Never ``mmap``: Kafka truncates segments (log truncation after a leader change), and a mapped
page past the new end kills the process with SIGBUS. Here a read that comes back short is a
:class:`~offloader.errors.SegmentChangedError` for that segment only. :meth:`SegmentFile.scan`
is the pass before the upload (every batch's CRC32C, the offsets, the index entries, the CRC32C
of the whole file); :meth:`SegmentFile.check_unchanged` compares the file's size and
modification time after the upload with the ones it had before the scan.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import BinaryIO

import crc32c as crc32c_lib

from formats.kafka.batch import BatchHeader, iter_batch_headers
from offloader.errors import SegmentChangedError

__all__ = ["SCAN_CHUNK", "SegmentFile"]

#: bytes read at once by the scan (a batch larger than this is read whole)
SCAN_CHUNK = 8 * 1024 * 1024


class SegmentFile:
    """Reads of one open ``.log`` (``source``: its path, for messages)."""

    def __init__(self, handle: BinaryIO, source: str) -> None:
        self._fd = handle.fileno()
        self.source = source
        stat = os.fstat(self._fd)
        self.size = stat.st_size
        self._stamp = (stat.st_size, stat.st_mtime_ns, stat.st_ino)

    def read(self, start: int, length: int) -> bytes:
        """``length`` bytes from ``start``; a file that ends before them was truncated."""
        data = os.pread(self._fd, length, start)
        while len(data) < length:
            more = os.pread(self._fd, length - len(data), start + len(data))
            if not more:
                raise SegmentChangedError(
                    f"{self.source}: truncated while it was copied (it ends at byte "
                    f"{start + len(data)}, it had {self.size} bytes)"
                )
            data += more
        return data

    def check_unchanged(self) -> None:
        """The file still has the size and modification time it had when it was opened."""
        stat = os.fstat(self._fd)
        now = (stat.st_size, stat.st_mtime_ns, stat.st_ino)
        if now != self._stamp:
            what = "truncated" if stat.st_size < self.size else "modified"
            raise SegmentChangedError(
                f"{self.source}: {what} while it was copied ({self.size} -> {stat.st_size} "
                "bytes, or a new modification time)"
            )

    def scan(self, on_batch: Callable[[BatchHeader, int], None]) -> int:
        """Every batch in order (CRC32C checked; ``on_batch(header, shift)``: the header's
        ``position`` plus ``shift`` is its file offset); the CRC32C of the whole file. A batch
        cut off by the file's end is a ``KafkaTruncatedError``."""
        whole = 0
        crc_end = 0  # bytes of the file in ``whole``
        pos = 0  # file offset of the next batch
        want = SCAN_CHUNK
        while pos < self.size:
            length = min(want, self.size - pos)
            data = self.read(pos, length)
            view = memoryview(data)
            if pos + length > crc_end:
                whole = crc32c_lib.crc32c(view[crc_end - pos :], whole)
                crc_end = pos + length
            consumed = 0
            last = pos + length >= self.size
            for header in iter_batch_headers(
                view, source=self.source, verify_crc=True, stop_at_partial=not last
            ):
                on_batch(header, pos)
                consumed = header.end
            view.release()
            if consumed == 0:
                want *= 2  # a batch larger than the chunk: read more at once
                continue
            pos += consumed
            want = SCAN_CHUNK
        return int(whole)
