"""Cutting the wanted entries out of one fetched buffer, for a read: as entry tuples or as one
packed batch. Pure: bytes in, values out.

A sequential read (``ReadHandle``) holds the bytes from the current position on in one
``bytes`` buffer and hands them to a *cut*: every whole entry in ``buf[at:limit]`` with the
expected ids, up to ``last_id``, comes out in one call (C when built), and the cut says where
it stopped. Three cuts share that signature:

* :func:`cut_entries`: ``entry_type(entry_id, payload)`` tuples, made one at a time as they are
  consumed (``iter_entries``);
* :func:`cut_packed`: one :class:`~formats.block.PackedEntries` (payloads back to back plus
  int32 offsets, no object per entry: ``iter_packed``);
* :func:`cut_spans`: one :class:`~formats.spans.SpanEntries` (where each payload lies in the
  buffer, no copy at all: ``iter_spans``).

All three *learn* offsets for the offsets cache the same way: every entry starting at an
object offset (``base + buffer index``) at or after ``learn_next`` is appended to ``learned``
as ``(entry id, object offset)``, and ``learn_next`` moves ``learn_interval`` bytes past it.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from formats.block import PackedEntries
from formats.framing import iter_span_entries, pack_entries, span_entries
from formats.spans import EntrySpans, SpanEntries

__all__ = ["Cut", "cut_entries", "cut_packed", "cut_spans"]

T = TypeVar("T")

#: (buf, at, limit, first_id, last_id, base, learn_next, learn_interval, learned)
#: -> (batch, stop index, next id, learn_next)
Cut = Callable[
    [bytes | memoryview, int, int, int, int, int, int, int, list[tuple[int, int]]],
    tuple[T, int, int, int],
]


def cut_entries(entry_type: type[Any]) -> Cut[Iterator[Any]]:
    """A cut returning an iterator of ``entry_type(entry_id, payload)`` (a two-field
    NamedTuple): the entries are found and checked by the span walk when the cut is made, and
    each is made only when the iterator reaches it (:data:`~formats.framing.iter_span_entries`).
    The C iterator recycles the entries (and payloads) a caller has dropped, so a loop that
    keeps nothing makes no allocation per entry but its id."""

    def cut(
        buf: bytes | memoryview, at: int, limit: int, first_id: int, *rest: Any
    ) -> tuple[Iterator[Any], int, int, int]:
        # rest: last_id, base, learn_next, learn_interval, learned
        starts, lengths, count, stop, learn_next = span_entries(buf, at, limit, first_id, *rest)
        spans = memoryview(starts).cast("q"), memoryview(lengths).cast("q")  # no copy
        entries = iter_span_entries(buf, *spans, first_id, entry_type)
        return entries, stop, first_id + count, learn_next

    return cut


def _walk_cut(
    walk: Callable[..., tuple[bytes, bytes, int, int, int]],
    make: Callable[[int, int, bytes, bytes, bytes | memoryview], T],
) -> Cut[T]:
    """A cut from a walk (:data:`pack_entries` or :data:`span_entries`: one pass, C when
    built) and what makes its batch from (first id, count, its two outputs, the buffer)."""

    def cut(
        buf: bytes | memoryview, at: int, limit: int, first_id: int, *rest: Any
    ) -> tuple[T, int, int, int]:
        # rest: last_id, base, learn_next, learn_interval, learned
        a, b, count, stop, learn_next = walk(buf, at, limit, first_id, *rest)
        return make(first_id, count, a, b, buf), stop, first_id + count, learn_next

    return cut


def _span_entries(
    first: int, count: int, starts: bytes, lengths: bytes, buf: bytes | memoryview
) -> SpanEntries:
    return SpanEntries(first, EntrySpans(buf, array("q", starts), array("q", lengths)))


#: a cut returning one :class:`PackedEntries` (payloads copied back to back)
cut_packed: Cut[PackedEntries] = _walk_cut(
    pack_entries, lambda first, count, data, offsets, _: PackedEntries(first, count, data, offsets)
)
#: a cut returning one :class:`SpanEntries` over the buffer itself (no copy)
cut_spans: Cut[SpanEntries] = _walk_cut(span_entries, _span_entries)
