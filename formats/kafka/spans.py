"""Span CRC32Cs of a remote Kafka object: what the segment's record pins of each object it
uploaded (``.log``, ``.index``, ``.timeindex``, ``.chunks``...), so that a read can check the
bytes it fetched before it returns one of them (spec/kafka-segments.md §6).

An object of ``size`` bytes is cut into spans of ``span`` bytes (the last one shorter); its
:class:`ObjectChecksums` holds the size, the span length and the CRC32C of every span. A read
of ``[start, end)`` fetches the spans covering it (:meth:`ObjectChecksums.covering`) and checks
each (:meth:`ObjectChecksums.first_bad_span`). Spans are computed part by part while a segment
uploads (a part is a whole number of spans), and :func:`crc32c_combine` joins CRC32Cs of
consecutive pieces into the CRC32C of the whole without reading the bytes again
(:mod:`formats.crc_combine`: C when built, else its pure twin).

The stored form (:meth:`ObjectChecksums.encode`) is compact: ``"<size>:<span>:<base64 of the
CRC32Cs as big-endian u32>"``. Pure: bytes in, values out.
"""

from __future__ import annotations

import base64
import binascii
import struct
from collections.abc import Sequence
from dataclasses import dataclass

import crc32c as _crc32c

from formats.crc_combine import crc32c_combine, crc32c_combine_py
from formats.errors import CorruptDataError

__all__ = [
    "SPAN_SIZE",
    "ObjectChecksums",
    "crc32c_combine",
    "crc32c_combine_py",
    "join_crcs",
    "span_crcs",
    "span_size_for",
]

#: bytes per span of a ``.log`` (and of every other object; the small ones have one span)
SPAN_SIZE = 1024 * 1024


def span_size_for(part_size: int) -> int:
    """The span length of a ``.log`` uploaded in parts of ``part_size`` bytes: ``SPAN_SIZE``,
    or the part size when parts are smaller (a part is always a whole number of spans)."""
    return max(1, min(SPAN_SIZE, part_size))


@dataclass(frozen=True)
class ObjectChecksums:
    """An object's size and the CRC32C of each of its ``span``-byte spans."""

    size: int
    span: int
    crcs: tuple[int, ...]

    def __post_init__(self) -> None:
        if self.size < 0 or self.span <= 0:
            raise CorruptDataError(f"object checksums of size {self.size}, span {self.span}")
        if len(self.crcs) != -(-self.size // self.span):
            raise CorruptDataError(
                f"object checksums hold {len(self.crcs)} CRC32Cs, an object of {self.size} "
                f"bytes in spans of {self.span} has {-(-self.size // self.span)}"
            )

    @classmethod
    def of(cls, data: bytes | bytearray | memoryview, span: int = SPAN_SIZE) -> ObjectChecksums:
        """The checksums of a whole object held in memory."""
        view = memoryview(data).cast("B")
        return cls(len(view), span, span_crcs(view, span))

    @property
    def whole_crc32c(self) -> int:
        """The CRC32C of the whole object, from its spans' (no byte read)."""
        crc = 0
        for i, value in enumerate(self.crcs):
            crc = crc32c_combine(crc, value, min(self.span, self.size - i * self.span))
        return crc

    def covering(self, start: int, end: int) -> tuple[int, int]:
        """The span-aligned range ``[a, b)`` that covers ``[start, end)`` (clipped to the
        object)."""
        a = max(0, start) // self.span * self.span
        b = min(self.size, -(-min(end, self.size) // self.span) * self.span)
        return a, max(a, b)

    def first_bad_span(self, data: bytes | bytearray | memoryview, start: int) -> int | None:
        """The number of the first span of ``data`` (object bytes from the span-aligned
        ``start``, ending at a span boundary or the object's end) whose CRC32C is not the
        recorded one, else None. Bytes missing or extra count as a bad span."""
        view = memoryview(data).cast("B")
        first = start // self.span
        if start % self.span:
            return first
        end = start + len(view)
        if end > self.size or (end % self.span and end != self.size):
            return first + len(view) // self.span
        for i, pos in enumerate(range(0, len(view), self.span)):
            if _crc32c.crc32c(view[pos : pos + self.span]) != self.crcs[first + i]:
                return first + i
        return None

    def encode(self) -> str:
        packed = struct.pack(f">{len(self.crcs)}I", *self.crcs)
        return f"{self.size}:{self.span}:{base64.b64encode(packed).decode('ascii')}"

    @classmethod
    def decode(cls, text: str) -> ObjectChecksums:
        """The checksums of :meth:`encode`'s text (``CorruptDataError`` if it is not one)."""
        try:
            size, span, blob = text.split(":", 2)
            raw = base64.b64decode(blob.encode("ascii"), validate=True)
            if len(raw) % 4:
                raise ValueError("CRC32C list is not a whole number of u32")
            crcs = struct.unpack(f">{len(raw) // 4}I", raw)
            return cls(int(size), int(span), tuple(crcs))
        except (ValueError, binascii.Error, UnicodeEncodeError) as exc:
            raise CorruptDataError(f"malformed object checksums {text[:40]!r}: {exc}") from exc


def span_crcs(data: bytes | bytearray | memoryview, span: int) -> tuple[int, ...]:
    """The CRC32C of each ``span``-byte span of ``data`` (the last one shorter)."""
    view = memoryview(data).cast("B")
    return tuple(_crc32c.crc32c(view[p : p + span]) for p in range(0, len(view), span))


def join_crcs(crcs: Sequence[int], lengths: Sequence[int]) -> int:
    """The CRC32C of consecutive pieces from their CRC32Cs and lengths."""
    crc = 0
    for value, length in zip(crcs, lengths, strict=True):
        crc = crc32c_combine(crc, value, length)
    return crc
