"""The per-entry loops of the block format: framing entries into a block (from payload
objects, or from spans of one buffer), cutting them out as entry objects, packing a block's
payloads the way Arrow lays out a binary column, the framed prefix sums the block planner
searches, and the check of a batch of local ledger records into spans.

Entries are framed as ``[length i32 BE][entry id i64 BE][payload]`` (spec/block-format.md §2).
These loops run once per entry, so for small entries they are most of the CPU time of an
offload, a sequential read or a Spark scan. Each has a C version in ``formats/_speedups.c``
(built by ``pip install``, about 10x faster) and a pure-Python twin here, with the same
signature and results; :data:`frame_entries`, :data:`frame_spans`, :data:`pack_entries`,
:data:`span_entries`, :data:`iter_span_entries`, :data:`framed_prefix` and :data:`record_spans`
are the C ones when the extension is built, else the Python ones
(``LEDGER_OFFLOADER_PURE_PYTHON=1`` forces Python). The tests run both on the same inputs.

:func:`record_spans_py` knows one thing that is not the block format: the record of a local
ledger file (``length u32 BE | crc32c u32 BE | payload``, the CRC over the 4 length bytes then
the payload; :mod:`offloader.ledgers.fileformat` owns that format), so that a batch of records
is checked and turned into :class:`~formats.spans.EntrySpans` in one C pass.
"""

from __future__ import annotations

import os
import struct
from array import array
from collections.abc import Callable, Iterator, Sequence
from itertools import accumulate, repeat
from operator import add
from typing import Any

import crc32c as _crc32c

from formats.wire import ENTRY_HEADER, ENTRY_HEADER_LEN

__all__ = [
    "NO_LIMIT",
    "SPEEDUPS",
    "frame_entries",
    "frame_entries_py",
    "frame_spans",
    "frame_spans_py",
    "framed_prefix",
    "framed_prefix_py",
    "iter_span_entries",
    "iter_span_entries_py",
    "pack_entries",
    "pack_entries_py",
    "pack_into",
    "pack_into_py",
    "record_spans",
    "record_spans_py",
    "scratch_bytearray",
    "span_entries",
    "span_entries_py",
    "zeroed_bytearray",
    "zeroed_bytearray_py",
]

_PACK = ENTRY_HEADER.pack_into
_UNPACK = ENTRY_HEADER.unpack_from
#: an entry id / object offset no entry reaches (the largest signed 64-bit integer): the
#: default last_id and learn_next of the walks, "no limit" and "learn nothing"
NO_LIMIT = (1 << 63) - 1


def frame_entries_py(
    buf: Any, pos: int, first_entry_id: int, payloads: Sequence[Any], limit: int
) -> tuple[int, int]:
    """Write each payload framed into the writable buffer ``buf`` from ``pos``; stop before
    the first that would end past ``limit``. Returns (position after the last entry written,
    entries written)."""
    if pos < 0 or limit > len(buf) or pos > limit:
        raise ValueError("frame_entries: pos/limit outside the buffer")
    view = memoryview(buf).cast("B")
    count = 0
    for payload in payloads:
        size = len(payload) if isinstance(payload, bytes) else memoryview(payload).nbytes
        end = pos + ENTRY_HEADER_LEN + size
        if end > limit or size > 0x7FFFFFFF:
            break
        _PACK(view, pos, size, first_entry_id + count)
        view[pos + ENTRY_HEADER_LEN : end] = payload
        pos = end
        count += 1
    return pos, count


def _int64s(obj: Any, what: str) -> memoryview:
    """``obj`` as a view of 8-byte integers (an ``array('q')``), else TypeError."""
    view = memoryview(obj)
    if view.itemsize != 8 or view.format.lstrip("@=") not in ("q", "Q", "l", "L"):
        raise TypeError(f"{what} must be an array of 8-byte integers ('q')")
    return view


def frame_spans_py(
    buf: Any,
    pos: int,
    first_entry_id: int,
    data: Any,
    starts: Any,
    lengths: Any,
    index: int,
    count: int,
    limit: int,
) -> tuple[int, int]:
    """:func:`frame_entries_py` for spans ``index .. index + count - 1`` of ``data`` (span j
    is ``data[starts[j] : starts[j] + lengths[j]]``, ``starts``/``lengths`` ``array('q')``):
    stops before the first that would end past ``limit``; a span outside ``data`` raises
    ValueError. Returns (position after the last entry written, entries written)."""
    src = memoryview(data).cast("B")
    starts, lengths = _int64s(starts, "starts"), _int64s(lengths, "lengths")
    if len(starts) != len(lengths):
        raise ValueError("frame_spans: starts and lengths differ in length")
    if pos < 0 or limit > len(buf) or pos > limit:
        raise ValueError("frame_spans: pos/limit outside the buffer")
    if index < 0 or count < 0 or index > len(starts) or count > len(starts) - index:
        raise ValueError("frame_spans: index/count outside the spans")
    view = memoryview(buf).cast("B")
    available = len(src)
    done = 0
    for j in range(index, index + count):
        start, size = starts[j], lengths[j]
        if start < 0 or size < 0 or start > available or size > available - start:
            raise ValueError(f"frame_spans: span {j} is outside the data")
        end = pos + ENTRY_HEADER_LEN + size
        if size > 0x7FFFFFFF or end > limit:
            break
        _PACK(view, pos, size, first_entry_id + done)
        view[pos + ENTRY_HEADER_LEN : end] = src[start : start + size]
        pos = end
        done += 1
    return pos, done


def _walk_py(
    name: str,
    buf: Any,
    off: int,
    limit: int,
    first_id: int,
    last_id: int,
    base: int,
    learn_next: int,
    learn_interval: int,
    learned: list[tuple[int, int]] | None,
) -> tuple[memoryview, array[int], array[int], int, int]:
    """The walk of pack_entries and span_entries: (the bytes, payload starts, lengths, where
    the entries stop, learn_next)."""
    view = memoryview(buf).cast("B")
    if off < 0 or limit > len(view) or off > limit:
        raise ValueError(f"{name}: off/limit outside the buffer")
    pos, cur_id = off, first_id
    starts, lengths = array("q"), array("q")
    while cur_id <= last_id and limit - pos >= ENTRY_HEADER_LEN and not view[pos] & 0x80:
        length, entry_id = _UNPACK(view, pos)
        if entry_id != cur_id or length > limit - pos - ENTRY_HEADER_LEN:
            break
        if learned is not None and base + pos >= learn_next:
            learned.append((cur_id, base + pos))
            learn_next = base + pos + learn_interval
        starts.append(pos + ENTRY_HEADER_LEN)
        lengths.append(length)
        pos += ENTRY_HEADER_LEN + length
        cur_id += 1
    return view, starts, lengths, pos, learn_next


def pack_entries_py(
    buf: Any,
    off: int,
    limit: int,
    first_id: int,
    last_id: int = NO_LIMIT,
    base: int = 0,
    learn_next: int = NO_LIMIT,
    learn_interval: int = 0,
    learned: list[tuple[int, int]] | None = None,
) -> tuple[bytes, bytes, int, int, int]:
    """The consecutive entries of ``buf[off:limit]`` (ids from ``first_id``, up to
    ``last_id``) packed as an Arrow binary column: (payloads back to back, count + 1 native
    int32 offsets, count, where the entries stop: ``limit``, after ``last_id``, padding, or
    bytes that are not the next entry, ``learn_next``). With a ``learned`` list, every entry
    at object offset ``base + position >= learn_next`` is recorded in it as (id, object
    offset) and moves ``learn_next`` on by ``learn_interval``."""
    args = (buf, off, limit, first_id, last_id, base, learn_next, learn_interval, learned)
    view, starts, lengths, stop, learn_next = _walk_py("pack_entries", *args)
    if sum(lengths) > 0x7FFFFFFF:
        raise OverflowError("pack_entries: over 2 GiB of payload")
    offsets = array("i", [0])
    offsets.extend(accumulate(lengths))
    data = b"".join(view[a : a + n] for a, n in zip(starts, lengths, strict=True))
    return data, offsets.tobytes(), len(starts), stop, learn_next


def span_entries_py(
    buf: Any,
    off: int,
    limit: int,
    first_id: int,
    last_id: int = NO_LIMIT,
    base: int = 0,
    learn_next: int = NO_LIMIT,
    learn_interval: int = 0,
    learned: list[tuple[int, int]] | None = None,
) -> tuple[bytes, bytes, int, int, int]:
    """:func:`pack_entries_py` without the copy: (count native int64 payload starts in
    ``buf``, count native int64 lengths, count, stop, learn_next)."""
    args = (buf, off, limit, first_id, last_id, base, learn_next, learn_interval, learned)
    _, starts, lengths, stop, learn_next = _walk_py("span_entries", *args)
    return starts.tobytes(), lengths.tobytes(), len(starts), stop, learn_next


def iter_span_entries_py(
    buf: Any, starts: Any, lengths: Any, first_id: int, entry_type: type[Any]
) -> Iterator[Any]:
    """The entries at the spans :func:`span_entries_py` found, made one at a time:
    ``entry_type(first_id + i, payload bytes)``. The spans are checked now (ValueError for one
    outside ``buf``); the C version also recycles the entries and payloads the caller dropped."""
    if not (isinstance(entry_type, type) and issubclass(entry_type, tuple)):
        raise TypeError("entry_type must be a plain tuple subclass")
    view = memoryview(buf).cast("B")
    at, size = _int64s(starts, "starts"), _int64s(lengths, "lengths")
    if len(at) != len(size):
        raise ValueError("iter_span_entries: starts and lengths differ in count")
    for i, (start, length) in enumerate(zip(at, size, strict=True)):
        if start < 0 or length < 0 or start > len(view) or length > len(view) - start:
            raise ValueError(f"iter_span_entries: span {i} lies outside the buffer")
    if first_id > NO_LIMIT - len(at):
        raise OverflowError("iter_span_entries: entry ids past 2**63 - 1")
    new = tuple.__new__
    return (
        new(entry_type, (first_id + i, bytes(view[s : s + n])))
        for i, (s, n) in enumerate(zip(at.tolist(), size.tolist(), strict=True))
    )


def pack_into_py(
    out: Any, out_pos: int, offsets: Any, index: int, buf: Any, off: int, limit: int, first_id: int
) -> tuple[int, int, int]:
    """:func:`pack_entries_py` into buffers the caller owns: payloads copied to the writable
    ``out`` from ``out_pos``, their end positions written as native int32 to
    ``offsets[index + 1 ..]``; stops like it, and before an entry either buffer has no room
    for. Returns (position in ``out`` after the last payload, count, where the entries stop)."""
    dst = memoryview(out).cast("B")
    ends = memoryview(offsets).cast("B").cast("i")
    view = memoryview(buf).cast("B")
    if not (0 <= off <= limit <= len(view) and 0 <= out_pos <= min(len(dst), 0x7FFFFFFF)) or not (
        0 <= index < len(ends)
    ):
        raise ValueError("pack_into: a position outside its buffer")
    room = min(len(dst), 0x7FFFFFFF) - out_pos
    pos, cur_id, count, total = off, first_id, 0, 0
    while pos < limit and index + count + 1 < len(ends):
        if limit - pos < ENTRY_HEADER_LEN or view[pos] & 0x80:
            break
        length, entry_id = _UNPACK(view, pos)
        if entry_id != cur_id or length > limit - pos - ENTRY_HEADER_LEN or length > room - total:
            break
        start = out_pos + total
        dst[start : start + length] = view[pos + ENTRY_HEADER_LEN : pos + ENTRY_HEADER_LEN + length]
        total += length
        count += 1
        ends[index + count] = out_pos + total
        pos += ENTRY_HEADER_LEN + length
        cur_id += 1
    return out_pos + total, count, pos


def framed_prefix_py(lengths: Sequence[int]) -> tuple[bytes, int, int]:
    """(``len(lengths) + 1`` native int64 prefix sums of the framed entry sizes, as bytes,
    prefix[i] = 12 * i + sum(lengths[:i]); the smallest and largest length, 0 and 0 if none)."""
    prefix = array("q", [0])
    prefix.extend(accumulate(map(add, lengths, repeat(ENTRY_HEADER_LEN))))
    if not lengths:
        return prefix.tobytes(), 0, 0
    return prefix.tobytes(), min(lengths), max(lengths)


_RECORD = struct.Struct(">II")  # a local ledger record's header: length, crc32c
_RECORD_HEADER_LEN = _RECORD.size


def record_spans_py(
    buf: Any, offsets: Any, base: int, end: int
) -> tuple[bytes, bytes, int, str | None]:
    """Check the local ledger records held in ``buf`` (which starts at file offset ``base``):
    record i starts at file offset ``offsets[i]`` and ends where record i + 1 starts, the
    last at ``end``. Returns (payload starts in ``buf``, payload lengths: native int64 bytes;
    the index of the first bad record or -1; why it is bad: "header" (not inside ``buf``),
    "length" (the field does not match the record's end, or the record runs past ``buf``),
    "crc", or None). The arrays stop before the bad record."""
    view = memoryview(buf).cast("B")
    offs = _int64s(offsets, "offsets")
    size = len(view)
    starts, lengths = array("q"), array("q")
    n = len(offs)
    bad, reason = -1, None
    for i in range(n):
        at = offs[i]
        following = offs[i + 1] if i + 1 < n else end
        if base < 0 or at < base or at - base > size - _RECORD_HEADER_LEN:
            bad, reason = i, "header"
            break
        rel = at - base
        length, crc = _RECORD.unpack_from(view, rel)
        if (
            following < base
            or following - base > size
            or length != following - at - _RECORD_HEADER_LEN
        ):
            bad, reason = i, "length"
            break
        payload = view[rel + _RECORD_HEADER_LEN : rel + _RECORD_HEADER_LEN + length]
        if _crc32c.crc32c(payload, _crc32c.crc32c(view[rel : rel + 4])) != crc:
            bad, reason = i, "crc"
            break
        starts.append(rel + _RECORD_HEADER_LEN)
        lengths.append(length)
    return starts.tobytes(), lengths.tobytes(), bad, reason


def zeroed_bytearray_py(size: int) -> bytearray:
    """``bytearray(size)`` (the C version zeroes it without holding the GIL)."""
    if size < 0:
        raise ValueError("zeroed_bytearray: negative size")
    return bytearray(size)


FrameEntries = Callable[[Any, int, int, Sequence[Any], int], tuple[int, int]]
PackEntries = Callable[..., tuple[bytes, bytes, int, int, int]]
FramedPrefix = Callable[[Sequence[int]], tuple[bytes, int, int]]
FrameSpans = Callable[[Any, int, int, Any, Any, Any, int, int, int], tuple[int, int]]
RecordSpans = Callable[[Any, Any, int, int], tuple[bytes, bytes, int, "str | None"]]
PackInto = Callable[[Any, int, Any, int, Any, int, int, int], tuple[int, int, int]]
IterSpanEntries = Callable[[Any, Any, Any, int, type[Any]], Iterator[Any]]


def _speedups() -> Any | None:
    """The C module, or None when it is not built or ``LEDGER_OFFLOADER_PURE_PYTHON`` is set."""
    if os.environ.get("LEDGER_OFFLOADER_PURE_PYTHON", "") not in ("", "0"):
        return None
    try:
        from formats import _speedups as c  # type: ignore[attr-defined]
    except ImportError:
        return None
    return c


_C = _speedups()
SPEEDUPS = _C is not None
frame_entries: FrameEntries = _C.frame_entries if _C else frame_entries_py
frame_spans: FrameSpans = _C.frame_spans if _C else frame_spans_py
pack_entries: PackEntries = _C.pack_entries if _C else pack_entries_py
span_entries: PackEntries = _C.span_entries if _C else span_entries_py
pack_into: PackInto = _C.pack_into if _C else pack_into_py
iter_span_entries: IterSpanEntries = _C.iter_span_entries if _C else iter_span_entries_py
framed_prefix: FramedPrefix = _C.framed_prefix if _C else framed_prefix_py
record_spans: RecordSpans = _C.record_spans if _C else record_spans_py
zeroed_bytearray: Callable[[int], bytearray] = _C.zeroed_bytearray if _C else zeroed_bytearray_py
#: a bytearray whose contents the caller overwrites entirely (C: not zeroed first)
scratch_bytearray: Callable[[int], bytearray] = _C.scratch_bytearray if _C else bytearray
