"""The orphan audit of Kafka objects (keys that parse as remote Kafka segment keys).

A copy's completion marker (``_offloader/v1/kafka/segments/...``) counts as one of its
objects. An object is claimed by the remote-segment record whose segment id its key carries
while that record is COPY_SEGMENT_FINISHED, DELETE_SEGMENT_STARTED (being deleted) or a
COPY_SEGMENT_STARTED younger than ``min_age_ms`` (an upload running now). Everything else is
reported:

* ``kafka-abandoned-copy``: a COPY_SEGMENT_STARTED record older than ``min_age_ms`` (an uploader
  that died mid-copy; its objects are half-written). Reported once per object it left, or once
  with its ``.log`` key and size 0 when it left none; gc deletes it through
  DELETE_SEGMENT_STARTED -> FINISHED.
* ``kafka-deleted-segment``: an object of a DELETE_SEGMENT_FINISHED record (a delete that did not
  reach the store); ``kafka-unclaimed-segment``: a segment id no record of this installation
  knows (another uploader's, sharing the bucket): reported, never deleted.
* incomplete multipart uploads of Kafka keys not claimed by a running copy (aborted by gc only
  when a record of ours names their segment; others are ``foreign_uploads``, left alone);
* ``missing``: objects of COPY_SEGMENT_FINISHED records that the store no longer has.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

from formats.errors import InvalidKeyError
from formats.kafka.manifest import KAFKA_MARKERS, parse_segment_marker_key
from formats.kafka.names import is_remote_key, parse_remote_key
from offloader.errors import NotFound, ObjectNotFound
from offloader.kafka.context import KafkaContext
from offloader.kafka.remote import delete_objects, delete_remote_segment
from offloader.metadata.kafka_base import (
    COPY_FINISHED,
    COPY_STARTED,
    DELETE_FINISHED,
    RemoteSegmentRecord,
)
from offloader.store.base import MultipartUploadInfo, ObjectInfo

ABANDONED = "kafka-abandoned-copy"
DELETED = "kafka-deleted-segment"
UNCLAIMED = "kafka-unclaimed-segment"


def is_kafka_key(key: str) -> bool:
    """A remote Kafka segment key, or a segment's completion marker (spec/kafka-manifests.md):
    a marker counts as one of its copy's objects, with the reason of its segment id."""
    return is_remote_key(key) or key.startswith(KAFKA_MARKERS)


def _segment_id_of(key: str) -> str | None:
    try:
        if key.startswith(KAFKA_MARKERS):
            return parse_segment_marker_key(key).segment_id
        return parse_remote_key(key).segment_id
    except InvalidKeyError:
        return None


@dataclass(frozen=True)
class KafkaOrphan:
    key: str
    size: int
    reason: str
    last_modified_ms: int | None
    segment_id: str


@dataclass
class KafkaAudit:
    objects: list[KafkaOrphan] = field(default_factory=list)
    uploads: list[MultipartUploadInfo] = field(default_factory=list)
    #: stray uploads of segment ids this installation never recorded: reported, never aborted
    foreign_uploads: list[MultipartUploadInfo] = field(default_factory=list)
    #: (record, key) of finished segments whose object is gone
    missing: list[tuple[RemoteSegmentRecord, str]] = field(default_factory=list)
    abandoned: list[RemoteSegmentRecord] = field(default_factory=list)


def _ms(when: datetime | None) -> int | None:
    return None if when is None else int(when.timestamp() * 1000)


def _segment(ctx: KafkaContext, segment_id: str) -> RemoteSegmentRecord | None:
    try:
        return ctx.meta.get_segment(segment_id)
    except NotFound:
        return None


def audit_kafka(
    ctx: KafkaContext,
    listed: Iterable[ObjectInfo],
    uploads: Iterable[MultipartUploadInfo],
    now_ms: int,
    min_age_ms: int,
) -> KafkaAudit:
    """See the module docstring; ``listed``/``uploads`` are the whole store's (others skipped)."""
    audit = KafkaAudit()
    seen: set[str] = set()
    abandoned: dict[str, RemoteSegmentRecord] = {
        r.segment_id: r
        for r in ctx.meta.list_segments(states=[COPY_STARTED])
        if now_ms - r.started_ms >= min_age_ms
    }
    audit.abandoned = list(abandoned.values())
    for info in listed:
        if not is_kafka_key(info.key):
            continue
        seen.add(info.key)
        segment_id = _segment_id_of(info.key)
        if segment_id is None:
            continue  # a malformed marker key: metadata rebuild reports it as a problem
        when = _ms(info.last_modified)
        if segment_id in abandoned:
            audit.objects.append(KafkaOrphan(info.key, info.size, ABANDONED, when, segment_id))
            continue
        record = _segment(ctx, segment_id)
        if record is not None and record.state != DELETE_FINISHED:
            continue
        if when is not None and now_ms - when < min_age_ms:
            continue
        reason = UNCLAIMED if record is None else DELETED
        audit.objects.append(KafkaOrphan(info.key, info.size, reason, when, segment_id))
    for record in abandoned.values():
        if not any(key in seen for key in record.keys.values()):
            audit.objects.append(
                KafkaOrphan(record.keys["log"], 0, ABANDONED, record.started_ms, record.segment_id)
            )
    for upload in uploads:
        if not is_kafka_key(upload.key):
            continue
        record = _segment(ctx, parse_remote_key(upload.key).segment_id)
        running = record is not None and record.state == COPY_STARTED
        if running and record is not None and record.segment_id not in abandoned:
            continue
        when = _ms(upload.initiated)
        if when is None or now_ms - when >= min_age_ms:
            (audit.uploads if record is not None else audit.foreign_uploads).append(upload)
    for record in ctx.meta.list_segments(states=[COPY_FINISHED]):
        for key in record.keys.values():
            if key in seen:
                continue
            try:
                ctx.store.head(key)
            except ObjectNotFound:
                audit.missing.append((record, key))
    return audit


def collect_kafka(ctx: KafkaContext, audit: KafkaAudit) -> int:
    """Remove what the audit found that this installation wrote: abandoned copies through the
    DELETE states, objects of deleted segments and our stray uploads directly (unclaimed
    segments and foreign uploads are left alone). How many objects and uploads were removed."""
    removed = 0
    done: set[str] = set()
    for record in audit.abandoned:
        current = _segment(ctx, record.segment_id)
        if current is None or current.state != COPY_STARTED:
            continue  # finished or cleaned meanwhile: not ours to touch
        delete_remote_segment(ctx, current, "abandoned copy (orphan gc)")
        done.add(record.segment_id)
        removed += sum(1 for o in audit.objects if o.segment_id == record.segment_id and o.size)
    for orphan in audit.objects:
        if orphan.segment_id in done or orphan.reason in (ABANDONED, UNCLAIMED):
            continue
        owner = _segment(ctx, orphan.segment_id)
        if owner is not None and owner.state != DELETE_FINISHED:
            continue  # claimed meanwhile
        ctx.store.delete(orphan.key)
        removed += 1
    for upload in audit.uploads:
        ctx.store.abort_multipart_upload(upload.key, upload.upload_id)
        removed += 1
    return removed


__all__ = ["KafkaAudit", "audit_kafka", "collect_kafka", "delete_objects", "is_kafka_key"]
