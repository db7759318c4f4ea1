"""The offload path: one closed ledger to a data object and an index object, committed.

Owns the writer (plan blocks, upload parts 1..N with their CRC32Cs, put the index:
:func:`offload_ledger`), the reading of a ledger's entries for it (:class:`LedgerEntries`), the
per-ledger commit protocol around it (UUID recorded before the upload, compare-and-set at the
end, cleanup of failed attempts: :func:`offload_one`), the verification of an offload against
its metadata record (:func:`check_offload`) and the orphan audit of a store
(:func:`find_orphans`, :func:`collect_garbage`).

May import: ``formats``, the value modules, ``store``, ``metadata``, ``ledgers``,
``runtime`` and ``read`` (verification reads indexes back). Must not import ``topics``,
``spark``, ``api`` or ``service``.
"""

from offloader.offload.commit import delete_ledger_objects, delete_objects, offload_one
from offloader.offload.entry_batches import LedgerEntries
from offloader.offload.orphans import Audit, collect_garbage, find_orphans
from offloader.offload.verification import ObjectCheck, check_offload
from offloader.offload.writer import OffloadResult, offload_ledger

__all__ = [
    "Audit",
    "LedgerEntries",
    "ObjectCheck",
    "OffloadResult",
    "check_offload",
    "collect_garbage",
    "delete_ledger_objects",
    "delete_objects",
    "find_orphans",
    "offload_ledger",
    "offload_one",
]
