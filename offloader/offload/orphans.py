"""The orphan audit: what the object store holds that no metadata record claims, and back.

:func:`find_orphans` lists the whole store and reports

* objects whose key parses to a UUID that no live ledger claims (``unclaimed-uuid`` when no
  attempt with that UUID was ever recorded here, ``superseded-attempt`` for an attempt that
  lost, failed or was cleaned, ``deleted-ledger`` for a trimmed/deleted ledger's attempt), and
  objects whose key is not an offloaded-ledger key at all (``not-an-offload-key``);
* incomplete multipart uploads, unless their UUID is the *incomplete* offload of a live ledger
  (a running attempt);
* complete offloads whose data or index object is missing (needs a person: never "fixed");
* for the local ``file://`` store, leftovers of writes killed mid-way (``stale-temporary``).

Only objects and uploads older than ``min_age_ms`` (wall clock against the store's
``last_modified``/``initiated``) are reported, so an offload that is starting right now, whose
``begin_offload`` may not be visible yet, is never touched. The claims are read *after* the
listing, so an offload that begins while we list is seen as claimed.

:func:`collect_garbage` deletes the reported objects and aborts the reported uploads (nothing
with ``dry_run``) and marks their attempts CLEANED.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from datetime import datetime

from formats.keys import parse_key
from offloader.crashpoints import crash_point
from offloader.errors import InvalidKeyError, NotFound, ObjectNotFound, OffloadConflict
from offloader.logs import get_logger
from offloader.runtime import Runtime

log = get_logger(__name__)

#: reason of a crash leftover of the local store (``.tmp-*``), reclaimed by gc after min age
STALE_TEMPORARY = "stale-temporary"


@dataclass(frozen=True)
class Orphan:
    key: str
    size: int
    reason: str
    last_modified_ms: int | None
    uuid: str | None


@dataclass(frozen=True)
class StrayUpload:
    key: str
    upload_id: str
    initiated_ms: int | None
    uuid: str | None


@dataclass(frozen=True)
class Missing:
    topic: str
    ledger_id: int
    uuid: str
    key: str


@dataclass(frozen=True)
class Audit:
    objects: list[Orphan] = field(default_factory=list)
    uploads: list[StrayUpload] = field(default_factory=list)
    missing: list[Missing] = field(default_factory=list)


def _ms(when: datetime | None) -> int | None:
    return None if when is None else int(when.timestamp() * 1000)


def _uuid_of(key: str) -> str | None:
    try:
        return parse_key(key).uuid
    except InvalidKeyError:
        return None


def _old_enough(when_ms: int | None, now_ms: int, min_age_ms: int) -> bool:
    # a store that reports no time: only with min age 0 (never risk a running offload)
    return now_ms - when_ms >= min_age_ms if when_ms is not None else min_age_ms <= 0


def _reason(rt: Runtime, uuid: str) -> str:
    try:
        attempt = rt.meta.get_attempt(uuid)
    except NotFound:
        return "unclaimed-uuid"
    try:
        if rt.meta.get_ledger(attempt.ledger_id).state == "DELETED":
            return "deleted-ledger"
    except NotFound:
        return "deleted-ledger"
    return "superseded-attempt"


def find_orphans(rt: Runtime, min_age_ms: int) -> Audit:
    """See the module docstring."""
    now = rt.wall_ms()
    listed = list(rt.store.list())
    uploads = rt.store.list_multipart_uploads()
    claimed = {r.offload.uuid: r for r in rt.meta.claimed_offloads() if r.offload is not None}
    audit = Audit()
    keys = set()
    for info in listed:
        keys.add(info.key)
        uuid = _uuid_of(info.key)
        if uuid is not None and uuid in claimed:
            continue
        when = _ms(info.last_modified)
        if not _old_enough(when, now, min_age_ms):
            continue
        reason = "not-an-offload-key" if uuid is None else _reason(rt, uuid)
        audit.objects.append(Orphan(info.key, info.size, reason, when, uuid))
    list_temporaries = getattr(rt.store, "list_temporaries", None)
    for info in list_temporaries() if list_temporaries is not None else ():
        when = _ms(info.last_modified)
        if _old_enough(when, now, min_age_ms):
            audit.objects.append(Orphan(info.key, info.size, STALE_TEMPORARY, when, None))
    for upload in uploads:
        uuid = _uuid_of(upload.key)
        owner = claimed.get(uuid) if uuid is not None else None
        if owner is not None and owner.offload is not None and not owner.offload.complete:
            continue  # a running (or interrupted, to be retried) attempt
        when = _ms(upload.initiated)
        if _old_enough(when, now, min_age_ms):
            audit.uploads.append(StrayUpload(upload.key, upload.upload_id, when, uuid))
    for uuid, record in claimed.items():
        context = record.offload
        if context is None or not context.complete:
            continue
        for key in (context.data_key, context.index_key):
            if key in keys:
                continue
            try:
                rt.store.head(key)  # completed after the listing?
            except ObjectNotFound:
                audit.missing.append(Missing(record.topic, record.ledger_id, uuid, key))
    return audit


def collect_garbage(rt: Runtime, audit: Audit, *, dry_run: bool) -> int:
    """Delete the audit's orphan objects and abort its uploads; how many were removed."""
    if dry_run:
        return 0
    claimed = rt.meta.claimed_uuids()  # again: never delete what became claimed meanwhile
    removed = 0
    uuids: set[str] = set()
    for orphan in audit.objects:
        if orphan.uuid is not None and orphan.uuid in claimed:
            continue
        if orphan.reason == STALE_TEMPORARY:
            rt.store.remove_temporary(orphan.key)  # type: ignore[attr-defined]
        else:
            rt.store.delete(orphan.key)
        crash_point("gc.after_object_delete")
        removed += 1
        if orphan.uuid is not None:
            uuids.add(orphan.uuid)
    for upload in audit.uploads:
        rt.store.abort_multipart_upload(upload.key, upload.upload_id)
        crash_point("gc.after_upload_abort")
        removed += 1
        if upload.uuid is not None and upload.uuid not in claimed:
            uuids.add(upload.uuid)
    for uuid in uuids:
        with contextlib.suppress(NotFound, OffloadConflict):
            rt.meta.mark_attempt_cleaned(uuid, rt.now_ms())
    if removed:
        log.info("orphans removed", count=removed, store=rt.store.url)
    return removed
