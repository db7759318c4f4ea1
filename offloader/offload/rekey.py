"""Key rotation for transformed objects: ``objects rekey --to-key ID`` (spec/transforms.md §5).

For every completed offload the metadata store claims, the index object is read; an encrypted
object whose data key is wrapped with another key has its data key unwrapped (with that key from
the ring) and wrapped again with ``ID``, and **only its index object** is rewritten (one PUT
replacing it; the data object, its chunks and the data key do not change), then the metadata
records the index's new size and CRC32C, and the ledger's completion marker is written again with
them (spec/bucket-manifests.md §2). Safe to interrupt and re-run: an index is either old
or new (both readable), and a re-run that finds an index already under ``ID`` whose recorded
size or CRC32C is stale (the run stopped between the PUT and the record) proves the index is
ours by unwrapping its data key with ``ID``, then records it. Key bytes never reach a log.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from formats.extension import crc32c
from formats.index import decode_index, encode_index
from formats.transform import (
    transform_extension_section,
    transform_of,
    unwrap_data_key,
    wrap_data_key,
)
from offloader.crashpoints import crash_point
from offloader.errors import IndexInconsistentError
from offloader.keyring import KeyRing, ring_path
from offloader.logs import get_logger
from offloader.metadata.base import LedgerRecord, MetadataStore
from offloader.naming import TopicName
from offloader.offload.manifests import refresh_ledger_marker
from offloader.store.base import ObjectStore

log = get_logger(__name__)

#: what rekey did to one offloaded ledger
REKEYED = "rekeyed"
UNCHANGED = "unchanged"
RECORDED = "recorded"
PLAIN = "not encrypted"


@dataclass(frozen=True)
class RekeyOutcome:
    topic: str
    ledger_id: int
    uuid: str
    from_key: str | None
    to_key: str
    action: str


def rekey_offloads(
    store: ObjectStore,
    meta: MetadataStore,
    key_ring: str | None,
    to_key: str,
    *,
    dry_run: bool = False,
    software_version: str = "ledger-offloader",
) -> list[RekeyOutcome]:
    """Re-wrap every claimed, complete, encrypted object's data key with ``to_key`` (see the
    module docstring). ``dry_run`` reports what would change and writes nothing."""
    ring = KeyRing(ring_path(key_ring))
    new_kek = ring.key(to_key)  # MissingKeyError before anything is touched
    outcomes: list[RekeyOutcome] = []
    for record in meta.claimed_offloads():
        context = record.offload
        if context is None or not context.complete:
            continue
        outcomes.append(
            _rekey_one(store, meta, ring, record, new_kek, to_key, dry_run, software_version)
        )
    return outcomes


def _refresh_marker(
    store: ObjectStore, record: LedgerRecord, size: int, crc: int, software_version: str
) -> None:
    """The completion marker follows the rewritten index (spec/bucket-manifests.md §2)."""
    assert record.offload is not None
    refresh_ledger_marker(
        store,
        TopicName.parse(record.topic).managed_ledger_name,
        record.ledger_id,
        record.offload.uuid,
        index_size=size,
        index_crc32c=crc,
        software_version=software_version,
    )


def _rekey_one(
    store: ObjectStore,
    meta: MetadataStore,
    ring: KeyRing,
    record: LedgerRecord,
    new_kek: bytes,
    to_key: str,
    dry_run: bool,
    software_version: str,
) -> RekeyOutcome:
    context = record.offload
    assert context is not None
    got = store.get(context.index_key)
    index = decode_index(got.data)
    section = transform_of(index.extension, index.data_object_length)

    def outcome(action: str) -> RekeyOutcome:
        from_key = section.key_id if section is not None and section.encrypted else None
        return RekeyOutcome(record.topic, record.ledger_id, context.uuid, from_key, to_key, action)

    if section is None or not section.encrypted or index.extension is None:
        return outcome(PLAIN)
    if section.key_id == to_key:
        crc = crc32c(got.data)
        if context.index_size == len(got.data) and context.index_crc32c in (None, crc):
            if not dry_run:  # a run that stopped after recording, before the marker
                _refresh_marker(store, record, len(got.data), crc, software_version)
            return outcome(UNCHANGED)
        # an earlier run rewrote the index and stopped before recording it: check it is ours
        unwrap_data_key(new_kek, section.wrapped_key, to_key)
        if not dry_run:
            meta.record_index_rewrite(context.uuid, len(got.data), crc)
            _refresh_marker(store, record, len(got.data), crc, software_version)
        return outcome(RECORDED)
    data_key = unwrap_data_key(ring.key(section.key_id), section.wrapped_key, section.key_id)
    rewrapped = dataclasses.replace(
        section, key_id=to_key, wrapped_key=wrap_data_key(new_kek, data_key)
    )
    extension = index.extension.with_section(transform_extension_section(rewrapped))
    body = encode_index(dataclasses.replace(index, extension=extension), with_extension=True)
    check = transform_of(decode_index(body).extension)
    if check is None or check.chunks != section.chunks:  # pragma: no cover - codec bug guard
        raise IndexInconsistentError(f"{context.index_key}: re-encoded index does not round-trip")
    if dry_run:
        return outcome(REKEYED)
    store.put(context.index_key, body, got.metadata)
    crash_point("rekey.after_index_put")
    meta.record_index_rewrite(context.uuid, len(body), crc32c(body))
    _refresh_marker(store, record, len(body), crc32c(body), software_version)
    log.info(
        "index rekeyed",
        ledger_id=record.ledger_id,
        uuid=context.uuid,
        from_key=section.key_id,
        to_key=to_key,
    )
    return outcome(REKEYED)
