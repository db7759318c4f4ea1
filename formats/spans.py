"""Entry payloads as spans of one buffer: :class:`EntrySpans` (a batch a ledger source hands
the writer in one piece) and :class:`SpanBatch` (a run of a batch's spans, the way
:meth:`formats.block.BlockWriter.write_block_batches` takes them).

A batch of ``n`` entries is one contiguous buffer plus two ``array('q')`` of ``n`` payload
starts and lengths, so a source needs no Python object per entry; the framing loop
(:data:`formats.framing.frame_spans`) checks every span against the buffer before copying it.
Pure: no I/O.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass
from typing import Any

__all__ = ["EntrySpans", "SpanBatch"]


@dataclass(frozen=True, eq=False)
class EntrySpans:
    """Payloads ``0..count-1``: payload ``i`` is ``data[starts[i] : starts[i] + lengths[i]]``.

    ``data`` is any C-contiguous buffer (bytes, bytearray, memoryview...); ``starts`` and
    ``lengths`` are ``array('q')`` of the same length. Only those two facts are checked here
    (cheap); spans outside ``data`` are refused where they are read (:meth:`payload`, the
    framing loop).
    """

    data: Any
    starts: array[int]
    lengths: array[int]

    def __post_init__(self) -> None:
        for name in ("starts", "lengths"):
            value = getattr(self, name)
            if not isinstance(value, array) or value.typecode != "q":
                raise TypeError(f"EntrySpans.{name} must be an array('q')")
        if len(self.starts) != len(self.lengths):
            raise ValueError(
                f"EntrySpans: {len(self.starts)} starts but {len(self.lengths)} lengths"
            )

    @property
    def count(self) -> int:
        return len(self.starts)

    def payload(self, i: int) -> memoryview:
        """Payload ``i`` as a view of ``data`` (no copy); ValueError if its span is outside."""
        view = memoryview(self.data).cast("B")
        start, length = self.starts[i], self.lengths[i]
        if start < 0 or length < 0 or start + length > len(view):
            raise ValueError(f"EntrySpans: span {i} ({start}, {length}) is outside the data")
        return view[start : start + length]


@dataclass(frozen=True)
class SpanBatch:
    """Spans ``index .. index + count - 1`` of ``spans``: consecutive entries to frame."""

    spans: EntrySpans
    index: int
    count: int
