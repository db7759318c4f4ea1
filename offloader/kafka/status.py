"""``kafka status``: per partition, the local and remote offset ranges, watermark, lag, gaps,
and the remote ``.log`` bytes (one copy per offset counted: ``live_copies``): original (from
the metadata) and stored (a HEAD of each transformed segment's ``.log``: chunked, it differs
from the original size)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from offloader.errors import KafkaMetadataError, ObjectNotFound
from offloader.kafka.context import KafkaContext
from offloader.kafka.leadership import ClusterRole
from offloader.kafka.logdir import UnreadablePartition, scan_log_dir
from offloader.kafka.segments import live_copies
from offloader.kafka.transform_read import is_transformed
from offloader.kafka.types import PartitionStatus
from offloader.metadata.kafka_base import COPY_FINISHED, COPY_STARTED, RemoteSegmentRecord
from offloader.store.base import ObjectStore


def partition_status(
    ctx: KafkaContext, topic: str | None = None, log_dir: Path | None = None
) -> list[PartitionStatus]:
    local: dict[tuple[str, int], tuple[str, int, int | None]] = {}
    unreadable: list[UnreadablePartition] = []
    if log_dir is not None:
        wanted = None if topic is None else _literal(topic)
        for part in scan_log_dir(log_dir, wanted, unreadable):
            if part.segments:
                closed = part.closed
                # offsets of closed segments end where the active one starts
                active = [s for s in part.segments if s.active]
                closed_end = active[0].base_offset - 1 if active else None
                local[(part.topic, part.partition)] = (
                    part.topic_id,
                    part.segments[0].base_offset,
                    closed_end if closed else None,
                )
    gate = ctx.gate
    broker_id = None
    unavailable = None
    if gate is not None:
        try:
            gate.view.refresh()
            if log_dir is not None:
                broker_id = gate.broker_id(log_dir)
        except KafkaMetadataError as exc:  # the status all the same, saying why it has no roles
            gate, unavailable = None, f"cluster metadata unavailable: {exc}"
    gaps = ctx.meta.list_gaps(topic)
    records = {(p.topic, p.partition): p for p in ctx.meta.list_partitions(topic)}
    problems = {(u.topic, u.partition): u.error for u in unreadable}
    out = []
    for key in sorted(set(records) | set(local) | set(problems)):
        record = records.get(key)
        segments = ctx.meta.list_segments(key[0], key[1])
        finished = live_copies(s for s in segments if s.state == COPY_FINISHED)
        watermark = record.watermark if record is not None else -1
        local_info = local.get(key)
        closed_end = local_info[2] if local_info else None
        lag = None if closed_end is None else max(0, closed_end - watermark)
        role = None if gate is None else gate.role(key[0], key[1], broker_id)
        if gate is not None and role is not None and role.reason is None and lag:
            waiting = gate.copy_lag_reason(key[0])  # the leader holds closed segments back
            if waiting is not None:
                role = dataclasses.replace(role, reason=waiting)
        out.append(
            PartitionStatus(
                topic=key[0],
                partition=key[1],
                topic_id=record.topic_id if record else (local_info[0] if local_info else None),
                local_start=local_info[1] if local_info else None,
                local_end=closed_end,
                remote_start=min((s.first_offset for s in finished), default=None),
                remote_end=max((s.end_offset for s in finished), default=None),
                watermark=watermark,
                remote_segments=len(finished),
                remote_bytes=sum(s.size_bytes for s in finished),
                remote_stored_bytes=stored_bytes(ctx.store, finished),
                upload_lag=lag,
                gaps=tuple(
                    (g.start_offset, g.end_offset, g.reason)
                    for g in gaps
                    if (g.topic, g.partition) == key
                ),
                in_progress=sum(1 for s in segments if s.state == COPY_STARTED),
                last_error=problems.get(key) or (record.last_error if record else None),
                **_cluster_fields(role, broker_id, finished, unavailable),
            )
        )
    return out


def _cluster_fields(
    role: ClusterRole | None,
    broker_id: int | None,
    finished: Sequence[RemoteSegmentRecord],
    unavailable: str | None,
) -> dict[str, Any]:
    if role is None:
        return {"not_uploading": unavailable} if unavailable else {}
    reason = role.reason
    if reason is not None and reason.startswith("compacted topic") and finished:
        listed = ", ".join(f"{s.base_offset}..{s.end_offset}" for s in finished)
        reason += f"; already uploaded before: {len(finished)} segment(s) {listed}"
    return {
        "role": role.role if broker_id is not None or role.role != "leader" else None,
        "leader": role.leader,
        "leader_epoch": role.leader_epoch,
        "not_uploading": reason,
    }


def stored_bytes(store: ObjectStore, segments: Sequence[RemoteSegmentRecord]) -> int | None:
    """What the segments' ``.log`` objects take in the store (None if one is missing)."""
    total = 0
    for seg in segments:
        if not is_transformed(seg):
            total += seg.size_bytes  # stored byte for byte
            continue
        try:
            total += store.head(seg.keys["log"]).size
        except ObjectNotFound:
            return None  # `objects orphans` reports the missing object
    return total


def _literal(topic: str) -> str:
    import re

    return re.escape(topic)
