"""Adopting a partition's finished copies from the bucket: how a sidecar with its own metadata
(a SQLite home per broker, no shared PostgreSQL store) carries on after a leadership change.

When it gains the leadership of a partition (its first pass as leader, or the first after
another sidecar led), the leader's sidecar reads what the bucket says is finished
(spec/kafka-manifests.md): the partition's completion markers (one LIST of its marker
prefix; the body of a marker whose copy it has not recorded is read for the copy's object
keys) and, when its metadata has no record of the partition, its watermark objects (one
LIST; the highest key is the watermark, which stands above the markers when remote retention
has deleted the oldest copies). It records the partition at that watermark when its
metadata has none, and each marked copy it has not recorded as COPY_SEGMENT_FINISHED, the
way ``metadata rebuild`` does, so the upload that follows starts after the last finished
offset and never re-uploads a finished segment. On a shared PostgreSQL store every copy is
recorded already: one LIST.

Only copies of the same topic id are adopted (a re-created topic starts afresh). Of two
marked copies whose offsets overlap (two uploaders before the gate, a re-upload after a lost
``finish_copy``) the one with the lower start offset, then the lower segment id, is kept, as
a rebuild keeps it; the other is left to the orphan audit."""

from __future__ import annotations

import contextlib

from formats.kafka.manifest import (
    KAFKA_KIND,
    SegmentMarker,
    decode_segment_marker_body,
    parse_segment_marker_key,
    segment_marker_prefix,
    watermark_name,
)
from formats.manifest import parse_watermark_key, watermark_prefix
from offloader.crashpoints import crash_point
from offloader.errors import FormatError, InvalidKeyError, NotFound, OffloadConflict
from offloader.kafka.context import KafkaContext
from offloader.kafka.logdir import LocalPartition
from offloader.logs import get_logger
from offloader.metadata.kafka_base import COPY_STARTED, NewRemoteSegment

__all__ = ["adopt_bucket_copies"]

log = get_logger(__name__)


def bucket_watermark(ctx: KafkaContext, topic: str, topic_id: str, partition: int) -> int:
    """The partition's watermark object's position (-1: none written)."""
    prefix = watermark_prefix(KAFKA_KIND, watermark_name(topic, topic_id, partition))
    best = -1
    for info in ctx.store.list(prefix):
        with contextlib.suppress(InvalidKeyError):
            best = max(best, parse_watermark_key(info.key).position)
    return best


def bucket_markers(
    ctx: KafkaContext, topic: str, topic_id: str, partition: int
) -> list[SegmentMarker]:
    """The partition's finished copies of ``topic_id`` this metadata has not recorded as
    finished (or deleted), as their markers say, overlaps resolved (lower start offset, then
    lower segment id, kept), in offset order. A recorded copy is told by the segment id in
    its marker's key: only the others' bodies are read."""
    found: list[SegmentMarker] = []
    for info in list(ctx.store.list(segment_marker_prefix(topic, partition))):
        try:
            if _state(ctx, parse_segment_marker_key(info.key).segment_id) not in (
                None,
                COPY_STARTED,
            ):
                continue  # recorded already: no GET
            marker = decode_segment_marker_body(ctx.store.get(info.key).data)
        except (InvalidKeyError, FormatError, NotFound) as exc:
            log.warning("Kafka segment marker not adopted", key=info.key, error=str(exc))
            continue
        if marker.topic_id == topic_id:
            found.append(marker)
    kept: list[SegmentMarker] = []
    for marker in sorted(found, key=lambda m: (m.start_offset, m.segment_id)):
        if kept and marker.start_offset <= kept[-1].end_offset:
            continue  # a second copy of offsets already kept
        kept.append(marker)
    return kept


def _state(ctx: KafkaContext, segment_id: str) -> str | None:
    try:
        return ctx.meta.get_segment(segment_id).state
    except NotFound:
        return None


def adopt_bucket_copies(ctx: KafkaContext, partition: LocalPartition) -> int:
    """Record the bucket's finished copies of a partition that this metadata has not (and,
    when it has no record of the partition, the bucket's watermark); how many were recorded
    (0: the bucket has nothing new). A copy recorded COPY_SEGMENT_STARTED whose marker is in
    the bucket is finished (its objects are complete): a kill during an earlier adoption, or
    between this home's own marker PUT and ``finish_copy``, never leaves a finished copy to be
    cleaned as a stale attempt."""
    topic, number, topic_id = partition.topic, partition.partition, partition.topic_id
    record = ctx.meta.get_partition(topic, number)
    if record is not None and record.topic_id != topic_id:
        return 0  # a re-created topic: the upload reports the conflict
    markers = bucket_markers(ctx, topic, topic_id, number)
    if record is None:
        bucket = bucket_watermark(ctx, topic, topic_id, number)
        watermark = max([bucket, *(m.end_offset for m in markers)])
        if watermark < 0:
            return 0
        ctx.meta.ensure_partition(topic, number, topic_id, ctx.now_ms(), watermark=watermark)
    adopted = 0
    for m in markers:
        if _state(ctx, m.segment_id) is None:
            try:
                ctx.meta.start_copy(
                    NewRemoteSegment.of_marker(m, m.keys),
                    m.finished_ms,
                )
            except OffloadConflict as exc:
                log.warning("Kafka copy not adopted", segment_id=m.segment_id, error=str(exc))
                continue
            crash_point("kafka.adopt_after_start_copy")
        ctx.meta.finish_copy(m.segment_id, m.finished_ms, log_crc32c=m.log_crc32c)
        adopted += 1
    log.info(
        "Kafka partition adopted from the bucket",
        topic=topic,
        partition=number,
        segments=adopted,
    )
    return adopted
