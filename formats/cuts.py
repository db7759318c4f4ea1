"""Cutting the wanted entries out of one fetched buffer, for a read: as entry tuples or as one
packed batch. Pure: bytes in, values out.

A sequential read (``ReadHandle``) holds the bytes from the current position on in one
``bytes`` buffer and hands them to a *cut*: every whole entry in ``buf[at:limit]`` with the
expected ids, up to ``last_id``, comes out in one call (C when built), and the cut says where
it stopped. Two cuts share that signature:

* :func:`cut_entries`: a list of ``entry_type(entry_id, payload)`` tuples (``iter_entries``);
* :func:`cut_packed`: one :class:`~formats.block.PackedEntries` (payloads back to back plus
  int32 offsets, no object per entry: ``iter_packed``);
* :func:`cut_spans`: one :class:`~formats.spans.SpanEntries` (where each payload lies in the
  buffer, no copy at all: ``iter_spans``).

Both also *learn* offsets for the offsets cache the same way: every entry starting at an
object offset (``base + buffer index``) at or after ``learn_next`` is appended to ``learned``
as ``(entry id, object offset)``, and ``learn_next`` moves ``learn_interval`` bytes past it.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable
from typing import Any, TypeVar

from formats.block import PackedEntries
from formats.framing import pack_entries, parse_entries, span_entries
from formats.spans import EntrySpans, SpanEntries

__all__ = ["Cut", "cut_entries", "cut_packed", "cut_spans"]

T = TypeVar("T")

#: (buf, at, limit, first_id, last_id, base, learn_next, learn_interval, learned)
#: -> (batch, stop index, next id, learn_next)
Cut = Callable[
    [bytes, int, int, int, int, int, int, int, list[tuple[int, int]]], tuple[T, int, int, int]
]


def cut_entries(entry_type: type[Any]) -> Cut[list[Any]]:
    """A cut returning a list of ``entry_type(entry_id, payload)`` (a two-field NamedTuple)."""

    def cut(
        buf: bytes,
        at: int,
        limit: int,
        first_id: int,
        last_id: int,
        base: int,
        learn_next: int,
        learn_interval: int,
        learned: list[tuple[int, int]],
    ) -> tuple[list[Any], int, int, int]:
        entries, stop, next_id, learn_next = parse_entries(
            buf,
            at,
            limit,
            first_id,
            last_id,
            entry_type,
            base,
            learn_next,
            learn_interval,
            learned,
        )
        return entries, stop, next_id, learn_next

    return cut


def cut_packed(
    buf: bytes,
    at: int,
    limit: int,
    first_id: int,
    last_id: int,
    base: int,
    learn_next: int,
    learn_interval: int,
    learned: list[tuple[int, int]],
) -> tuple[PackedEntries, int, int, int]:
    """A cut returning one :class:`PackedEntries` (one pass, in C when built)."""
    data, offsets, count, stop, learn_next = pack_entries(
        buf, at, limit, first_id, last_id, base, learn_next, learn_interval, learned
    )
    return PackedEntries(first_id, count, data, offsets), stop, first_id + count, learn_next


def cut_spans(
    buf: bytes,
    at: int,
    limit: int,
    first_id: int,
    last_id: int,
    base: int,
    learn_next: int,
    learn_interval: int,
    learned: list[tuple[int, int]],
) -> tuple[SpanEntries, int, int, int]:
    """A cut returning one :class:`SpanEntries` over ``buf`` itself (one pass, C when built)."""
    raw_starts, raw_lengths, count, stop, learn_next = span_entries(
        buf, at, limit, first_id, last_id, base, learn_next, learn_interval, learned
    )
    starts, lengths = array("q"), array("q")
    starts.frombytes(raw_starts)
    lengths.frombytes(raw_lengths)
    return (
        SpanEntries(first_id, EntrySpans(buf, starts, lengths)),
        stop,
        first_id + count,
        learn_next,
    )
