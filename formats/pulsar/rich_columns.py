"""The rich columns of ``pulsar-messages`` rows staged as Arrow buffers: the Python twin of
``formats/_pulsar_rich.h`` (the same bytes, so either path may append to the same staging).

Ten bytearrays (:func:`rich_buffers`), native byte order: ordering_key offsets (int32), its
bytes, its validity (int8); properties: the map's offsets (int32, into its entries), key
offsets (int32), key bytes (UTF-8), value offsets (int32), value bytes (UTF-8); event_time
(int64 microseconds, 0 when NULL) and its validity (int8). Each column is lazy: its bytearrays
stay empty while no staged row has one (an ordering key, at least one property, an event time
that is not 0 or None); the first row that has one fills in the rows staged before it (NULL,
or an empty map). An event time past Spark's range is NULL. Properties keep their order,
duplicate keys included. Pure: no I/O, no pyarrow (the reader builds the Arrow arrays).
"""

from __future__ import annotations

import sys
from array import array
from collections.abc import Sequence
from itertools import accumulate

__all__ = [
    "MAX_SPARK_MS",
    "RICH_COLUMNS",
    "append_rich",
    "last_offset",
    "rich_buffers",
]

#: how many bytearrays the rich columns take
RICH_COLUMNS = 10
#: the latest time (ms) a Spark timestamp (int64 microseconds) holds; later ones are NULL
MAX_SPARK_MS = (1 << 63) // 1000 - 1
_MAX_I32 = (1 << 31) - 1

Props = tuple[tuple[str, str], ...]


def rich_buffers() -> tuple[bytearray, ...]:
    """Ten empty bytearrays: no row staged has an ordering key, a property or an event time."""
    return tuple(bytearray() for _ in range(RICH_COLUMNS))


def last_offset(offsets: bytearray) -> int:
    """The last int32 of a staged offsets bytearray (0 when it has not started)."""
    return int.from_bytes(offsets[-4:], sys.byteorder, signed=True) if offsets else 0


def _offsets(out: bytearray, lengths: Sequence[int], before: int) -> None:
    """Running int32 offsets of ``lengths`` appended to ``out`` (started with the 0 and
    ``before`` more when empty)."""
    if not out:
        out += bytes(4 * (before + 1))
    ends = accumulate(lengths, initial=last_offset(out))
    next(ends)
    out += array("i", ends)


def append_rich(
    rich: tuple[bytearray, ...],
    before: int,
    ordering: Sequence[bytes | None],
    props: Sequence[Props],
    events: Sequence[int | None],
) -> bool:
    """Append rows (one ordering key, properties tuple and event time each; ``before`` rows
    staged already) to the ten bytearrays. False, with nothing appended, when an int32 offset
    would pass 2**31 - 1 (the caller decides: the list path raises the typed error)."""
    has_ord = bool(rich[0]) or any(o is not None for o in ordering)
    has_props = bool(rich[3]) or any(props)
    has_event = bool(rich[9]) or any(events)
    if has_ord:
        ord_bytes = [b"" if o is None else o for o in ordering]
        if last_offset(rich[0]) + sum(map(len, ord_bytes)) > _MAX_I32:
            return False
    if has_props:
        keys = [k.encode() for row in props for k, _v in row]
        values = [v.encode() for row in props for _k, v in row]
        if (
            last_offset(rich[3]) + len(keys) > _MAX_I32
            or last_offset(rich[4]) + sum(map(len, keys)) > _MAX_I32
            or last_offset(rich[6]) + sum(map(len, values)) > _MAX_I32
        ):
            return False
    if has_ord:
        fill = 0 if rich[2] else before
        _offsets(rich[0], list(map(len, ord_bytes)), before)
        rich[1].extend(b"".join(ord_bytes))
        rich[2].extend(bytes(fill) + bytes(o is not None for o in ordering))
    if has_props:
        _offsets(rich[3], [len(row) for row in props], before)
        _offsets(rich[4], list(map(len, keys)), 0)
        rich[5].extend(b"".join(keys))
        _offsets(rich[6], list(map(len, values)), 0)
        rich[7].extend(b"".join(values))
    if has_event:
        fill = 0 if rich[9] else before
        micros = [e * 1000 if e and e <= MAX_SPARK_MS else 0 for e in events]
        rich[8].extend(bytes(8 * fill) + array("q", micros).tobytes())
        rich[9].extend(bytes(fill) + bytes(bool(e and e <= MAX_SPARK_MS) for e in events))
    return True
