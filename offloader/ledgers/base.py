"""The LedgerReader Protocol: what the writer needs from a closed ledger, whatever holds it.

The local ledger store, tests and benchmarks (in-memory ledgers) implement it; so could a real
BookKeeper client. ``length`` is the sum of payload sizes as the ledger's metadata records it; the
writer checks it against the entries it actually reads.

:class:`SpanLedgerReader` is an optional extension: a reader that also has
``read_spans(first, last)`` hands over a batch as one buffer plus ``array('q')`` payload starts
and lengths (:class:`~formats.spans.EntrySpans`), so the writer checks the lengths and frames
the batch in single C passes with no Python object per entry. The writer uses it whenever the
reader has it (found with ``getattr``, like the optional ``entry_lengths()``), else ``read``; the
bytes uploaded are the same either way. ``read_spans`` must return exactly the payloads ``read``
would, and raise the same errors. The local ledger files' :class:`ClosedLedgerReader
<offloader.ledgers.reader.ClosedLedgerReader>` implements it; :class:`InMemoryLedger` does not.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from formats.ledger_metadata import LedgerMetadata
from formats.spans import EntrySpans


@runtime_checkable
class LedgerReader(Protocol):
    """A closed ledger, read in batches."""

    @property
    def ledger_id(self) -> int: ...

    @property
    def last_entry_id(self) -> int:
        """Id of the last entry (Pulsar's LAC); -1 for an empty ledger."""
        ...

    @property
    def length(self) -> int:
        """Sum of the payload sizes of every entry."""
        ...

    @property
    def metadata(self) -> LedgerMetadata:
        """BookKeeper ledger metadata to embed in the index."""
        ...

    def read(self, first: int, last: int) -> Sequence[bytes]:
        """Payloads of entries ``first..last`` inclusive, in order."""
        ...


@runtime_checkable
class SpanLedgerReader(LedgerReader, Protocol):
    """A :class:`LedgerReader` that can also hand over a batch as spans of one buffer."""

    def read_spans(self, first: int, last: int) -> EntrySpans:
        """Entries ``first..last`` inclusive: payload ``i`` of the result is entry
        ``first + i``, byte for byte what :meth:`read` returns for it."""
        ...


class InMemoryLedger:
    """A closed ledger held in memory (tests, benchmarks, ``objects encode``)."""

    def __init__(
        self, ledger_id: int, payloads: Sequence[bytes], metadata: LedgerMetadata | None = None
    ) -> None:
        self._ledger_id = ledger_id
        self._payloads = list(payloads)
        self._length = sum(len(p) for p in self._payloads)
        self._metadata = metadata or LedgerMetadata.closed_default(
            last_entry_id=len(self._payloads) - 1, length=self._length
        )

    @property
    def ledger_id(self) -> int:
        return self._ledger_id

    @property
    def last_entry_id(self) -> int:
        return len(self._payloads) - 1

    @property
    def length(self) -> int:
        return self._length

    @property
    def metadata(self) -> LedgerMetadata:
        return self._metadata

    def read(self, first: int, last: int) -> Sequence[bytes]:
        return self._payloads[first : last + 1]
