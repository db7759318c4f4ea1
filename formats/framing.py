"""The per-entry loops of the block format: framing entries into a block and cutting them out.

Entries are framed as ``[length i32 BE][entry id i64 BE][payload]`` (pulsar-format-facts §2).
These two loops run once per entry, so for small entries they are most of the CPU time of an
offload or a sequential read. Each has a C version in ``formats/_speedups.c`` (built by
``pip install``, about 10x faster) and a pure-Python twin here, with the same signature and
results; :data:`frame_entries` and :data:`parse_entries` are the C ones when the extension is
built, else the Python ones (``LEDGER_OFFLOADER_PURE_PYTHON=1`` forces Python). The tests run
both implementations on the same inputs.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

from formats.wire import ENTRY_HEADER, ENTRY_HEADER_LEN

__all__ = [
    "SPEEDUPS",
    "frame_entries",
    "frame_entries_py",
    "parse_entries",
    "parse_entries_py",
]

_PACK = ENTRY_HEADER.pack_into
_UNPACK = ENTRY_HEADER.unpack_from


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


def parse_entries_py(
    buf: bytes,
    off: int,
    limit: int,
    first_id: int,
    last_id: int,
    entry_type: type[tuple[Any, ...]],
    base: int,
    learn_next: int,
    learn_interval: int,
    learned: list[tuple[int, int]],
) -> tuple[list[Any], int, int, int]:
    """Consecutive entries of ``buf`` from ``off`` as ``entry_type(id, payload)``: stops at
    ``last_id``, at a header that does not fit before ``limit``, a negative length (padding),
    an unexpected id, or an entry ending past ``limit``. An entry at object offset
    ``base + off >= learn_next`` is recorded in ``learned`` as (id, object offset) and moves
    ``learn_next`` on by ``learn_interval``. Returns (entries, off, next id, learn_next)."""
    if off < 0:
        raise ValueError("parse_entries: negative offset")
    limit = min(limit, len(buf)) - ENTRY_HEADER_LEN
    cur_id = first_id
    payloads: list[bytes] = []
    append = payloads.append
    while cur_id <= last_id and off <= limit:
        length, entry_id = _UNPACK(buf, off)
        if length < 0 or entry_id != cur_id or length > limit - off:
            break
        if base + off >= learn_next:
            learned.append((cur_id, base + off))
            learn_next = base + off + learn_interval
        off += ENTRY_HEADER_LEN
        append(buf[off : off + length])
        off += length
        cur_id += 1
    new = tuple.__new__
    pairs = zip(range(first_id, cur_id), payloads, strict=True)
    entries = [new(entry_type, pair) for pair in pairs]
    return entries, off, cur_id, learn_next


FrameEntries = Callable[[Any, int, int, Sequence[Any], int], tuple[int, int]]
ParseEntries = Callable[..., tuple[list[Any], int, int, int]]


def _pick() -> tuple[FrameEntries, ParseEntries, bool]:
    if os.environ.get("LEDGER_OFFLOADER_PURE_PYTHON", "") not in ("", "0"):
        return frame_entries_py, parse_entries_py, False
    try:
        from formats import _speedups  # type: ignore[attr-defined]
    except ImportError:
        return frame_entries_py, parse_entries_py, False
    return _speedups.frame_entries, _speedups.parse_entries, True


frame_entries, parse_entries, SPEEDUPS = _pick()
