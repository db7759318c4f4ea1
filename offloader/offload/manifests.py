"""The bucket side of the commit protocol: completion markers and watermark objects
(spec/bucket-manifests.md), written so that the store alone can rebuild the metadata.

Order of one offload (:func:`offloader.offload.commit.offload_one`): data object complete →
index PUT → :func:`write_ledger_marker` (the attempt is now *finished* in the bucket) →
:func:`advance_watermark` → ``complete_offload`` in the metadata store. Deleting an attempt's
objects deletes its marker first (:func:`delete_ledger_markers`), so a half-deleted attempt is
never taken for a finished one. Rewriting an index in place (``objects rekey``) writes the
marker again with the new index size and CRC32C before deleting the stale one
(:func:`refresh_ledger_marker`).

A watermark never moves backwards, even with racing writers, and needs no compare-and-swap:
each advance creates a new object for its own position (``if_none_match``) and only then deletes
the objects of *lower* positions, so the highest key always survives.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
from typing import TYPE_CHECKING

from formats.keys import SOFTWARE_VERSION_KEY
from formats.manifest import (
    LEDGERS_KIND,
    LedgerMarker,
    encode_marker_body,
    encode_watermark_body,
    ledger_marker_key,
    ledger_marker_prefix,
    parse_ledger_marker_key,
    parse_watermark_key,
    watermark_key,
    watermark_prefix,
)
from offloader.crashpoints import crash_point
from offloader.errors import InvalidKeyError, PreconditionFailed
from offloader.logs import get_logger
from offloader.store.base import ObjectStore

if TYPE_CHECKING:  # a type only: the Kafka tier imports this module without the writer
    from offloader.offload.transformed import WriteTransform

__all__ = [
    "LEDGERS_KIND",
    "MANIFEST_KIND_KEY",
    "advance_watermark",
    "delete_ledger_markers",
    "delete_watermarks",
    "read_watermark",
    "refresh_ledger_marker",
    "transform_token",
    "write_ledger_marker",
]

log = get_logger(__name__)

#: user metadata key naming what a manifest object is
MANIFEST_KIND_KEY = "offloader-manifest"


def transform_token(transform: WriteTransform | None) -> str:
    """The marker's transform field for an offload written with ``transform``."""
    if transform is None:
        return "none"
    zstd = transform.zstd_level is not None
    if transform.encrypted:
        return "zstdaes" if zstd else "aes"
    return "zstd" if zstd else "none"


def write_ledger_marker(store: ObjectStore, marker: LedgerMarker, software_version: str) -> str:
    """PUT the attempt's completion marker (``if_none_match``: the key is the attempt's own);
    its key."""
    key = ledger_marker_key(marker)
    metadata = {MANIFEST_KIND_KEY: "ledger-marker-v1", SOFTWARE_VERSION_KEY: software_version}
    with contextlib.suppress(PreconditionFailed):  # a retried PUT of the same marker
        store.put(key, encode_marker_body(marker), metadata, if_none_match=True)
    crash_point("manifest.after_marker_put")
    return key


def delete_ledger_markers(
    store: ObjectStore, managed_ledger_name: str, ledger_id: int, uuid: str
) -> None:
    """Delete the attempt's completion marker(s), before its data and index objects."""
    for info in list(store.list(ledger_marker_prefix(managed_ledger_name, ledger_id, uuid))):
        store.delete(info.key)
    crash_point("manifest.after_marker_delete")


def refresh_ledger_marker(
    store: ObjectStore,
    managed_ledger_name: str,
    ledger_id: int,
    uuid: str,
    *,
    index_size: int,
    index_crc32c: int,
    software_version: str,
) -> bool:
    """After the attempt's index was rewritten in place (``objects rekey``): write its marker
    again with the index's new size and CRC32C, then delete the stale one (never the other way
    round: the attempt is never without a marker). True if a marker was replaced."""
    replaced = False
    for info in list(store.list(ledger_marker_prefix(managed_ledger_name, ledger_id, uuid))):
        parsed = parse_ledger_marker_key(info.key)
        old = parsed.marker or parsed.with_name(managed_ledger_name)
        if (old.index_size, old.index_crc32c) == (index_size, index_crc32c):
            continue
        new = dataclasses.replace(old, index_size=index_size, index_crc32c=index_crc32c)
        write_ledger_marker(store, new, software_version)
        crash_point("manifest.after_marker_refresh")
        store.delete(info.key)
        replaced = True
    return replaced


def read_watermark(store: ObjectStore, kind: str, name: str) -> tuple[int, str] | None:
    """The highest ``(position, tag)`` recorded for ``name`` (one listing), None if none."""
    best: tuple[int, str] | None = None
    for info in store.list(watermark_prefix(kind, name)):
        try:
            parsed = parse_watermark_key(info.key)
        except InvalidKeyError:
            continue
        if best is None or parsed.position > best[0]:
            best = (parsed.position, parsed.tag)
    return best


def advance_watermark(
    store: ObjectStore,
    kind: str,
    name: str,
    position: int,
    tag: str,
    now_ms: int,
    software_version: str,
) -> bool:
    """Raise ``name``'s watermark to ``position`` (True) unless it is already there or higher
    (False): the new position's object is created; the lower ones stay.

    Lower objects are never deleted here: a listing is not a snapshot (a file store's directory
    scan, S3's pages), so a reader listing while a writer created a higher key and deleted a
    lower one could miss both and see the watermark move backwards. Keeping them costs one
    small key per offloaded ledger; the highest is the watermark, and a topic's deletion
    removes them all (:func:`delete_watermarks`).

    The watermark this process last wrote or listed is remembered, so that an offload costs
    one PUT, not a LIST too; a stale memory is safe (a lower position's key is written beside
    the higher one, which still wins)."""
    cache_key = (store.url, kind, name)
    with _LAST_LOCK:
        known = _LAST.get(cache_key)
    if known is None:
        for info in store.list(watermark_prefix(kind, name)):
            try:
                parsed = parse_watermark_key(info.key)
            except InvalidKeyError:
                continue
            if parsed.position >= position:
                _remember(cache_key, parsed.position, info.key)
                return False
    elif known[0] >= position:
        return False
    key = watermark_key(kind, name, position, tag)
    body = encode_watermark_body(kind, name, position, tag, now_ms)
    metadata = {MANIFEST_KIND_KEY: f"watermark-{kind}-v1", SOFTWARE_VERSION_KEY: software_version}
    with contextlib.suppress(PreconditionFailed):
        store.put(key, body, metadata, if_none_match=True)
    crash_point("manifest.after_watermark_put")
    _remember(cache_key, position, key)
    return True


#: (store URL, kind, name) -> the (position, key) of the watermark this process last saw
_LAST: dict[tuple[str, str, str], tuple[int, str]] = {}
_LAST_LOCK = threading.Lock()


def _remember(cache_key: tuple[str, str, str], position: int, key: str) -> None:
    with _LAST_LOCK:
        known = _LAST.get(cache_key)
        if known is None or known[0] < position:
            _LAST[cache_key] = (position, key)


def delete_watermarks(store: ObjectStore, kind: str, name: str) -> None:
    """Delete every watermark object of ``name`` (the topic itself is deleted)."""
    with _LAST_LOCK:
        _LAST.pop((store.url, kind, name), None)
    for info in list(store.list(watermark_prefix(kind, name))):
        store.delete(info.key)
    log.info("watermark objects deleted", kind=kind, name=name)
