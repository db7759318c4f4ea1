"""The LedgerReader Protocol: what the writer needs from a closed ledger, whatever holds it.

The local ledger store, tests and benchmarks (in-memory ledgers) implement it; so could a real
BookKeeper client. ``length`` is the sum of payload sizes as the ledger's metadata records it; the
writer checks it against the entries it actually reads.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from formats.ledger_metadata import LedgerMetadata


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
