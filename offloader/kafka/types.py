"""The values the Kafka tier returns to the facade (frozen, JSON-friendly)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, NamedTuple

#: ``busy``: another uploader holds the partition (its lock, or a live copy of the offsets);
#: this one left it alone; ``skipped``: the cluster's metadata keeps the partition (or, from
#: this segment on, the rest of it) out of this pass (not the leader, not tiered, copy lag, a
#: diverging leader epoch lineage: the detail says which)
SegmentOutcomeKind = Literal["uploaded", "gap", "corrupt", "failed", "empty", "busy", "skipped"]


@dataclass(frozen=True)
class SegmentOutcome:
    topic: str
    partition: int
    base_offset: int
    kind: SegmentOutcomeKind
    end_offset: int | None = None
    segment_id: str | None = None
    size_bytes: int = 0
    from_deleted: bool = False
    detail: str | None = None


@dataclass
class UploadReport:
    segments: list[SegmentOutcome] = field(default_factory=list)
    #: segment ids of abandoned attempts cleaned up before uploading
    cleaned: list[str] = field(default_factory=list)
    partitions: int = 0

    def of(self, kind: SegmentOutcomeKind) -> list[SegmentOutcome]:
        return [s for s in self.segments if s.kind == kind]

    @property
    def ok(self) -> bool:
        return not self.of("corrupt") and not self.of("failed")


class KafkaRecordRow(NamedTuple):
    """One record read back (``kafka read``, the Spark source's rows). A named tuple: made
    a thousand at a time per fetch, it costs a tenth of a frozen dataclass."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    tier: str = "remote"


@dataclass(frozen=True)
class PartitionStatus:
    topic: str
    partition: int
    topic_id: str | None
    local_start: int | None
    local_end: int | None  # last offset of the newest local segment (active included)
    remote_start: int | None
    remote_end: int | None
    watermark: int
    remote_segments: int
    #: original bytes of the finished segments' ``.log`` files (as Kafka wrote them)
    remote_bytes: int
    upload_lag: int | None  # offsets in closed local segments not yet remote
    gaps: tuple[tuple[int, int, str], ...] = ()
    in_progress: int = 0
    last_error: str | None = None
    #: bytes those ``.log`` objects take in the store: a transformed segment's chunked size
    #: (one HEAD each), a plain one's original size; None when an object could not be sized
    remote_stored_bytes: int | None = None
    #: with the cluster's metadata: ``leader`` / ``follower`` (this broker, by the log dir's
    #: meta.properties) / ``offline`` / ``no metadata``; None without it (or without a log dir)
    role: str | None = None
    #: the partition's leader and leader epoch in the cluster's metadata
    leader: int | None = None
    leader_epoch: int | None = None
    #: why the partition is not uploading (not the leader, not tiered, compacted, ...)
    not_uploading: str | None = None
