"""The offload path: one closed ledger to a data object and an index object, committed.

Owns the writer (plan blocks, upload parts 1..N with their CRC32Cs, put the index:
:func:`offload_ledger`), which runs one :class:`OffloadJob` (a ledger's attempt: its plan,
store, keys and what it created) with an :class:`UploadStrategy`: :class:`PlainUpload` for
Pulsar's object or :class:`TransformedUpload` for a chunked, compressed and/or encrypted one;
the reading of a ledger's entries for it (:class:`LedgerEntries`), the
per-ledger commit protocol around it (UUID recorded before the upload, compare-and-set at the
end, cleanup of failed attempts: :func:`offload_one`), the verification of an offload against
its metadata record (:func:`check_offload`) and the orphan audit of a store
(:func:`find_orphans`, :func:`collect_garbage`).

May import: ``formats``, the value modules, ``store``, ``metadata``, ``ledgers``,
``runtime`` and ``read`` (verification reads indexes back). Must not import ``topics``,
``spark``, ``api`` or ``service``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from offloader.lazy import lazy_attribute

if TYPE_CHECKING:
    from offloader.offload.commit import delete_ledger_objects, delete_objects, offload_one
    from offloader.offload.entry_batches import LedgerEntries
    from offloader.offload.job import OffloadJob, UploadedData, UploadStrategy
    from offloader.offload.orphans import Audit, collect_garbage, find_orphans
    from offloader.offload.transformed import TransformedUpload
    from offloader.offload.verification import ObjectCheck, check_offload
    from offloader.offload.writer import OffloadResult, PlainUpload, offload_ledger

#: where each name re-exported here lives: imported on first use (PEP 562), so that
#: importing one submodule (the Kafka upload imports a constant of ``manifests``)
#: does not load the whole package
_LAZY = {
    "Audit": "offloader.offload.orphans",
    "LedgerEntries": "offloader.offload.entry_batches",
    "ObjectCheck": "offloader.offload.verification",
    "OffloadJob": "offloader.offload.job",
    "OffloadResult": "offloader.offload.writer",
    "PlainUpload": "offloader.offload.writer",
    "TransformedUpload": "offloader.offload.transformed",
    "UploadStrategy": "offloader.offload.job",
    "UploadedData": "offloader.offload.job",
    "check_offload": "offloader.offload.verification",
    "collect_garbage": "offloader.offload.orphans",
    "delete_ledger_objects": "offloader.offload.commit",
    "delete_objects": "offloader.offload.commit",
    "find_orphans": "offloader.offload.orphans",
    "offload_ledger": "offloader.offload.writer",
    "offload_one": "offloader.offload.commit",
}


def __getattr__(name: str) -> Any:
    return lazy_attribute(__name__, _LAZY, name)


__all__ = [
    "Audit",
    "LedgerEntries",
    "ObjectCheck",
    "OffloadJob",
    "OffloadResult",
    "PlainUpload",
    "TransformedUpload",
    "UploadStrategy",
    "UploadedData",
    "check_offload",
    "collect_garbage",
    "delete_ledger_objects",
    "delete_objects",
    "find_orphans",
    "offload_ledger",
    "offload_one",
]
