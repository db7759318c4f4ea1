"""Span CRC32Cs: the index extension's tagged section ``TAG_SPAN_CRC32C`` (spec/index-format.md
§4.2), a CRC32C of every fine-offset span of the data object, so that a read can check the
bytes it fetched before it returns a single entry from them.

A block's spans cut it at its fine offset points: the first runs from the block's data start
(after its header) to the block's first point, each next one to the next point, the last one
to the block's end (its padding included). Points are entry starts, so every entry lies in
exactly one span, and a single-entry read, which fetches the span ``OffloadIndex.locate``
gives (``start_offset`` .. ``end_offset``), fetches exactly one span. Spans are numbered in
object order, block by block. The payload::

    count u32 | count x crc32c u32      (count = blocks + fine offset points)

Pure: bytes in, values out.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise

from formats.block import Buffer
from formats.crc_combine import crc32c_concat
from formats.errors import CorruptDataError
from formats.extension import TAG_SPAN_CRC32C, ExtensionSection, crc32c
from formats.index import OffloadIndex
from formats.wire import U32

__all__ = [
    "SpanChecks",
    "SpanSummer",
    "block_and_span_crcs",
    "block_span_crcs",
    "decode_span_crcs",
    "encode_span_crcs",
    "span_cuts",
]


def span_cuts(
    block_start: int, data_start: int, block_end: int, points: Sequence[int]
) -> list[tuple[int, int]]:
    """The spans ``[start, end)`` (object offsets) of one block, given the object offsets of
    the fine points inside it (ascending; those outside ``(data_start, block_end)`` ignored)."""
    inner = [p for p in points if data_start < p < block_end]
    bounds = [data_start, *inner, block_end]
    del block_start  # the header is not in any span: the block header check covers it
    return list(pairwise(bounds))


def block_span_crcs(block: Buffer, block_start: int, cuts: Sequence[tuple[int, int]]) -> list[int]:
    """The CRC32C of each span of a block whose bytes are ``block`` (object offset
    ``block_start``)."""
    view = memoryview(block)
    return [crc32c(view[start - block_start : end - block_start]) for start, end in cuts]


def block_and_span_crcs(
    block: Buffer, block_start: int, cuts: Sequence[tuple[int, int]]
) -> tuple[int, list[int]]:
    """The block's CRC32C and its spans' (``cuts``: contiguous, from the header's end to
    the block's end), in one pass over the bytes: the block's is combined from its header's
    and the spans' (:func:`formats.crc_combine.crc32c_concat`)."""
    view = memoryview(block)
    if not cuts:
        return crc32c(view), []
    spans = block_span_crcs(view, block_start, cuts)
    head = crc32c(view[: cuts[0][0] - block_start])
    return crc32c_concat(zip(spans, (end - start for start, end in cuts), strict=True), head), spans


class SpanSummer:
    """The CRC32Cs of a block's spans, summed as the block is written (the ``on_framed``
    of :meth:`formats.block.BlockWriter.write_block_batches`): each run of bytes is summed
    right after it was framed, while it is in the CPU's cache, instead of in a second pass
    over the finished block. ``bounds`` are the block offsets where spans begin and end
    (the first is the header's end, the last the block's end); :meth:`finish` gives the
    block's CRC32C (the header's combined with the spans') and the spans'."""

    def __init__(self, bounds: Sequence[int]) -> None:
        if len(bounds) < 2 or any(b >= a for a, b in zip(bounds[1:], bounds, strict=False)):
            raise ValueError(f"span bounds must rise from the header's end: {list(bounds)[:4]}")
        self._bounds = bounds
        self._next = 1  # the end of the span being summed is bounds[_next]
        self._pos = bounds[0]
        self._crc = 0
        self.crcs: list[int] = []

    def __call__(self, view: memoryview, start: int, end: int) -> None:
        """Fold in the block bytes ``view[start:end]`` (the next ones after those folded)."""
        if start != self._pos or end > self._bounds[-1]:
            raise ValueError(f"SpanSummer: bytes {start}..{end} do not follow {self._pos}")
        bounds, crc, i = self._bounds, self._crc, self._next
        while start < end:
            stop = bounds[i]
            piece = stop if stop < end else end
            crc = crc32c(view[start:piece], crc)
            start = piece
            if piece == stop:
                self.crcs.append(crc)
                crc = 0
                i += 1
        self._crc, self._next, self._pos = crc, i, end

    def finish(self, block: Buffer) -> tuple[int, list[int]]:
        """The block's CRC32C and its spans', once every byte up to the block's end was
        folded in; ``block`` is the finished block (its header is summed here)."""
        bounds = self._bounds
        if self._pos != bounds[-1]:
            raise ValueError(
                f"SpanSummer: summed up to {self._pos}, the block ends at {bounds[-1]}"
            )
        head = crc32c(memoryview(block)[: bounds[0]])
        lengths = (b - a for a, b in pairwise(bounds))
        return crc32c_concat(zip(self.crcs, lengths, strict=True), head), self.crcs


def encode_span_crcs(crcs: Sequence[int]) -> ExtensionSection:
    """The tagged section holding ``crcs`` (not critical: a reader that does not know it can
    read the object without it)."""
    payload = U32.pack(len(crcs)) + b"".join(U32.pack(c & 0xFFFFFFFF) for c in crcs)
    return ExtensionSection(TAG_SPAN_CRC32C, payload)


def decode_span_crcs(section: ExtensionSection, expected: int) -> tuple[int, ...]:
    """The CRC32Cs of a span section, which must hold ``expected`` of them."""
    payload = section.payload
    if len(payload) < U32.size:
        raise CorruptDataError("span CRC32C section is shorter than its count")
    (count,) = U32.unpack_from(payload, 0)
    if count != expected or len(payload) != U32.size * (1 + count):
        raise CorruptDataError(
            f"span CRC32C section holds {count} CRC32Cs in {len(payload)} bytes, the index "
            f"has {expected} spans"
        )
    return tuple(U32.unpack_from(payload, U32.size * (1 + i))[0] for i in range(count))


def _index_spans(index: OffloadIndex) -> list[tuple[int, int]]:
    ext = index.extension
    points = [offset for _, offset in ext.fine_offsets] if ext is not None else []
    spans: list[tuple[int, int]] = []
    for block in range(index.block_count):
        start, end = index.block_span(block)
        lo = bisect.bisect_right(points, start)
        hi = bisect.bisect_left(points, end)
        spans += span_cuts(start, start + index.data_header_length, end, points[lo:hi])
    return spans


@dataclass(frozen=True)
class SpanChecks:
    """The spans of a data object and their recorded CRC32Cs."""

    starts: tuple[int, ...]
    ends: tuple[int, ...]
    crcs: tuple[int, ...]

    @classmethod
    def of(cls, index: OffloadIndex) -> SpanChecks | None:
        """The index's span checks, or None when its extension has no span section."""
        ext = index.extension
        section = ext.section(TAG_SPAN_CRC32C) if ext is not None else None
        if section is None:
            return None
        spans = _index_spans(index)
        crcs = decode_span_crcs(section, len(spans))
        return cls(tuple(s for s, _ in spans), tuple(e for _, e in spans), crcs)

    def at(self, offset: int) -> int | None:
        """The number of the span starting exactly at ``offset``, else None."""
        i = bisect.bisect_left(self.starts, offset)
        return i if i < len(self.starts) and self.starts[i] == offset else None

    def containing(self, offset: int) -> int:
        """The number of the span holding ``offset``."""
        return max(0, bisect.bisect_right(self.starts, offset) - 1)
