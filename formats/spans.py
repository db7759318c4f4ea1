"""Entry payloads as spans of one buffer: :class:`EntrySpans` (a batch a ledger source hands
the writer in one piece), :class:`SpanBatch` (a run of a batch's spans, the way
:meth:`formats.block.BlockWriter.write_block_batches` takes them) and :class:`SpanEntries`
(entries read back as spans of a fetched buffer: ``ReadHandle.iter_spans``).

A batch of ``n`` entries is one contiguous buffer plus two ``array('q')`` of ``n`` payload
starts and lengths, so a source needs no Python object per entry; the framing loop
(:data:`formats.framing.frame_spans`) checks every span against the buffer before copying it.
Pure: no I/O.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

__all__ = ["EntrySpans", "SpanBatch", "SpanEntries"]


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


@dataclass(frozen=True)
class SpanEntries:
    """Consecutive entries ``first_entry_id ..`` as spans of the buffer they were read into
    (no copy): entry ``first_entry_id + i`` is ``spans.payload(i)``."""

    first_entry_id: int
    spans: EntrySpans

    def __len__(self) -> int:
        return self.spans.count

    @property
    def count(self) -> int:
        return self.spans.count

    @property
    def last_entry_id(self) -> int:
        """Id of the last entry (``first_entry_id - 1`` when empty)."""
        return self.first_entry_id + self.spans.count - 1

    @property
    def payload_bytes(self) -> int:
        """Sum of the payload sizes."""
        return sum(self.spans.lengths)

    def payload(self, entry_id: int) -> memoryview:
        """The payload of entry ``entry_id`` (one of this batch's ids), a view of the buffer."""
        i = entry_id - self.first_entry_id
        if not 0 <= i < self.spans.count:
            raise IndexError(
                f"entry {entry_id} is not in this batch ({self.first_entry_id}.."
                f"{self.last_entry_id})"
            )
        return self.spans.payload(i)

    def payloads(self) -> Iterator[memoryview]:
        """Every payload, in id order, as views of the buffer."""
        view = memoryview(self.spans.data).cast("B")
        for start, length in zip(self.spans.starts, self.spans.lengths, strict=True):
            yield view[start : start + length]
