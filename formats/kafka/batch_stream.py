"""Record batches of a ``.log`` fed in consecutive pieces (the parts of an upload, as they are
read): every batch's header checked (:func:`~formats.kafka.batch.read_batch_header`) and its
CRC32C computed across the pieces it spans, so that the check runs part by part beside the
upload instead of in a pass before it.

Nothing is copied but a header cut off by the end of a piece (61 bytes at most); a batch's CRC32C
is continued from one piece into the next (the CRC32C of ``attributes`` to the batch's end, as
:func:`~formats.kafka.batch.check_crc`). Headers come back with their ``position`` in the
stream (the file offset when the stream starts at the file's start), once the whole batch has
been fed, its CRC32C matched and its offsets found after the previous batch's. Errors are
those of :func:`~formats.kafka.batch.iter_batch_headers` at the same offsets: a bad header or
CRC32C as soon as it is fed, a batch cut off by the end of the stream when
:meth:`BatchStream.close` is called. Pure: bytes in, headers out.
"""

from __future__ import annotations

import crc32c as _crc32c

from formats.kafka.batch import (
    ATTRIBUTES_OFFSET,
    HEADER_SIZE,
    BatchHeader,
    Buffer,
    read_batch_header,
)
from formats.kafka.errors import KafkaChecksumError, KafkaCorruptError, KafkaTruncatedError
from formats.kafka.spans import crc32c_combine, crc32c_combine_py

#: the C combine is there: a piece's CRC32C is read once and combined into the batch's and the
#: span's; else (pure Python's combine is slow) they are continued over the bytes separately
_FAST_COMBINE = crc32c_combine is not crc32c_combine_py
_combine = crc32c_combine

__all__ = ["BatchStream"]


class BatchStream:
    """The batches of a byte stream fed with :meth:`feed`, piece after piece. With ``span``,
    also the CRC32C of every ``span``-byte span of the stream (:meth:`take_spans`), from the
    same read of the bytes: each piece between a batch boundary, the start of a batch's CRC32C
    range and a span boundary is read once, and its CRC32C combined into the batch's and the
    span's (:func:`~formats.kafka.spans.crc32c_combine`, in C); a batch whose CRC32C matched
    its header is not read again. Without the C combine the span CRC32Cs are a second pass."""

    def __init__(self, *, source: str | None = None, span: int | None = None) -> None:
        self.source = source
        #: stream offset of the next byte to be fed
        self.position = 0
        #: bytes of a header cut off by the end of the last piece, and its stream offset
        self._head = bytearray()
        self._head_at = 0
        #: the batch being fed (its header read), its CRC32C so far
        self._open: BatchHeader | None = None
        self._crc = 0
        #: the offset after the last batch (a batch starting below it goes back)
        self._next_offset = -1
        #: span CRC32Cs: the span length, the CRC32C and length of the span being fed, the
        #: finished spans not taken yet
        self._span = span
        self._span_crc = 0
        self._span_fill = 0
        self._spans: list[int] = []

    def feed(self, data: Buffer) -> list[BatchHeader]:
        """The batches that end in ``data`` (the stream's next bytes), each checked."""
        view = memoryview(data).cast("B")
        n = len(view)
        base = self.position
        done: list[BatchHeader] = []
        fast = self._span is not None and _FAST_COMBINE  # spans from the same read
        i = 0
        while i < n:
            header = self._open
            if header is None:  # a batch starts here
                if self._head or n - i < HEADER_SIZE:  # its header cut off by a piece's end
                    take = min(HEADER_SIZE - len(self._head), n - i)
                    if not self._head:
                        self._head_at = base + i
                    if fast:
                        self._account(view, i, i + take)
                    self._head += view[i : i + take]
                    i += take
                    if len(self._head) < HEADER_SIZE:
                        continue
                    head = bytes(self._head)
                    self._head.clear()
                    header = self._header(head, 0, self._head_at)
                    self._open = header
                    self._crc = _crc32c.crc32c(head[ATTRIBUTES_OFFSET:])
                else:
                    header = self._open = self._header(view, i, base + i)
                    self._crc = 0
            at = base + i
            region = header.position + ATTRIBUTES_OFFSET  # where the batch's CRC32C starts
            stop = region if at < region else header.end
            j = min(n, i + stop - at)
            if at < region:
                if fast:
                    self._account(view, i, j)
            elif fast:
                self._crc = _combine(self._crc, self._account(view, i, j), j - i)
            else:
                self._crc = _crc32c.crc32c(view[i:j], self._crc)
            i = j
            if base + i == header.end:
                done.append(self._close_batch())
        self.position = base + n
        if self._span is not None and not _FAST_COMBINE:  # the pure path: a second pass
            self._spans_of(view)
        return done

    @property
    def span(self) -> int | None:
        """The span length whose CRC32Cs are computed (None: none are)."""
        return self._span

    def take_spans(self, *, final: bool = False) -> list[int]:
        """The CRC32Cs of the spans finished since the last call (``final``: the stream ended,
        a last shorter span counts)."""
        if final and self._span_fill:
            self._spans.append(self._span_crc)
            self._span_crc = self._span_fill = 0
        spans, self._spans = self._spans, []
        return spans

    def _account(self, view: memoryview, i: int, j: int) -> int:
        """Bytes ``view[i:j]`` of the stream, read once: their CRC32C, and each span's."""
        out = 0
        span = self._span
        assert span is not None
        while i < j:
            take = min(j - i, span - self._span_fill)
            crc = _crc32c.crc32c(view[i : i + take])
            self._span_crc = _combine(self._span_crc, crc, take)
            self._span_fill += take
            if self._span_fill == span:
                self._spans.append(self._span_crc)
                self._span_crc = self._span_fill = 0
            out = _combine(out, crc, take)
            i += take
        return out

    def _spans_of(self, view: memoryview) -> None:
        span = self._span
        assert span is not None
        i = 0
        while i < len(view):
            take = min(len(view) - i, span - self._span_fill)
            self._span_crc = _crc32c.crc32c(view[i : i + take], self._span_crc)
            self._span_fill += take
            if self._span_fill == span:
                self._spans.append(self._span_crc)
                self._span_crc = self._span_fill = 0
            i += take

    def close(self) -> None:
        """The stream ended: a batch (or header) cut off is a ``KafkaTruncatedError``."""
        if self._head:  # what the walk says of a header cut off (its magic byte first)
            head = bytes(self._head)
            read_batch_header(head, 0, source=self.source, shift=self._head_at)
            raise KafkaTruncatedError(  # pragma: no cover - read_batch_header raised
                f"record batch header needs {HEADER_SIZE} bytes, {len(head)} left",
                offset=self._head_at,
                source=self.source,
            )
        if self._open is not None:
            header = self._open
            raise KafkaTruncatedError(
                f"record batch of {header.size} bytes runs past the end "
                f"({self.position - header.position} left)",
                offset=header.position,
                source=self.source,
            )

    @property
    def open_batch(self) -> BatchHeader | None:
        """The batch whose header was fed and whose last bytes were not yet (unchecked)."""
        return self._open

    @property
    def pending(self) -> bool:
        """True while a batch fed in part waits for the rest of its bytes."""
        return bool(self._head) or self._open is not None

    def _header(self, buf: Buffer, pos: int, at: int) -> BatchHeader:
        return read_batch_header(buf, pos, source=self.source, whole=False, shift=at - pos)

    def _close_batch(self) -> BatchHeader:
        header = self._open
        assert header is not None
        self._open = None
        if self._crc != header.crc:
            raise KafkaChecksumError(
                f"record batch at base offset {header.base_offset} has CRC32C {self._crc:#010x}, "
                f"its header says {header.crc:#010x}",
                offset=header.position,
                source=self.source,
            )
        if header.base_offset < self._next_offset:
            raise KafkaCorruptError(
                f"batch base offset {header.base_offset} goes back (previous batch ended at "
                f"offset {self._next_offset - 1})",
                offset=header.position,
                source=self.source,
            )
        self._next_offset = header.next_offset
        return header
