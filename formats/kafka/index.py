"""Kafka's segment indexes: ``.index`` (offset -> position) and ``.timeindex`` (time -> offset).

``.index`` entries are 8 bytes, big-endian ``relativeOffset i32 | position i32``; ``.timeindex``
entries are 12 bytes, ``timestamp i64 | relativeOffset i32`` (``OffsetIndex`` / ``TimeIndex``).
Both are sorted and strictly increasing in their key. An active segment's files are preallocated
with zeros; a tail of all-zero entries is read as unused space, as Kafka does.

:func:`build_indexes` writes them by Kafka's rule (``LogSegment.recover``): walking the batches,
an entry ``(batch last offset, batch position)`` is added before a batch once more than
``index.interval.bytes`` (4096) bytes were appended since the previous entry, with a time entry
``(max timestamp so far, its offset)`` when that timestamp grew; a closed segment's time index
ends with the segment's max timestamp (``onBecomeInactiveSegment``).
"""

from __future__ import annotations

import bisect
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from formats.kafka.batch import NO_TIMESTAMP, BatchHeader
from formats.kafka.errors import KafkaIndexError

Buffer = bytes | bytearray | memoryview

OFFSET_ENTRY: Final = struct.Struct(">ii")
TIME_ENTRY: Final = struct.Struct(">qi")
INDEX_INTERVAL_BYTES: Final = 4096


@dataclass(frozen=True)
class OffsetIndex:
    """A decoded ``.index``: absolute offsets and their byte positions, increasing."""

    base_offset: int
    offsets: tuple[int, ...]
    positions: tuple[int, ...]

    def lookup(self, offset: int) -> tuple[int, int]:
        """``(offset, position)`` of the last entry at or before ``offset``; the segment's
        start ``(base_offset, 0)`` when none is."""
        slot = bisect.bisect_right(self.offsets, offset) - 1
        if slot < 0:
            return self.base_offset, 0
        return self.offsets[slot], self.positions[slot]

    def lowest_offset_at(self, offset: int) -> int:
        """The lowest offset the batch at ``lookup(offset)``'s position can hold (one past the
        previous entry: entries name a batch's *last* offset), to size a read from there."""
        slot = bisect.bisect_right(self.offsets, offset) - 1
        return self.base_offset if slot < 1 else self.offsets[slot - 1] + 1

    def end_bound(self, offset: int) -> int | None:
        """A position at or past the end of the batch holding ``offset``: the entry after the
        first entry whose offset is at or above it (None: the segment's end)."""
        slot = bisect.bisect_left(self.offsets, offset)
        return self.positions[slot + 1] if slot + 1 < len(self.positions) else None

    def position_after(self, position: int) -> int | None:
        """The first entry position strictly above ``position`` (a place to cut a scan)."""
        slot = bisect.bisect_right(self.positions, position)
        return self.positions[slot] if slot < len(self.positions) else None

    def encode(self) -> bytes:
        return b"".join(
            OFFSET_ENTRY.pack(o - self.base_offset, p)
            for o, p in zip(self.offsets, self.positions, strict=True)
        )


@dataclass(frozen=True)
class TimeIndex:
    """A decoded ``.timeindex``: timestamps and the offsets they map to, increasing."""

    base_offset: int
    timestamps: tuple[int, ...]
    offsets: tuple[int, ...]

    def lookup(self, timestamp: int) -> tuple[int, int]:
        """``(timestamp, offset)`` of the last entry whose timestamp is at or before
        ``timestamp``; ``(-1, base_offset)`` when none is (Kafka's ``TimeIndex.lookup``)."""
        slot = bisect.bisect_right(self.timestamps, timestamp) - 1
        if slot < 0:
            return NO_TIMESTAMP, self.base_offset
        return self.timestamps[slot], self.offsets[slot]

    def encode(self) -> bytes:
        return b"".join(
            TIME_ENTRY.pack(t, o - self.base_offset)
            for t, o in zip(self.timestamps, self.offsets, strict=True)
        )


def _entries(data: Buffer, size: int, what: str, source: str | None) -> int:
    if len(data) % size:
        raise KafkaIndexError(
            f"{what} of {len(data)} bytes is not a whole number of {size}-byte entries",
            source=source,
        )
    count = len(data) // size
    # a preallocated tail (an active segment's index) is all zeros: not entries
    view = memoryview(data)
    while count > 1 and not any(view[(count - 1) * size : count * size]):
        count -= 1
    return count


def decode_offset_index(
    data: Buffer, base_offset: int, *, source: str | None = None
) -> OffsetIndex:
    count = _entries(data, OFFSET_ENTRY.size, "offset index", source)
    offsets: list[int] = []
    positions: list[int] = []
    for i in range(count):
        rel, pos = OFFSET_ENTRY.unpack_from(data, i * OFFSET_ENTRY.size)
        if (
            rel < 0
            or pos < 0
            or (offsets and (rel + base_offset <= offsets[-1] or pos <= positions[-1]))
        ):
            raise KafkaIndexError(
                f"offset index entry {i} ({rel}, {pos}) is negative or does not increase",
                offset=i * OFFSET_ENTRY.size,
                source=source,
            )
        offsets.append(base_offset + rel)
        positions.append(pos)
    return OffsetIndex(base_offset, tuple(offsets), tuple(positions))


def decode_time_index(data: Buffer, base_offset: int, *, source: str | None = None) -> TimeIndex:
    count = _entries(data, TIME_ENTRY.size, "time index", source)
    timestamps: list[int] = []
    offsets: list[int] = []
    for i in range(count):
        ts, rel = TIME_ENTRY.unpack_from(data, i * TIME_ENTRY.size)
        if rel < 0 or (timestamps and (ts <= timestamps[-1] or rel + base_offset < offsets[-1])):
            raise KafkaIndexError(
                f"time index entry {i} ({ts}, {rel}) is negative or does not increase",
                offset=i * TIME_ENTRY.size,
                source=source,
            )
        timestamps.append(ts)
        offsets.append(base_offset + rel)
    return TimeIndex(base_offset, tuple(timestamps), tuple(offsets))


@dataclass
class IndexBuilder:
    """Kafka's index rule, fed one batch header at a time (see the module docstring)."""

    base_offset: int
    interval_bytes: int = INDEX_INTERVAL_BYTES

    def __post_init__(self) -> None:
        self._offsets: list[int] = []
        self._positions: list[int] = []
        self._timestamps: list[int] = []
        self._time_offsets: list[int] = []
        self._valid_bytes = 0
        self._last_entry = 0
        self._max_ts = NO_TIMESTAMP
        self._max_ts_offset = -1

    def add(self, header: BatchHeader) -> None:
        if header.max_timestamp > self._max_ts:
            self._max_ts = header.max_timestamp
            self._max_ts_offset = header.last_offset
        if self._valid_bytes - self._last_entry > self.interval_bytes:
            self._offsets.append(header.last_offset)
            self._positions.append(self._valid_bytes)
            self._maybe_time_entry()
            self._last_entry = self._valid_bytes
        self._valid_bytes += header.size

    def _maybe_time_entry(self) -> None:
        last = self._timestamps[-1] if self._timestamps else NO_TIMESTAMP
        if self._max_ts > last:
            self._timestamps.append(self._max_ts)
            self._time_offsets.append(self._max_ts_offset)

    def finish(self, *, closed: bool = True) -> tuple[OffsetIndex, TimeIndex]:
        """The two indexes; ``closed`` adds the final max-timestamp time entry."""
        if closed:
            self._maybe_time_entry()
        return (
            OffsetIndex(self.base_offset, tuple(self._offsets), tuple(self._positions)),
            TimeIndex(self.base_offset, tuple(self._timestamps), tuple(self._time_offsets)),
        )


def build_indexes(
    headers: Iterable[BatchHeader],
    base_offset: int,
    *,
    interval_bytes: int = INDEX_INTERVAL_BYTES,
    closed: bool = True,
) -> tuple[OffsetIndex, TimeIndex]:
    """The ``.index`` and ``.timeindex`` Kafka writes for a segment of these batches."""
    builder = IndexBuilder(base_offset, interval_bytes)
    for header in headers:
        builder.add(header)
    return builder.finish(closed=closed)
