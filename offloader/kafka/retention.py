"""Remote retention per topic (Kafka's ``retention.ms`` / ``retention.bytes`` for the tier).

A finished remote segment is deleted (DELETE_SEGMENT_STARTED -> objects -> FINISHED) when its max
timestamp is older than ``retention.ms``, or, oldest first, while the partition's remote bytes
exceed ``retention.bytes``. The newest segment of a partition is kept by the size rule (as Kafka
keeps the active segment), never by the time rule. Deletions a crash interrupted
(DELETE_SEGMENT_STARTED) are finished first.

With the cluster's metadata (``ctx.gate``) a topic follows its own ``retention.ms`` /
``retention.bytes`` as Kafka has them, unless the project's policy (``kafka set-retention``,
any value but the default keep-forever) overrides them.
"""

from __future__ import annotations

from offloader.kafka.context import KafkaContext
from offloader.kafka.remote import delete_remote_segment
from offloader.metadata.kafka_base import COPY_FINISHED, DELETE_STARTED


def apply_retention(ctx: KafkaContext, topic: str | None = None) -> list[str]:
    now = ctx.now_ms()
    deleted: list[str] = []
    for part in ctx.meta.list_partitions(topic):
        # finish deletions a crash interrupted (DELETE_SEGMENT_STARTED) first
        for stuck in ctx.meta.list_segments(part.topic, part.partition, states=[DELETE_STARTED]):
            delete_remote_segment(ctx, stuck, stuck.error or "interrupted deletion")
            deleted.append(stuck.segment_id)
        policy = ctx.meta.get_retention(part.topic)
        if ctx.gate is not None and policy.retention_ms < 0 and policy.retention_bytes < 0:
            policy = ctx.gate.retention(part.topic) or policy  # the topic's own, from Kafka
        if policy.retention_ms < 0 and policy.retention_bytes < 0:
            continue
        segments = ctx.meta.list_segments(part.topic, part.partition, states=[COPY_FINISHED])
        total = sum(s.size_bytes for s in segments)
        for i, segment in enumerate(segments):
            expired = policy.retention_ms >= 0 and now - segment.max_timestamp > policy.retention_ms
            too_big = policy.retention_bytes >= 0 and total > policy.retention_bytes
            if not (expired or too_big) or (too_big and not expired and i == len(segments) - 1):
                break
            reason = "retention.ms" if expired else "retention.bytes"
            delete_remote_segment(ctx, segment, f"remote retention ({reason})")
            total -= segment.size_bytes
            deleted.append(segment.segment_id)
    return deleted
