"""A bounded, thread-safe LRU cache of entry offsets: ``(ledger id, entry id) -> object offset``.

Pulsar's ``OffsetsCache`` remembers, for entries already read, the
object offset of their 4-byte length field, so that a backward or random seek lands exactly on
the entry instead of rescanning its block. Ours is bounded by entry count (least recently used
entries are evicted first); a ``max_size`` of 0 or less disables it. One cache may be shared by
every ReadHandle of a process (pass it to ``ReadHandle.open``); each handle makes its own
otherwise. Memory: roughly 150 bytes per cached entry.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable

DEFAULT_MAX_SIZE = 100_000
#: how far back :meth:`OffsetsCache.probe_back` looks (Pulsar's offsetprobe.max)
DEFAULT_PROBE = 1024


class OffsetsCache:
    """LRU map ``(ledger_id, entry_id) -> offset`` holding at most ``max_size`` entries."""

    def __init__(self, max_size: int = DEFAULT_MAX_SIZE) -> None:
        self.max_size = max(0, max_size)
        self._data: OrderedDict[tuple[int, int], int] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._data)

    @property
    def enabled(self) -> bool:
        return self.max_size > 0

    def get(self, ledger_id: int, entry_id: int) -> int | None:
        """The cached offset of an entry (and mark it recently used), or None."""
        if not self.max_size:
            return None
        key = (ledger_id, entry_id)
        with self._lock:
            offset = self._data.get(key)
            if offset is None:
                self.misses += 1
                return None
            self._data.move_to_end(key)
            self.hits += 1
            return offset

    def probe_back(
        self, ledger_id: int, entry_id: int, lowest: int, max_probe: int = DEFAULT_PROBE
    ) -> tuple[int, int] | None:
        """The nearest cached ``(entry id, offset)`` at or before ``entry_id`` and not below
        ``lowest``, looking back at most ``max_probe`` entries."""
        if not self.max_size:
            return None
        stop = max(lowest, entry_id - max_probe)
        with self._lock:
            data = self._data
            for candidate in range(entry_id, stop - 1, -1):
                offset = data.get((ledger_id, candidate))
                if offset is not None:
                    data.move_to_end((ledger_id, candidate))
                    self.hits += 1
                    return candidate, offset
            self.misses += 1
        return None

    def put(self, ledger_id: int, entry_id: int, offset: int) -> None:
        self.put_many(ledger_id, ((entry_id, offset),))

    def put_many(self, ledger_id: int, items: Iterable[tuple[int, int]]) -> None:
        """Remember several ``(entry id, offset)`` pairs of one ledger under one lock."""
        if not self.max_size:
            return
        with self._lock:
            data = self._data
            for entry_id, offset in items:
                key = (ledger_id, entry_id)
                data[key] = offset
                data.move_to_end(key)
            excess = len(data) - self.max_size
            for _ in range(max(0, excess)):
                data.popitem(last=False)

    def discard(self, ledger_id: int, entry_id: int) -> None:
        """Forget one entry (its cached offset proved wrong)."""
        with self._lock:
            self._data.pop((ledger_id, entry_id), None)

    def clear(self) -> None:
        with self._lock:
            self._data.clear()
