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
  reach the store);
* ``kafka-superseded-copy``: a segment id no record of this installation knows whose offsets
  this installation's finished copies already hold, all of them, in the same partition of
  the same topic id: a second finished copy (``metadata rebuild`` reports it ``superseded``:
  its marker gives the offsets) or an unfinished attempt (rebuild's ``orphan``: no marker,
  its key's base offset), every object and upload of it older than ``min_age_ms``. gc
  deletes it only when the caller gave the minimum age itself (``objects gc --min-age``;
  ``collect_superseded``), never by the default age, and checks again just before deleting
  that no record claims it and that the finished copies still hold its offsets; its marker
  goes first (a rebuild never sees a marker without its objects), its uploads are aborted;
* ``kafka-unclaimed-segment``: any other segment id no record of this installation knows
  (another uploader's, sharing the bucket, for all we know): reported, never deleted.
* incomplete multipart uploads of Kafka keys not claimed by a running copy (aborted by gc only
  when a record of ours names their segment, or their segment is a superseded copy gc
  collects; others are ``foreign_uploads``, left alone);
* ``missing``: objects of COPY_SEGMENT_FINISHED records that the store no longer has.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from formats.errors import FormatError, InvalidKeyError
from formats.kafka.manifest import (
    KAFKA_MARKERS,
    SegmentMarker,
    decode_segment_marker_body,
    parse_segment_marker_key,
)
from formats.kafka.names import is_remote_key, parse_remote_key
from offloader.errors import NotFound, ObjectNotFound, OffloaderError
from offloader.kafka.context import KafkaContext
from offloader.kafka.remote import delete_objects, delete_remote_segment
from offloader.logs import get_logger
from offloader.metadata.kafka_base import (
    COPY_FINISHED,
    COPY_STARTED,
    DELETE_FINISHED,
    RemoteSegmentRecord,
)
from offloader.store.base import MultipartUploadInfo, ObjectInfo

log = get_logger(__name__)

ABANDONED = "kafka-abandoned-copy"
DELETED = "kafka-deleted-segment"
SUPERSEDED = "kafka-superseded-copy"
UNCLAIMED = "kafka-unclaimed-segment"

#: (topic, topic id, partition)
Partition = tuple[str, str, int]


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
    #: whether gc removes it (``kafka-unclaimed-segment`` never; a superseded copy only
    #: with the caller's own minimum age)
    deletable: bool = True


@dataclass(frozen=True)
class SupersededCopy:
    """An unclaimed segment id whose offsets ``first..last`` finished copies of ours hold."""

    segment_id: str
    partition: Partition
    first: int
    last: int
    #: its completion marker's key, if it has one (deleted before its objects)
    marker_key: str | None


@dataclass
class KafkaAudit:
    objects: list[KafkaOrphan] = field(default_factory=list)
    uploads: list[MultipartUploadInfo] = field(default_factory=list)
    #: stray uploads of segment ids this installation never recorded: reported, never aborted
    foreign_uploads: list[MultipartUploadInfo] = field(default_factory=list)
    #: (record, key) of finished segments whose object is gone
    missing: list[tuple[RemoteSegmentRecord, str]] = field(default_factory=list)
    abandoned: list[RemoteSegmentRecord] = field(default_factory=list)
    #: unclaimed copies gc may collect (``kafka-superseded-copy``), by segment id
    superseded: dict[str, SupersededCopy] = field(default_factory=dict)


def _ms(when: datetime | None) -> int | None:
    return None if when is None else int(when.timestamp() * 1000)


def _segment(ctx: KafkaContext, segment_id: str) -> RemoteSegmentRecord | None:
    try:
        return ctx.meta.get_segment(segment_id)
    except NotFound:
        return None


def _finished_ranges(ctx: KafkaContext) -> dict[Partition, list[tuple[int, int]]]:
    """The offsets this installation's finished copies hold, per partition (sorted)."""
    ranges: dict[Partition, list[tuple[int, int]]] = defaultdict(list)
    for r in ctx.meta.list_segments(states=[COPY_FINISHED]):
        ranges[(r.topic, r.topic_id, r.partition)].append((r.first_offset, r.end_offset))
    return {part: sorted(spans) for part, spans in ranges.items()}


def _covered(spans: Sequence[tuple[int, int]], first: int, last: int) -> bool:
    """Whether the sorted ``spans`` hold every offset of ``first..last``."""
    at = first
    for start, end in spans:
        if start > at:
            return False
        at = max(at, end + 1)
        if at > last:
            return True
    return at > last


@dataclass
class _Unclaimed:
    """What the listing holds of one segment id that no record of ours knows."""

    objects: list[ObjectInfo] = field(default_factory=list)
    uploads: list[MultipartUploadInfo] = field(default_factory=list)
    #: (topic, topic id, partition, base offset) from an object's or upload's key
    where: tuple[str, str, int, int] | None = None
    marker_key: str | None = None
    marker: SegmentMarker | None = None


def _offsets_of(ctx: KafkaContext, found: _Unclaimed) -> tuple[Partition, int, int] | None:
    """The partition and offsets an unclaimed copy answers for: its marker's (read from its
    body when the key cannot carry it), else its key's base offset (an unfinished attempt);
    None when neither says."""
    marker = found.marker
    if marker is None and found.marker_key is not None:
        try:
            marker = decode_segment_marker_body(ctx.store.get(found.marker_key).data)
        except (OffloaderError, FormatError) as exc:
            log.warning("Kafka marker unreadable", marker=found.marker_key, error=str(exc))
            return None
    if marker is not None:
        part = (marker.topic, marker.topic_id, marker.partition)
        return part, marker.start_offset, marker.end_offset
    if found.where is None:
        return None
    topic, topic_id, partition, base = found.where
    return (topic, topic_id, partition), base, base


def _superseded(
    ctx: KafkaContext,
    segment_id: str,
    found: _Unclaimed,
    ranges: dict[Partition, list[tuple[int, int]]],
    now_ms: int,
    min_age_ms: int,
) -> SupersededCopy | None:
    times = [_ms(o.last_modified) for o in found.objects] + [
        _ms(u.initiated) for u in found.uploads
    ]
    if any(when is None or now_ms - when < min_age_ms for when in times):
        return None  # a part of it is young (or undated): an upload may be running
    offsets = _offsets_of(ctx, found)
    if offsets is None:
        return None
    part, first, last = offsets
    if not _covered(ranges.get(part, ()), first, last):
        return None
    return SupersededCopy(segment_id, part, first, last, found.marker_key)


def audit_kafka(
    ctx: KafkaContext,
    listed: Iterable[ObjectInfo],
    uploads: Iterable[MultipartUploadInfo],
    now_ms: int,
    min_age_ms: int,
    *,
    collect_superseded: bool = False,
) -> KafkaAudit:
    """See the module docstring; ``listed``/``uploads`` are the whole store's (others skipped).
    ``collect_superseded``: the caller gave ``min_age_ms`` itself, so superseded copies are
    reported deletable (gc removes them)."""
    audit = KafkaAudit()
    unclaimed: dict[str, _Unclaimed] = defaultdict(_Unclaimed)
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
        if record is None:
            _note_unclaimed(unclaimed[segment_id], info)
            continue
        if when is not None and now_ms - when < min_age_ms:
            continue
        audit.objects.append(KafkaOrphan(info.key, info.size, DELETED, when, segment_id))
    for record in abandoned.values():
        if not any(key in seen for key in record.keys.values()):
            audit.objects.append(
                KafkaOrphan(record.keys["log"], 0, ABANDONED, record.started_ms, record.segment_id)
            )
    stray: list[tuple[MultipartUploadInfo, str]] = []
    for upload in uploads:
        if not is_kafka_key(upload.key):
            continue
        remote = parse_remote_key(upload.key)
        record = _segment(ctx, remote.segment_id)
        running = record is not None and record.state == COPY_STARTED
        if running and record is not None and record.segment_id not in abandoned:
            continue
        if record is None:
            found = unclaimed[remote.segment_id]
            found.uploads.append(upload)
            if found.where is None:
                found.where = (remote.topic, remote.topic_id, remote.partition, remote.base_offset)
            stray.append((upload, remote.segment_id))
            continue
        when = _ms(upload.initiated)
        if when is None or now_ms - when >= min_age_ms:
            audit.uploads.append(upload)
    ranges = _finished_ranges(ctx) if unclaimed else {}
    for segment_id, found in unclaimed.items():
        copy = _superseded(ctx, segment_id, found, ranges, now_ms, min_age_ms)
        if copy is not None:
            audit.superseded[segment_id] = copy
        reason = UNCLAIMED if copy is None else SUPERSEDED
        deletable = copy is not None and collect_superseded
        for info in found.objects:
            when = _ms(info.last_modified)
            if when is not None and now_ms - when < min_age_ms:
                continue
            audit.objects.append(
                KafkaOrphan(info.key, info.size, reason, when, segment_id, deletable)
            )
    for upload, segment_id in stray:
        when = _ms(upload.initiated)
        if when is None or now_ms - when >= min_age_ms:
            collect = collect_superseded and segment_id in audit.superseded
            (audit.uploads if collect else audit.foreign_uploads).append(upload)
    if not collect_superseded:
        audit.superseded.clear()
    for record in ctx.meta.list_segments(states=[COPY_FINISHED]):
        for key in record.keys.values():
            if key in seen:
                continue
            try:
                ctx.store.head(key)
            except ObjectNotFound:
                audit.missing.append((record, key))
    return audit


def _note_unclaimed(found: _Unclaimed, info: ObjectInfo) -> None:
    found.objects.append(info)
    if info.key.startswith(KAFKA_MARKERS):
        parsed = parse_segment_marker_key(info.key)  # parsed once already: it is valid
        found.marker_key, found.marker = info.key, parsed.marker
        return
    remote = parse_remote_key(info.key)
    if found.where is None:
        found.where = (remote.topic, remote.topic_id, remote.partition, remote.base_offset)


def _collect_superseded(ctx: KafkaContext, audit: KafkaAudit) -> tuple[set[str], int]:
    """Delete the superseded copies the audit found (their marker first), each checked again
    just before: still no record of it, its offsets still held by finished copies. The
    segment ids removed and how many objects went."""
    done: set[str] = set()
    removed = 0
    if not audit.superseded:
        return done, removed
    ranges = _finished_ranges(ctx)
    for segment_id, copy in audit.superseded.items():
        if _segment(ctx, segment_id) is not None:
            continue  # claimed meanwhile
        if not _covered(ranges.get(copy.partition, ()), copy.first, copy.last):
            continue  # the copies that held its offsets are gone meanwhile
        keys = [o.key for o in audit.objects if o.segment_id == segment_id and o.deletable]
        keys.sort(key=lambda key: key != copy.marker_key)  # the marker first
        for key in keys:
            ctx.store.delete(key)
            removed += 1
        done.add(segment_id)
        log.info(
            "superseded Kafka copy deleted (orphan gc)",
            segment_id=segment_id,
            topic=copy.partition[0],
            partition=copy.partition[2],
            first_offset=copy.first,
            last_offset=copy.last,
            objects=len(keys),
        )
    return done, removed


def collect_kafka(ctx: KafkaContext, audit: KafkaAudit) -> int:
    """Remove what the audit found that this installation wrote: abandoned copies through the
    DELETE states, objects of deleted segments and our stray uploads directly, and superseded
    copies when the audit collects them (unclaimed segments and foreign uploads are left
    alone). How many objects and uploads were removed."""
    removed = 0
    done: set[str] = set()
    for record in audit.abandoned:
        current = _segment(ctx, record.segment_id)
        if current is None or current.state != COPY_STARTED:
            continue  # finished or cleaned meanwhile: not ours to touch
        delete_remote_segment(ctx, current, "abandoned copy (orphan gc)")
        done.add(record.segment_id)
        removed += sum(1 for o in audit.objects if o.segment_id == record.segment_id and o.size)
    superseded, gone = _collect_superseded(ctx, audit)
    removed += gone
    for orphan in audit.objects:
        if orphan.segment_id in done or orphan.reason in (ABANDONED, SUPERSEDED, UNCLAIMED):
            continue
        owner = _segment(ctx, orphan.segment_id)
        if owner is not None and owner.state != DELETE_FINISHED:
            continue  # claimed meanwhile
        ctx.store.delete(orphan.key)
        removed += 1
    for upload in audit.uploads:
        segment_id = parse_remote_key(upload.key).segment_id
        if segment_id in audit.superseded and segment_id not in superseded:
            continue  # its copy was claimed (or uncovered) meanwhile: left as it is
        ctx.store.abort_multipart_upload(upload.key, upload.upload_id)
        removed += 1
    return removed


__all__ = [
    "SUPERSEDED",
    "KafkaAudit",
    "SupersededCopy",
    "audit_kafka",
    "collect_kafka",
    "delete_objects",
    "is_kafka_key",
]
