"""The orphan audit: what the object store holds that no metadata record claims, and back.

:func:`find_orphans` lists the whole store and reports

* objects whose key parses to a UUID that no live ledger claims (``unclaimed-uuid`` when no
  attempt with that UUID was ever recorded here, ``superseded-attempt`` for an attempt that
  lost, failed or was cleaned, ``deleted-ledger`` for a trimmed/deleted ledger's attempt,
  ``foreign-object`` for a key of our history whose object lacks our marker), objects whose
  key is not an offloaded-ledger key at all (``not-an-offload-key``) and keys no store
  operation accepts (``odd-key``: ``../x``, ``//x``, control characters);
* incomplete multipart uploads, unless their UUID is the *incomplete* offload of a live ledger
  (a running attempt): ``unfinished-upload`` for a UUID of this home's attempt history,
  ``foreign-upload`` for any other;
* an attempt's completion marker (``_offloader/v1/ledgers/...``, spec/bucket-manifests.md)
  counts as one of its objects, with the reason of its UUID; watermark objects are our own
  bookkeeping and never reported;
* complete offloads whose data or index object is missing (needs a person: never "fixed");
* for the local ``file://`` store, leftovers of writes killed mid-way (``stale-temporary``).

Only objects and uploads older than ``min_age_ms`` (wall clock against the store's
``last_modified``/``initiated``) are reported, so an offload that is starting right now, whose
``begin_offload`` may not be visible yet, is never touched. The claims are read *after* the
listing, so an offload that begins while we list is seen as claimed.

:func:`collect_garbage` deletes only what this installation provably wrote (nothing with
``dry_run``): an object whose UUID is in this metadata store's attempt history **and** whose
user metadata carries our marker (the software version ``ledger-offloader-...`` our writer
sets; read with a HEAD of each candidate), an upload whose UUID is in the attempt history, and
the local store's own crash leftovers. Everything else (other homes' or a Pulsar broker's
offloads sharing the prefix, READMEs, other clients' uploads, odd keys) is reported and left
alone. It marks the attempts it cleaned CLEANED; a deletion that fails for one object is
reported (logged) and gc carries on with the others.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from formats.kafka.names import is_remote_key
from formats.keys import parse_key, parse_user_metadata
from formats.manifest import LEDGER_MARKERS, WATERMARKS, parse_ledger_marker_key
from offloader.crashpoints import crash_point
from offloader.errors import (
    AccessDenied,
    InvalidKeyError,
    InvalidStoreKey,
    NotFound,
    ObjectNotFound,
    OffloadConflict,
    StoreError,
    StoreUnavailable,
)
from offloader.logs import get_logger
from offloader.runtime import Runtime
from offloader.store.keycheck import check_key

log = get_logger(__name__)

#: reason of a crash leftover of the local store (``.tmp-*``), reclaimed by gc after min age
STALE_TEMPORARY = "stale-temporary"
#: the reasons of what gc deletes (aborts): provably written by this installation
DELETABLE_REASONS = frozenset(
    {"superseded-attempt", "deleted-ledger", STALE_TEMPORARY, "unfinished-upload"}
)
#: our writer's software version starts with this (the marker in our objects' user metadata)
OUR_SOFTWARE_PREFIX = "ledger-offloader"


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
    reason: str = "unfinished-upload"


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
        if key.startswith(LEDGER_MARKERS):
            return parse_ledger_marker_key(key).uuid
        return parse_key(key).uuid
    except InvalidKeyError:
        return None


def _bookkeeping(key: str) -> bool:
    """Watermark objects: ours, kept while their topic lives, deleted with it."""
    return key.startswith(WATERMARKS)


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


def _in_history(rt: Runtime, uuid: str | None) -> bool:
    if uuid is None:
        return False
    try:
        rt.meta.get_attempt(uuid)
    except NotFound:
        return False
    return True


def _odd(key: str) -> bool:
    try:
        check_key(key)
    except InvalidStoreKey:
        return True
    return False


def _has_our_marker(rt: Runtime, key: str) -> bool:
    """The object's user metadata says our writer wrote it (a HEAD; False if it is gone)."""
    try:
        info = rt.store.head(key)
    except (ObjectNotFound, InvalidStoreKey):
        return False
    version = parse_user_metadata(info.metadata).software_version or ""
    return version.startswith(OUR_SOFTWARE_PREFIX)


def _object_reason(rt: Runtime, key: str, uuid: str | None) -> str:
    if _odd(key):
        return "odd-key"
    if uuid is None:
        return "not-an-offload-key"
    reason = _reason(rt, uuid)
    if reason in DELETABLE_REASONS and not _has_our_marker(rt, key):
        return "foreign-object"
    return reason


def find_orphans(
    rt: Runtime, min_age_ms: int, *, foreign: Callable[[str], bool] | None = None
) -> Audit:
    """See the module docstring. Keys for which ``foreign`` is true (by default: remote Kafka
    segment keys) belong to another audit (the Kafka tier's) and are skipped."""
    now = rt.wall_ms()
    skip = foreign or is_remote_key
    listed = [info for info in rt.store.list() if not skip(info.key) and not _bookkeeping(info.key)]
    uploads = [u for u in rt.store.list_multipart_uploads() if not skip(u.key)]
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
        reason = _object_reason(rt, info.key, uuid)
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
            ours = not _odd(upload.key) and _in_history(rt, uuid)
            reason = "unfinished-upload" if ours else "foreign-upload"
            audit.uploads.append(StrayUpload(upload.key, upload.upload_id, when, uuid, reason))
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
    # an attempt's completion marker goes before its data and index (a crash in between
    # must never leave a marker naming deleted objects)
    ordered = sorted(audit.objects, key=lambda o: not o.key.startswith(LEDGER_MARKERS))
    for orphan in ordered:
        if orphan.reason not in DELETABLE_REASONS:
            continue  # not provably ours: reported, left alone
        if orphan.uuid is not None and orphan.uuid in claimed:
            continue
        try:
            if orphan.reason == STALE_TEMPORARY:
                rt.store.remove_temporary(orphan.key)  # type: ignore[attr-defined]
            else:
                rt.store.delete(orphan.key)
        except (StoreUnavailable, AccessDenied):
            raise
        except StoreError as exc:
            log.warning("gc skipped an object", key=orphan.key, error=str(exc))
            continue
        crash_point("gc.after_object_delete")
        removed += 1
        if orphan.uuid is not None:
            uuids.add(orphan.uuid)
    for upload in audit.uploads:
        if upload.reason not in DELETABLE_REASONS:
            continue
        try:
            rt.store.abort_multipart_upload(upload.key, upload.upload_id)
        except (StoreUnavailable, AccessDenied):
            raise
        except StoreError as exc:
            log.warning("gc skipped an upload", key=upload.key, error=str(exc))
            continue
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
