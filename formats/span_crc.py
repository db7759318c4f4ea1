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
from formats.errors import CorruptDataError
from formats.extension import TAG_SPAN_CRC32C, ExtensionSection, crc32c
from formats.index import OffloadIndex
from formats.wire import U32

__all__ = [
    "SpanChecks",
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
