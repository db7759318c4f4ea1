"""KIP-405's copy lag of a broker's log directory: per partition, the bytes and the number of
closed segments not in remote storage yet (``RemoteCopyLagBytes``, ``RemoteCopyLagSegments``);
and the size of each partition's remote log (KIP-963's ``RemoteLogSizeBytes``, and
``RemoteLogMetadataCount``: its copied segments), from the metadata store.

Read-only, like every look at Kafka's files: the partition's closed segments (a live or a
``.deleted`` name) against its remote watermark (:func:`offloader.metrics.lag.kafka_copy_lag`).
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

from offloader.kafka.context import KafkaContext
from offloader.kafka.logdir import scan_log_dir
from offloader.metadata.kafka_base import COPY_FINISHED
from offloader.metrics.lag import kafka_copy_lag
from offloader.selection import TopicSelection

__all__ = ["PartitionCopyLag", "PartitionRemoteSize", "copy_lags", "remote_log_sizes"]


class PartitionCopyLag(NamedTuple):
    topic: str
    partition: int
    bytes: int
    segments: int


def copy_lags(
    ctx: KafkaContext, log_dir: Path, topics: str | TopicSelection | None = None
) -> list[PartitionCopyLag]:
    """The copy lag of every partition of ``log_dir`` whose topic ``topics`` selects."""
    watermarks = {(p.topic, p.partition): p.watermark for p in ctx.meta.list_partitions()}
    out = []
    for part in scan_log_dir(log_dir, topics):
        closed = []
        for segment in part.closed:
            try:
                closed.append((segment.base_offset, segment.path("log").stat().st_size))
            except FileNotFoundError:
                continue  # removed by Kafka since the scan
        lag = kafka_copy_lag(closed, watermarks.get((part.topic, part.partition), -1))
        out.append(PartitionCopyLag(part.topic, part.partition, lag.bytes, lag.count))
    return out


class PartitionRemoteSize(NamedTuple):
    topic: str
    partition: int
    bytes: int
    segments: int


def remote_log_sizes(ctx: KafkaContext) -> list[PartitionRemoteSize]:
    """The ``.log`` bytes and the number of the copied segments (COPY_SEGMENT_FINISHED) of
    every partition the metadata store knows (0 for one with none)."""
    out = []
    for part in ctx.meta.list_partitions():
        copied = ctx.meta.list_segments(part.topic, part.partition, states=[COPY_FINISHED])
        size = sum(s.size_bytes for s in copied)
        out.append(PartitionRemoteSize(part.topic, part.partition, size, len(copied)))
    return out
