"""Plain values the local ledger store hands back: fsync policies, ledger info, recovery reports.

Fsync policies (what an *acknowledged* entry, one whose ``append``/``append_batch`` returned,
survives):

========  ==========================================  =======================================
policy    bytes reach the OS (``pwrite``)             ``fdatasync``
========  ==========================================  =======================================
always    before every ``append``/``append_batch``    before every ``append``/``append_batch``
          returns                                     returns
batch     at the end of every ``append_batch``, and   with every write to the OS
          when single ``append`` calls have filled
          the buffer (``buffer_bytes``)
never     when the buffer fills, on ``flush``,        only on ``sync()`` and ``close()``
          ``sync`` and ``close``
========  ==========================================  =======================================

* ``always``: every acknowledged entry survives a process kill and a power loss.
* ``batch``: every entry of a returned ``append_batch`` survives both; single ``append`` calls
  are group-committed, durable once ``durable_last_entry_id`` covers them (or after ``sync()``).
* ``never``: entries in the OS survive a process kill but not a power loss; entries still in the
  user-space buffer (at most ``buffer_bytes``) are lost on a kill.

``close()`` is always durable: it flushes, writes the close trailer and fsyncs, whatever the
policy. After a crash, recovery may also surface entries that were written but never
acknowledged (as BookKeeper recovery can); it never loses an acknowledged one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

FsyncPolicy = Literal["always", "batch", "never"]
FSYNC_POLICIES: tuple[str, ...] = get_args(FsyncPolicy)


@dataclass(frozen=True)
class LedgerInfo:
    """What a ledger file holds."""

    ledger_id: int
    entry_count: int
    #: sum of the payload sizes
    length: int
    ctime_ms: int
    #: close time (ms since the epoch); None while the ledger is open
    closed_ms: int | None
    #: bytes of the file (records, header and trailer)
    file_size: int

    @property
    def last_entry_id(self) -> int:
        return self.entry_count - 1

    @property
    def is_closed(self) -> bool:
        return self.closed_ms is not None


@dataclass(frozen=True)
class RecoveryReport:
    """The outcome of opening a ledger that may not have been closed."""

    ledger_id: int
    #: entries kept (every complete record with a valid CRC32C)
    entry_count: int
    length: int
    #: bytes of a torn tail that were truncated away (0 if the file ended cleanly)
    dropped_bytes: int
    #: the ledger already had a valid close trailer (nothing was changed)
    was_closed: bool
