"""The local ledger store (the BookKeeper stand-in): durable, CRC-checked ledger files.

Public API: :class:`LedgerStore` (create, recover, read, list, delete ledgers of a topic),
:class:`LedgerWriter` (append to an open ledger), :class:`ClosedLedgerReader` and
:class:`OpenLedgerReader` (the ``LedgerReader`` Protocol of :mod:`offloader.ledgers.base`; the
closed one also has its optional span read, ``SpanLedgerReader``),
:class:`RolloverPolicy` (Pulsar's rollover rule), and the values :class:`LedgerInfo`,
:class:`RecoveryReport` and :data:`FsyncPolicy`.
"""

from offloader.ledgers.base import InMemoryLedger, LedgerReader, SpanLedgerReader
from offloader.ledgers.info import FsyncPolicy, LedgerInfo, RecoveryReport
from offloader.ledgers.reader import ClosedLedgerReader
from offloader.ledgers.rollover import RolloverPolicy
from offloader.ledgers.store import LedgerStore
from offloader.ledgers.writer import LedgerWriter, OpenLedgerReader

__all__ = [
    "ClosedLedgerReader",
    "FsyncPolicy",
    "InMemoryLedger",
    "LedgerInfo",
    "LedgerReader",
    "LedgerStore",
    "LedgerWriter",
    "OpenLedgerReader",
    "RecoveryReport",
    "RolloverPolicy",
    "SpanLedgerReader",
]
