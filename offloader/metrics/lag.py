"""The lag computations the service publishes: pure functions over what the metadata says.

* :func:`offload_lag`: closed ledgers eligible for offload now (Pulsar's threshold algorithm,
  :func:`~offloader.policies.select_ledgers_for_auto_offload`, plus ledgers with an offload
  attempt that did not complete, which the service retries) whose offload is not complete;
* :func:`deletion_backlog`: offloaded ledgers whose deletion lag has passed and whose local
  copy still exists (:func:`~offloader.policies.ledgers_due_for_local_deletion`);
* :func:`kafka_copy_lag`: KIP-405's ``RemoteCopyLagBytes`` / ``RemoteCopyLagSegments`` of one
  partition: closed (non-active) segments above the remote watermark, not yet in remote storage.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from offloader.policies import (
    LedgerView,
    NamespacePolicies,
    ledgers_due_for_local_deletion,
    select_ledgers_for_auto_offload,
)

__all__ = ["Lag", "deletion_backlog", "kafka_copy_lag", "offload_lag"]


@dataclass(frozen=True)
class Lag:
    """How many units (ledgers or segments) and how many bytes are waiting."""

    count: int = 0
    bytes: int = 0


def _sum(ledgers: Sequence[LedgerView], ids: Collection[int]) -> Lag:
    chosen = [ledger for ledger in ledgers if ledger.ledger_id in ids]
    return Lag(len(chosen), sum(ledger.size_bytes for ledger in chosen))


def offload_lag(
    ledgers: Sequence[LedgerView],
    policies: NamespacePolicies,
    now_ms: int,
    incomplete: Collection[int] = (),
) -> Lag:
    """Ledgers eligible for offload whose offload is not complete. ``incomplete``: ids of
    ledgers with an offload attempt that did not complete (failed or interrupted), which are
    eligible whatever the thresholds say (the service retries them)."""
    eligible = set(select_ledgers_for_auto_offload(ledgers, policies, now_ms))
    eligible |= {
        ledger.ledger_id
        for ledger in ledgers
        if ledger.ledger_id in incomplete
        and not ledger.is_open
        and not ledger.offload_complete
        and not ledger.is_empty
    }
    return _sum(ledgers, eligible)


def deletion_backlog(ledgers: Sequence[LedgerView], lag_ms: int | None, now_ms: int) -> Lag:
    """Offloaded ledgers whose local copy the deletion lag says should be gone but is not
    (``lag_ms`` None: the namespace never deletes local copies, so there is no backlog)."""
    return _sum(ledgers, set(ledgers_due_for_local_deletion(ledgers, lag_ms, now_ms)))


def kafka_copy_lag(closed_segments: Sequence[tuple[int, int]], watermark: int) -> Lag:
    """``closed_segments``: ``(base_offset, size_bytes)`` of a partition's closed segments;
    ``watermark``: the last offset in remote storage (-1: none). Segments that start above it
    are eligible for tiering and not yet remote."""
    waiting = [size for base, size in closed_segments if base > watermark]
    return Lag(len(waiting), sum(waiting))
