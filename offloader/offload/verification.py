"""Checking a ledger's offloaded objects against what the metadata recorded.

Used before a local copy is deleted (the deletion lag) and by ``objects verify``. The quick check
HEADs both objects: they must exist with exactly the sizes recorded at completion. With
``checksums`` it also reads everything back and checks it *here*, so integrity never depends on
the server validating checksums (RGW and moto do not): the index's CRC32C against the recorded
one, its format version, its ledger (entry count), the block CRC32Cs of the index extension
against the recorded ones, and every block of the data object against the recorded CRC32C and
its framing (:func:`offloader.read.objects.read_block`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from formats.extension import crc32c
from formats.index import decode_index
from offloader.errors import AccessDenied, ObjectNotFound, OffloaderError, StoreUnavailable
from offloader.metadata.base import LedgerRecord
from offloader.read.objects import block_refs, check_object_version, read_block
from offloader.read.transformed import data_view
from offloader.runtime import store_hint
from offloader.store.base import ObjectStore


@dataclass(frozen=True)
class ObjectCheck:
    """The outcome of checking one ledger's objects."""

    ok: bool
    data_size: int | None
    index_size: int | None
    checked_checksums: bool
    problem: str | None = None


def _head_size(store: ObjectStore, key: str, what: str) -> tuple[int | None, str | None]:
    try:
        return store.head(key).size, None
    except ObjectNotFound:
        return None, f"{what} object {key} is missing"


def check_offload(
    store: ObjectStore,
    ledger: LedgerRecord,
    *,
    checksums: bool,
    read_buffer: int,
    key_ring: str | None = None,
) -> ObjectCheck:
    """Check the ledger's complete offload (see the module docstring); never raises for a
    bad object: the problem is returned. Store outages (StoreUnavailable...) propagate."""
    context = ledger.offload
    if context is None or not context.complete:
        return ObjectCheck(False, None, None, False, f"ledger {ledger.ledger_id} is not offloaded")
    data_size, problem = _head_size(store, context.data_key, "data")
    index_size, index_problem = _head_size(store, context.index_key, "index")
    problem = problem or index_problem
    if problem is not None:
        problem += store_hint(context, store.url)

    def result(problem: str | None, checked: bool) -> ObjectCheck:
        return ObjectCheck(problem is None, data_size, index_size, checked, problem)

    if problem is None and data_size != context.data_size:
        problem = f"data object is {data_size} bytes, the metadata recorded {context.data_size}"
    if problem is None and index_size != context.index_size:
        problem = f"index object is {index_size} bytes, the metadata recorded {context.index_size}"
    if problem is not None or not checksums:
        return result(problem, False)
    try:
        got = store.get(context.index_key)
        if context.index_crc32c is not None and crc32c(got.data) != context.index_crc32c:
            return result("index object CRC32C does not match the recorded one", True)
        check_object_version(got.metadata, context.index_key)
        index = decode_index(got.data)
        # a transformed object: blocks are read (and their CRC32Cs checked) through the view
        store = data_view(store, index, ledger.ledger_id, context.uuid, key_ring=key_ring)
        if index.last_entry_id != ledger.entries - 1:
            return result(
                f"index ends at entry {index.last_entry_id}, the ledger has {ledger.entries}",
                True,
            )
        refs = block_refs(index, ledger.ledger_id, context.uuid)
        recorded = context.block_crc32c
        if recorded:
            if len(recorded) != len(refs):
                return result(
                    f"index has {len(refs)} blocks, the metadata recorded {len(recorded)}", True
                )
            pairs = list(zip(refs, recorded, strict=True))
            if any(r.crc32c is not None and r.crc32c != c for r, c in pairs):
                return result("index extension block CRC32Cs differ from the recorded ones", True)
            refs = [dataclasses.replace(r, crc32c=c) for r, c in pairs]
        entries = 0
        for ref in refs:
            entries += sum(1 for _ in read_block(store, ref, read_buffer=read_buffer))
        if entries != ledger.entries:
            return result(f"data object holds {entries} entries, expected {ledger.entries}", True)
    except ObjectNotFound as exc:
        return result(f"object disappeared while verifying: {exc}", True)
    except OffloaderError as exc:
        if isinstance(exc, StoreUnavailable | AccessDenied):
            raise
        return result(f"{type(exc).__name__}: {exc}", True)
    return result(None, True)
