"""The writer's reading of a ledger: every entry's length before the plan
(:func:`entry_lengths_of`), then the entries in order, in checked batches
(:class:`LedgerEntries`).

A batch comes from ``reader.read_spans`` when the reader has that optional method
(:class:`~offloader.ledgers.base.SpanLedgerReader`: one buffer and two ``array('q')``, framed
as :class:`~formats.spans.SpanBatch` runs, the lengths compared with the plan as one array),
else from ``reader.read`` (one object per payload). Both paths raise the same
:class:`~offloader.errors.IndexInconsistentError` messages when the ledger changed after it
was planned, and give the block writer the same bytes.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Iterator, Sequence

from formats.block import Batch, Buffer
from formats.spans import EntrySpans, SpanBatch
from offloader.errors import IndexInconsistentError
from offloader.ledgers.base import LedgerReader

__all__ = ["LedgerEntries", "entry_lengths_of"]


def entry_lengths_of(reader: LedgerReader, batch: int) -> list[int]:
    """Every entry's payload length: ``reader.entry_lengths()`` if it has one, else a pass
    reading the ledger in batches of ``batch`` entries (with ``read_spans`` when the reader
    has it: the same checks, no object per entry)."""
    fast = getattr(reader, "entry_lengths", None)
    if callable(fast):
        return list(map(int, fast()))
    read_spans = getattr(reader, "read_spans", None)
    lengths: list[int] = []
    last = reader.last_entry_id
    first = 0
    while first <= last:
        stop = min(first + batch - 1, last)
        if callable(read_spans):
            got: Sequence[int] = read_spans(first, stop).lengths
        else:
            got = list(map(len, reader.read(first, stop)))
        if len(got) != stop - first + 1:
            raise IndexInconsistentError(
                f"ledger {reader.ledger_id}: read({first}, {stop}) returned {len(got)} entries"
            )
        lengths.extend(got)
        first = stop + 1
    return lengths


class LedgerEntries:
    """Entries of a ledger read in order, in batches, each checked against the planned
    length (a ledger that changes between planning and reading is refused). Batches come from
    ``reader.read_spans`` when the reader has it (framed as :class:`SpanBatch` runs, the
    lengths compared as one int64 array), else from ``reader.read``."""

    def __init__(self, reader: LedgerReader, lengths: Sequence[int], batch: int) -> None:
        self._reader = reader
        self._lengths = lengths
        self._batch = batch
        read_spans = getattr(reader, "read_spans", None)
        self._read_spans: Callable[[int, int], EntrySpans] | None = (
            read_spans if callable(read_spans) else None
        )
        self._planned = array("q", lengths) if self._read_spans is not None else None
        self._buffer: Sequence[Buffer] = ()
        self._spans: EntrySpans | None = None
        self._buffer_count = 0
        self._buffer_first = 0
        self.next_id = 0
        self.payload_bytes = 0

    def batches(self, count: int) -> Iterator[Batch]:
        """The next ``count`` payloads, as runs of the batches read (lengths are checked a
        batch at a time); the caller frames each run in one call."""
        remaining = count
        while remaining:
            i = self.next_id - self._buffer_first
            if i >= self._buffer_count:
                self._fill(self.next_id)
                i = 0
            n = min(remaining, self._buffer_count - i)
            chunk: Batch
            if self._spans is not None:
                chunk = SpanBatch(self._spans, i, n)
            elif i or n != len(self._buffer):
                chunk = self._buffer[i : i + n]
            else:
                chunk = self._buffer
            self.next_id += n
            remaining -= n
            yield chunk

    def _fill(self, first: int) -> None:
        last = min(first + self._batch - 1, len(self._lengths) - 1)
        if self._read_spans is not None and self._planned is not None:
            spans = self._read_spans(first, last)
            self._check(first, last, spans.count, spans.lengths, self._planned[first : last + 1])
            self._spans = spans
            self._buffer_count = spans.count
        else:
            got = self._reader.read(first, last)
            actual = list(map(len, got))
            self._check(first, last, len(got), actual, self._lengths[first : last + 1])
            self._buffer = got
            self._buffer_count = len(got)
        self._buffer_first = first

    def _check(
        self,
        first: int,
        last: int,
        got: int,
        actual: Sequence[int],
        planned: Sequence[int],
    ) -> None:
        """Refuse a batch whose count or lengths (``actual``) are not the ``planned`` ones;
        count its payload bytes."""
        if got != last - first + 1:
            raise IndexInconsistentError(
                f"ledger {self._reader.ledger_id}: read({first}, {last}) returned {got} "
                "entries: the ledger changed during the offload"
            )
        if actual != planned:
            entry_id = first + next(
                i for i, (a, b) in enumerate(zip(actual, planned, strict=True)) if a != b
            )
            raise IndexInconsistentError(
                f"ledger {self._reader.ledger_id}: entry {entry_id} is "
                f"{actual[entry_id - first]} bytes now, {planned[entry_id - first]} when the "
                "offload was planned: the ledger changed during the offload"
            )
        self.payload_bytes += sum(actual)
