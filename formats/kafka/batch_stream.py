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

__all__ = ["BatchStream"]


class BatchStream:
    """The batches of a byte stream fed with :meth:`feed`, piece after piece."""

    def __init__(self, *, source: str | None = None) -> None:
        self.source = source
        #: stream offset of the next byte to be fed
        self.position = 0
        #: bytes of a header cut off by the end of the last piece, and its stream offset
        self._head = bytearray()
        self._head_at = 0
        #: the batch whose bytes continue into the next piece, its CRC32C so far, bytes to come
        self._open: BatchHeader | None = None
        self._crc = 0
        self._left = 0
        #: the offset after the last batch (a batch starting below it goes back)
        self._next_offset = -1

    def feed(self, data: Buffer) -> list[BatchHeader]:
        """The batches that end in ``data`` (the stream's next bytes), each checked."""
        view = memoryview(data).cast("B")
        n = len(view)
        base = self.position
        done: list[BatchHeader] = []
        i = 0
        while i < n:
            if self._open is not None:  # the rest of a batch begun in an earlier piece
                take = min(self._left, n - i)
                self._crc = _crc32c.crc32c(view[i : i + take], self._crc)
                self._left -= take
                i += take
                if self._left == 0:
                    done.append(self._close_batch())
                continue
            if self._head or n - i < HEADER_SIZE:  # a header cut off by a piece's end
                take = min(HEADER_SIZE - len(self._head), n - i)
                if not self._head:
                    self._head_at = base + i
                self._head += view[i : i + take]
                i += take
                if len(self._head) < HEADER_SIZE:
                    continue
                head = bytes(self._head)
                self._head.clear()
                header = self._header(head, 0, self._head_at)
                self._begin(header, head, 0, HEADER_SIZE)
                if self._left == 0:  # a batch of its header alone
                    done.append(self._close_batch())
                continue
            header = self._header(view, i, base + i)
            have = min(header.size, n - i)
            self._begin(header, view, i, have)
            i += have
            if self._left == 0:
                done.append(self._close_batch())
        self.position = base + n
        return done

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
                f"({header.size - self._left} left)",
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

    def _begin(self, header: BatchHeader, buf: Buffer, pos: int, have: int) -> None:
        """``buf[pos : pos + have]`` is the start of ``header``'s batch (its header at least)."""
        view = memoryview(buf)
        self._crc = _crc32c.crc32c(view[pos + ATTRIBUTES_OFFSET : pos + have])
        self._open = header
        self._left = header.size - have

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
