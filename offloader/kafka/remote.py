"""Removing remote Kafka segments through DELETE_SEGMENT_STARTED -> DELETE_SEGMENT_FINISHED.

Used for failed or abandoned copies (their half-written objects and open multipart uploads), for
remote retention, and by the orphan audit. Deleting is idempotent: a missing object is fine, so
a crash between the two states is finished by the next run. Each deletion is counted in the
tier's metrics (KIP-405's RemoteDeleteRequestsPerSec / RemoteDeleteErrorsPerSec).
"""

from __future__ import annotations

from offloader.crashpoints import crash_point
from offloader.errors import OffloaderError
from offloader.kafka.context import KafkaContext
from offloader.kafka.manifests import delete_segment_markers
from offloader.logs import get_logger
from offloader.metadata.kafka_base import (
    COPY_FINISHED,
    COPY_STARTED,
    DELETE_STARTED,
    RemoteSegmentRecord,
)

log = get_logger(__name__)


def delete_objects(ctx: KafkaContext, record: RemoteSegmentRecord) -> None:
    """Delete every object of the segment and abort its open multipart uploads; its
    completion marker first (a marker never names objects that are gone)."""
    delete_segment_markers(ctx.store, record)
    for key in record.keys.values():
        for upload in ctx.store.list_multipart_uploads(key):
            if upload.key == key:
                ctx.store.abort_multipart_upload(key, upload.upload_id)
        ctx.store.delete(key)


def delete_remote_segment(
    ctx: KafkaContext, record: RemoteSegmentRecord, reason: str
) -> RemoteSegmentRecord:
    """Move the segment to DELETE_SEGMENT_STARTED (recording ``reason``), delete its objects,
    then DELETE_SEGMENT_FINISHED."""
    if record.state in (COPY_STARTED, COPY_FINISHED):
        record = ctx.meta.start_delete(record.segment_id, ctx.now_ms(), error=reason)
    if record.state != DELETE_STARTED:
        return record
    crash_point("kafka.after_start_delete")
    try:
        delete_objects(ctx, record)
        done = ctx.meta.finish_delete(record.segment_id, ctx.now_ms())
    except OffloaderError:
        ctx.metrics.record_kafka_delete(record.topic, ok=False)
        raise
    ctx.metrics.record_kafka_delete(record.topic, ok=True)
    log.info(
        "remote Kafka segment deleted",
        topic=record.topic,
        partition=record.partition,
        base_offset=record.base_offset,
        segment_id=record.segment_id,
        reason=reason,
    )
    return done


def clean_stale_attempts(
    ctx: KafkaContext, topic: str, partition: int, *, locked: bool = False
) -> list[str]:
    """Finish the deletion of abandoned attempts of one partition: COPY_SEGMENT_STARTED older
    than the stale age (any age when ``locked``: the caller holds the partition's upload lock,
    so no other uploader is in the middle of one), and DELETE_SEGMENT_STARTED left by a crash
    (or marked as a duplicate copy by the schema migration). Their segment ids."""
    now = ctx.now_ms()
    cleaned = []
    for record in ctx.meta.list_segments(topic, partition, states=[COPY_STARTED, DELETE_STARTED]):
        young = now - record.started_ms < ctx.settings.stale_attempt_ms
        if record.state == COPY_STARTED and young and not locked:
            continue
        delete_remote_segment(ctx, record, "abandoned copy (uploader stopped mid-upload)")
        cleaned.append(record.segment_id)
    return cleaned
