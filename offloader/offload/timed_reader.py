"""A ledger reader that records how long the offload spends reading the local ledger.

Pulsar's ``brk_ledgeroffloader_read_ledger_latency`` is the time its offloader waits for
BookKeeper reads; ours is the time in ``read`` / ``read_spans`` of the local ledger reader
(:class:`~offloader.ledgers.base.LedgerReader`), recorded per call. With metrics off the reader
is returned as it is, so the writer's fast paths see no wrapper.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from formats.ledger_metadata import LedgerMetadata
from formats.spans import EntrySpans
from offloader.ledgers.base import LedgerReader
from offloader.metrics.base import Metrics

__all__ = ["TimedLedgerReader", "timed_reader"]


class TimedLedgerReader:
    """Forwards to ``inner``; ``read`` and ``read_spans`` (when ``inner`` has it) are timed.
    Optional methods the writer looks for with ``getattr`` are forwarded as they are."""

    def __init__(self, inner: LedgerReader, metrics: Metrics, topic: str) -> None:
        self._inner = inner
        self._metrics = metrics
        self._topic = topic

    @property
    def ledger_id(self) -> int:
        return self._inner.ledger_id

    @property
    def last_entry_id(self) -> int:
        return self._inner.last_entry_id

    @property
    def length(self) -> int:
        return self._inner.length

    @property
    def metadata(self) -> LedgerMetadata:
        return self._inner.metadata

    def read(self, first: int, last: int) -> Sequence[bytes]:
        started = time.perf_counter()
        try:
            return self._inner.read(first, last)
        finally:
            self._record(started)

    def _record(self, started: float) -> None:
        self._metrics.record_read_ledger_latency(self._topic, time.perf_counter() - started)

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name)
        if name != "read_spans" or not callable(attr):
            return attr
        read_spans: Callable[[int, int], EntrySpans] = attr

        def timed(first: int, last: int) -> EntrySpans:
            started = time.perf_counter()
            try:
                return read_spans(first, last)
            finally:
                self._record(started)

        return timed


def timed_reader(reader: LedgerReader, metrics: Metrics, topic: str) -> LedgerReader:
    """``reader`` timed when ``metrics`` is enabled, else ``reader`` itself."""
    return TimedLedgerReader(reader, metrics, topic) if metrics.enabled else reader
