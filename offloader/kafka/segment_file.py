"""A local segment's ``.log`` as the uploader reads it: positioned reads of one open handle.

Never ``mmap``: Kafka truncates segments (log truncation after a leader change), and a mapped
page past the new end kills the process with SIGBUS. Here a read that comes back short is a
:class:`~offloader.errors.SegmentChangedError` for that segment only.
:meth:`SegmentFile.read_into` fills a caller's buffer (the upload's reused part buffers);
:meth:`SegmentFile.last_batch` finds the last batch's header from the ``.index``'s last entry
(a few header reads, no CRC: the checks run part by part during the upload,
:class:`CheckedReader`); :meth:`SegmentFile.check_unchanged` compares the file's size and
modification time with the ones it had when it was opened.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import BinaryIO

from formats.framing import scratch_bytearray
from formats.kafka.batch import HEADER_SIZE, BatchHeader, read_batch_header
from formats.kafka.batch_stream import BatchStream
from formats.kafka.errors import KafkaFormatError
from formats.kafka.index import OFFSET_ENTRY
from offloader.errors import SegmentChangedError

__all__ = ["CheckedReader", "SegmentFile", "index_hint"]


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

    def read_into(self, start: int, buffer: bytearray | memoryview) -> None:
        """Fill ``buffer`` with the file's bytes from ``start`` (no copy but the kernel's); a
        file that ends before it is full was truncated."""
        view = memoryview(buffer).cast("B")
        done = 0
        while done < len(view):
            got = os.preadv(self._fd, [view[done:]], start + done)
            if got == 0:
                raise SegmentChangedError(
                    f"{self.source}: truncated while it was copied (it ends at byte "
                    f"{start + done}, it had {self.size} bytes)"
                )
            done += got

    def changed(self) -> bool:
        """True when the file's size, modification time or inode differ from when it was
        opened."""
        stat = os.fstat(self._fd)
        return (stat.st_size, stat.st_mtime_ns, stat.st_ino) != self._stamp

    def last_batch(self, hint: int = 0) -> BatchHeader:
        """The header of the file's last batch, walking headers (61-byte reads, no CRC) from
        ``hint`` (a batch's position, the ``.index``'s last entry) to the end; from the start
        when the hint does not lead there. A header that does not parse, or a batch cut off by
        the file's end, is the walk from the start's ``KafkaFormatError``."""
        if 0 < hint < self.size:
            try:
                return self._walk(hint)
            except KafkaFormatError:
                pass  # a stale or damaged index: the walk from the start decides
        return self._walk(0)

    def _walk(self, pos: int) -> BatchHeader:
        last: BatchHeader | None = None
        while pos < self.size:
            head = self.read(pos, min(HEADER_SIZE, self.size - pos))
            last = read_batch_header(head, 0, source=self.source, whole=False, shift=pos)
            if last.end > self.size:
                read_batch_header(
                    self.read(pos, self.size - pos), 0, source=self.source, shift=pos
                )  # raises: the batch runs past the end
            pos = last.end
        assert last is not None  # the file is not empty
        return last

    def cut_before(self, offset: int) -> BatchHeader | None:
        """Make the file end (for every later read and check) after its last batch whose
        offsets all lie below ``offset``, walking headers from the start; that batch's header,
        or None when even the first batch reaches ``offset`` (nothing left). The copy of a
        segment's prefix, where a new leader's lineage stops agreeing (KIP-405's epoch rule)."""
        pos = 0
        last: BatchHeader | None = None
        while pos < self.size:
            head = self.read(pos, min(HEADER_SIZE, self.size - pos))
            header = read_batch_header(head, 0, source=self.source, whole=False, shift=pos)
            if header.last_offset >= offset or header.end > self.size:
                break
            last, pos = header, header.end
        self.size = pos
        return last

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


def index_hint(handle: BinaryIO | None, log_size: int) -> int:
    """The position of the ``.index``'s last entry (its last 64 entries read, the preallocated
    zeros skipped), 0 when there is no usable one: where :meth:`SegmentFile.last_batch` starts."""
    if handle is None:
        return 0
    try:
        fd = handle.fileno()
        size = os.fstat(fd).st_size
        size -= size % OFFSET_ENTRY.size
        want = min(size, 64 * OFFSET_ENTRY.size)
        tail = os.pread(fd, want, size - want)
    except OSError:
        return 0
    for at in range(len(tail) - OFFSET_ENTRY.size, -1, -OFFSET_ENTRY.size):
        relative, position = OFFSET_ENTRY.unpack_from(tail, at)
        if relative or position:
            return position if 0 < position < log_size else 0
    return 0


class CheckedReader:
    """The ``.log`` read front to back in pieces, every batch checked as its bytes are read
    (:class:`~formats.kafka.batch_stream.BatchStream`): ``on_batch(header)`` for each, in
    order. A batch that fails its checks in a file that changed since it was opened is a
    ``SegmentChangedError`` ("modified while it was copied"), else the check's
    ``KafkaFormatError`` (a corrupt segment). With ``span``, the CRC32C of every ``span``-byte
    span read comes from the same pass (:meth:`take_spans`)."""

    def __init__(
        self,
        file: SegmentFile,
        on_batch: Callable[[BatchHeader], None],
        span: int | None = None,
    ) -> None:
        self.file = file
        self.stream = BatchStream(source=file.source, span=span)
        self._on_batch = on_batch

    @property
    def position(self) -> int:
        """The file offset of the next byte to read."""
        return self.stream.position

    def read_into(self, buffer: bytearray | memoryview) -> None:
        """The next ``len(buffer)`` bytes of the file into ``buffer``, checked."""
        self.file.read_into(self.stream.position, buffer)
        self._checked(lambda: self.stream.feed(buffer))

    def read(self, length: int) -> bytearray:
        """The next ``length`` bytes, in a new buffer, checked."""
        body = scratch_bytearray(length)
        self.read_into(body)
        return body

    def take_spans(self, *, final: bool = False) -> list[int]:
        """The CRC32Cs of the ``span``-byte spans read since the last call (``final``: the
        file's last, shorter span too), from the same read as the batch checks."""
        return self.stream.take_spans(final=final)

    def open_batch(self) -> BatchHeader | None:
        """The batch whose first bytes were read and whose rest was not yet."""
        return self.stream.open_batch

    def finish(self) -> None:
        """The whole file was read: a batch cut off by its end is an error."""
        if self.stream.position != self.file.size:
            raise SegmentChangedError(
                f"{self.file.source}: read {self.stream.position} of {self.file.size} bytes"
            )

        def close() -> list[BatchHeader]:
            self.stream.close()
            return []

        self._checked(close)

    def _checked(self, step: Callable[[], list[BatchHeader]]) -> None:
        try:
            headers = step()
        except KafkaFormatError as exc:
            if self.file.changed():
                raise SegmentChangedError(
                    f"{self.file.source}: modified while it was copied ({exc})"
                ) from exc
            raise
        for header in headers:
            self._on_batch(header)
