"""The bucket side of a Kafka segment copy: its completion marker and the partition's watermark
object (spec/kafka-manifests.md), written so that the store alone can rebuild the records.

Order of one copy (:mod:`offloader.kafka.upload`): every object complete and checked unchanged
→ :func:`write_segment_marker` (the copy is now *finished* in the bucket) → ``finish_copy`` in
the metadata store → :func:`raise_partition_watermark` (never moves backwards; lower keys are
never deleted). The watermark comes after ``finish_copy`` so that it never stands above a copy
that is then rolled back (a failed ``finish_copy``, or a stale attempt cleaned by the next run
of the same home: both delete the copy, its marker first); a kill between the two leaves it
behind the markers, which a rebuild reads as well. Deleting a copy's objects deletes its
marker first (:func:`delete_segment_markers`, called by
:func:`offloader.kafka.remote.delete_objects`), so a marker never names objects that are gone.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from dataclasses import replace

from formats.errors import FormatError
from formats.kafka.manifest import (
    KAFKA_KIND,
    SegmentMarker,
    decode_segment_marker_body,
    encode_segment_marker_body,
    parse_segment_marker_key,
    segment_marker_key,
    segment_marker_prefix,
    transform_token,
    watermark_name,
)
from formats.kafka.names import kafka_uuid_to_uuid
from formats.keys import SOFTWARE_VERSION_KEY
from formats.manifest import encode_watermark_body, watermark_key
from offloader import __version__
from offloader.crashpoints import crash_point
from offloader.errors import InvalidKeyError, OffloaderError, PreconditionFailed
from offloader.kafka.context import KafkaContext
from offloader.logs import get_logger
from offloader.metadata.kafka_base import NewRemoteSegment, RemoteSegmentRecord, SegmentChecks
from offloader.offload.manifests import MANIFEST_KIND_KEY
from offloader.store.base import ObjectStore

log = get_logger(__name__)

__all__ = [
    "delete_segment_markers",
    "raise_partition_watermark",
    "rewrite_marker_checks",
    "segment_marker",
    "write_segment_marker",
]


def segment_marker(
    segment: NewRemoteSegment | RemoteSegmentRecord,
    *,
    log_crc32c: int,
    transform: str,
    finished_ms: int,
    checks: SegmentChecks | None = None,
    max_timestamp: int | None = None,
) -> SegmentMarker:
    """The marker of a finished copy of ``segment`` (``transform``: the pinned description;
    ``checks`` and ``max_timestamp``: what ``finish_copy`` pins, so that a rebuild from the
    marker recreates the record exactly)."""
    return SegmentMarker(
        topic=segment.topic,
        topic_id=segment.topic_id,
        partition=segment.partition,
        base_offset=segment.base_offset,
        segment_id=segment.segment_id,
        start_offset=segment.first_offset,
        end_offset=segment.end_offset,
        max_timestamp=segment.max_timestamp if max_timestamp is None else max_timestamp,
        log_size=segment.size_bytes,
        log_crc32c=log_crc32c,
        transform=transform_token(transform),
        kinds=tuple(segment.keys),
        finished_ms=finished_ms,
        leader_epochs=dict(segment.leader_epochs),
        transform_detail=transform,
        keys=dict(segment.keys),
        checks={} if checks is None else {k: c.encode() for k, c in checks.objects.items()},
        started_ms=getattr(segment, "started_ms", None),
        next_chunks=None
        if checks is None or checks.next_chunks is None
        else checks.next_chunks.encode(),
    )


def write_segment_marker(
    store: ObjectStore,
    segment: NewRemoteSegment | RemoteSegmentRecord,
    *,
    log_crc32c: int,
    transform: str,
    finished_ms: int,
    checks: SegmentChecks | None = None,
    max_timestamp: int | None = None,
) -> str:
    """PUT the copy's completion marker (``if_none_match``: the key is the copy's own); its
    key. Called once every object of the copy is complete, before ``finish_copy``, with the
    ``checks``, ``max_timestamp`` and ``finished_ms`` that it pins."""
    marker = segment_marker(
        segment,
        log_crc32c=log_crc32c,
        transform=transform,
        finished_ms=finished_ms,
        checks=checks,
        max_timestamp=max_timestamp,
    )
    key = segment_marker_key(marker)
    metadata = {MANIFEST_KIND_KEY: "kafka-segment-marker-v1", SOFTWARE_VERSION_KEY: __version__}
    with contextlib.suppress(PreconditionFailed):  # a retried PUT of the same marker
        store.put(key, encode_segment_marker_body(marker), metadata, if_none_match=True)
    crash_point("kafka.after_marker_put")
    return key


def raise_partition_watermark(ctx: KafkaContext, segment: RemoteSegmentRecord) -> bool:
    """Raise the partition's watermark object to the finished segment's end offset: one PUT
    of a new key (``if_none_match``), lower ones never deleted. False when the PUT failed
    (logged: the copy is finished all the same, the next one raises it and a rebuild reads
    the markers too).

    Unlike :func:`offloader.offload.manifests.advance_watermark` it lists nothing first: the
    bucket's watermark is written after ``finish_copy``, so it is never above the partition's
    recorded watermark, which this segment's end just passed; and where it is (another home
    with its own metadata uploading the same partition), a lower key beside a higher one is
    harmless: the highest key is the watermark. Called after ``finish_copy``: a copy whose
    ``finish_copy`` fails is deleted (its marker first), and a watermark written before it
    would then stand above every marker."""
    name = watermark_name(segment.topic, segment.topic_id, segment.partition)
    tag = str(kafka_uuid_to_uuid(segment.segment_id))
    position, now = segment.end_offset, ctx.now_ms()
    key = watermark_key(KAFKA_KIND, name, position, tag)
    body = encode_watermark_body(KAFKA_KIND, name, position, tag, now)
    metadata = {MANIFEST_KIND_KEY: f"watermark-{KAFKA_KIND}-v1", SOFTWARE_VERSION_KEY: __version__}
    try:
        with contextlib.suppress(PreconditionFailed):  # a retried PUT of the same key
            ctx.store.put(key, body, metadata, if_none_match=True)
    except OffloaderError as exc:
        log.warning(
            "Kafka partition watermark object not written; the next copy raises it",
            topic=segment.topic,
            partition=segment.partition,
            error=str(exc),
        )
        return False
    crash_point("manifest.after_watermark_put")
    return True


def rewrite_marker_checks(store: ObjectStore, record: RemoteSegmentRecord) -> int:
    """Make the copy's marker body carry the record's pinned checks (a re-key moved the
    ``.chunks`` pin: first ``next_chunks`` beside the old, then the new one alone), so that a
    rebuild at any point pins checksums the stored objects match. The key does not change:
    the body is replaced in place. The number of bodies rewritten (0: already so, or a copy
    from before markers)."""
    checks = record.checks
    if checks is None:
        return 0
    texts = {k: c.encode() for k, c in checks.objects.items()}
    nxt = None if checks.next_chunks is None else checks.next_chunks.encode()
    done = 0
    prefix = segment_marker_prefix(record.topic, record.partition, record.base_offset)
    for info in list(store.list(prefix)):
        try:
            if parse_segment_marker_key(info.key).segment_id != record.segment_id:
                continue
            got = store.get(info.key)
            body = decode_segment_marker_body(got.data)
        except (InvalidKeyError, FormatError):
            continue
        if body.checks == texts and body.next_chunks == nxt:
            continue
        new = replace(body, checks=texts, next_chunks=nxt)
        store.put(info.key, encode_segment_marker_body(new), got.metadata)
        done += 1
    crash_point("kafka.after_marker_rewrite")
    return done


def delete_segment_markers(store: ObjectStore, segment: RemoteSegmentRecord) -> None:
    """Delete the copy's completion marker(s), before its objects."""
    prefix = segment_marker_prefix(segment.topic, segment.partition, segment.base_offset)
    for info in list(store.list(prefix)):
        with contextlib.suppress(InvalidKeyError):
            if parse_segment_marker_key(info.key).segment_id == segment.segment_id:
                store.delete(info.key)
    crash_point("kafka.after_marker_delete")


def markers_of(store: ObjectStore, topic: str, partition: int) -> Mapping[str, str]:
    """Segment id -> marker key of one partition's markers (one listing)."""
    out: dict[str, str] = {}
    for info in store.list(segment_marker_prefix(topic, partition)):
        with contextlib.suppress(InvalidKeyError):
            out[parse_segment_marker_key(info.key).segment_id] = info.key
    return out
