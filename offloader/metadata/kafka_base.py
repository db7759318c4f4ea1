"""The KafkaMetadataStore Protocol and its records: what the Kafka tier remembers, durably.

This module owns the model of Kafka remote segments (KIP-405's ``RemoteLogSegmentMetadata``): one
:class:`RemoteSegmentRecord` per upload attempt (a new segment id each time), moving through
``COPY_SEGMENT_STARTED -> COPY_SEGMENT_FINISHED -> DELETE_SEGMENT_STARTED ->
DELETE_SEGMENT_FINISHED`` (a failed or abandoned copy goes from STARTED straight to
DELETE_SEGMENT_STARTED); per partition (:class:`KafkaPartitionRecord`) the topic id, the
**watermark** (the highest offset whose segment is COPY_SEGMENT_FINISHED: safely remote) and the
last error; :class:`KafkaGap` s (offset ranges that Kafka deleted before they were copied); and
per-topic remote retention (:class:`KafkaRetention`) and per-topic transform policies
(a :class:`~offloader.policies.TransformPolicy` each: how new segments are stored,
spec/transforms.md §8); and the tier's one key scheme (a
:class:`~formats.kafka.names.KafkaKeyScheme`, persisted by the first upload,
spec/kafka-segments.md).

It is separate from :class:`~offloader.metadata.base.MetadataStore` so that every backend
(SQLite here, PostgreSQL later) implements it on its own; the contract suite in
``tests/metadata/test_kafka_metadata_contract.py`` checks the rules:

* ``start_copy`` makes the segment id and its object keys durable before any upload;
* at most one copy of each offset is COPY_SEGMENT_STARTED or COPY_SEGMENT_FINISHED
  (``start_copy`` refuses an overlapping one; a unique index backs it), and one uploader at a
  time holds a partition's lock (``partition_lock``);
* ``finish_copy`` is a compare-and-set from COPY_SEGMENT_STARTED and advances the partition's
  watermark in the same transaction (never backwards);
* state changes out of order raise :class:`~offloader.errors.InvalidLedgerState`; unknown ids
  :class:`~offloader.errors.NotFound`; a reused segment id :class:`~offloader.errors.AlreadyExists`;
* the store never reads a clock (callers pass ``*_ms``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Literal, Protocol, runtime_checkable

from formats.kafka.manifest import SegmentMarker
from formats.kafka.names import KafkaKeyScheme
from formats.kafka.spans import ObjectChecksums
from offloader.policies import TransformPolicy

RemoteSegmentState = Literal[
    "COPY_SEGMENT_STARTED",
    "COPY_SEGMENT_FINISHED",
    "DELETE_SEGMENT_STARTED",
    "DELETE_SEGMENT_FINISHED",
]
COPY_STARTED: RemoteSegmentState = "COPY_SEGMENT_STARTED"
COPY_FINISHED: RemoteSegmentState = "COPY_SEGMENT_FINISHED"
DELETE_STARTED: RemoteSegmentState = "DELETE_SEGMENT_STARTED"
DELETE_FINISHED: RemoteSegmentState = "DELETE_SEGMENT_FINISHED"
REMOTE_SEGMENT_STATES: tuple[RemoteSegmentState, ...] = (
    COPY_STARTED,
    COPY_FINISHED,
    DELETE_STARTED,
    DELETE_FINISHED,
)
#: the states a record may move to from each state
ALLOWED_TRANSITIONS: Mapping[RemoteSegmentState, tuple[RemoteSegmentState, ...]] = {
    COPY_STARTED: (COPY_FINISHED, DELETE_STARTED),
    COPY_FINISHED: (DELETE_STARTED,),
    DELETE_STARTED: (DELETE_FINISHED,),
    DELETE_FINISHED: (),
}


@dataclass(frozen=True)
class NewRemoteSegment:
    """What ``start_copy`` records before the upload."""

    segment_id: str
    topic: str
    topic_id: str
    partition: int
    base_offset: int
    end_offset: int
    max_timestamp: int
    size_bytes: int
    leader_epochs: Mapping[int, int]
    #: object key of each uploaded file, by suffix (``log``, ``index``, ``timeindex``, ...)
    keys: Mapping[str, str]
    #: the first offset this copy answers for (None: ``base_offset``); above the base when the
    #: segment straddles the partition's watermark (records below it belong to an earlier copy)
    start_offset: int | None = None

    @property
    def first_offset(self) -> int:
        return self.base_offset if self.start_offset is None else self.start_offset

    @classmethod
    def of_marker(cls, m: SegmentMarker, keys: Mapping[str, str]) -> NewRemoteSegment:
        """The copy a completion marker found in the bucket stands for, its objects at
        ``keys`` (``metadata rebuild`` and a new leader's adoption record it)."""
        return cls(
            segment_id=m.segment_id,
            topic=m.topic,
            topic_id=m.topic_id,
            partition=m.partition,
            base_offset=m.base_offset,
            end_offset=m.end_offset,
            max_timestamp=m.max_timestamp,
            size_bytes=m.log_size,
            leader_epochs=dict(m.leader_epochs),
            keys=dict(keys),
            start_offset=m.start_offset if m.start_offset > m.base_offset else None,
        )


#: the pinned transform of a segment stored as Kafka wrote it
PLAIN_TRANSFORM = "none"


@dataclass(frozen=True)
class SegmentChecks:
    """What a segment's record pins of the objects it uploaded (spec/kafka-segments.md §6):
    each object's size and span CRC32Cs, by kind (``log``, ``index``, ``timeindex``,
    ``chunks``...), and the transform of its ``.log`` (``none``, or the chunk table's
    ``zstd``/``aes-256-gcm``/``zstd+aes-256-gcm``). A transformed segment's ``log`` entry is
    absent: its stored chunks are checked by the pinned ``.chunks``. ``next_chunks``: the
    ``.chunks`` a re-key is writing, accepted beside ``objects["chunks"]`` until it is done."""

    objects: Mapping[str, ObjectChecksums]
    transform: str = PLAIN_TRANSFORM
    next_chunks: ObjectChecksums | None = None


@dataclass(frozen=True)
class RemoteSegmentRecord:
    segment_id: str
    topic: str
    topic_id: str
    partition: int
    base_offset: int
    end_offset: int
    max_timestamp: int
    size_bytes: int
    leader_epochs: Mapping[int, int]
    keys: Mapping[str, str]
    state: RemoteSegmentState
    started_ms: int
    updated_ms: int
    log_crc32c: int | None = None
    error: str | None = None
    #: the first offset this copy answers for (None: ``base_offset``; see
    #: :attr:`NewRemoteSegment.start_offset`): reads and exports start there
    start_offset: int | None = None

    #: pinned at COPY_SEGMENT_FINISHED; None on a row from before checksums were recorded
    #: (verified only by Kafka's batch CRC32Cs and the offset checks)
    checks: SegmentChecks | None = None

    @property
    def first_offset(self) -> int:
        return self.base_offset if self.start_offset is None else self.start_offset


@dataclass(frozen=True)
class KafkaPartitionRecord:
    topic: str
    partition: int
    topic_id: str
    #: highest offset safely remote (-1: nothing yet)
    watermark: int
    updated_ms: int
    last_error: str | None = None


@dataclass(frozen=True)
class KafkaGap:
    topic: str
    partition: int
    start_offset: int
    end_offset: int
    recorded_ms: int
    reason: str


@dataclass(frozen=True)
class KafkaRetention:
    """Remote retention of a topic; -1 keeps forever (Kafka's ``retention.ms/bytes``)."""

    topic: str
    retention_ms: int = -1
    retention_bytes: int = -1
    extra: Mapping[str, str] = field(default_factory=dict)


@runtime_checkable
class KafkaMetadataStore(Protocol):
    """Remote Kafka segments, partitions, gaps and retention (see the module docstring)."""

    def ensure_partition(
        self, topic: str, partition: int, topic_id: str, now_ms: int, *, watermark: int = -1
    ) -> KafkaPartitionRecord:
        """The partition's record, created with ``watermark`` if new. A known partition whose
        topic id differs (the topic was deleted and re-created) raises ``OffloadConflict``."""
        ...

    def get_partition(self, topic: str, partition: int) -> KafkaPartitionRecord | None: ...

    def list_partitions(self, topic: str | None = None) -> list[KafkaPartitionRecord]: ...

    def set_partition_error(
        self, topic: str, partition: int, error: str | None, now_ms: int
    ) -> None: ...

    def start_copy(self, segment: NewRemoteSegment, now_ms: int) -> RemoteSegmentRecord:
        """Record a COPY_SEGMENT_STARTED attempt. At most one copy of an offset is ever
        started or finished: a segment whose ``first_offset..end_offset`` overlaps a
        COPY_SEGMENT_STARTED or COPY_SEGMENT_FINISHED copy of the partition raises
        ``OffloadConflict`` (a unique index backs the rule)."""
        ...

    def partition_lock(self, topic: str, partition: int) -> AbstractContextManager[bool]:
        """Try the partition's upload lock for the body: yields True when held, False (holding
        nothing) when another uploader has it. The lock dies with its process (kill -9
        included), on every home of a shared store."""
        ...

    def get_key_scheme(self) -> KafkaKeyScheme | None:
        """The key scheme every uploader of this tier uses, None before the first upload."""
        ...

    def claim_key_scheme(self, scheme: KafkaKeyScheme) -> KafkaKeyScheme:
        """Persist ``scheme`` unless the tier has one already; the persisted one (the
        first claim wins)."""
        ...

    def finish_copy(
        self,
        segment_id: str,
        now_ms: int,
        *,
        log_crc32c: int | None = None,
        checks: SegmentChecks | None = None,
        max_timestamp: int | None = None,
    ) -> RemoteSegmentRecord:
        """STARTED -> FINISHED, and the partition watermark up to the segment's end offset;
        ``checks`` pinned in the same transaction, and ``max_timestamp`` (when given) replacing
        the one ``start_copy`` recorded (the uploader learns it from the batches it checks
        while the copy runs)."""
        ...

    def set_segment_checks(
        self, segment_id: str, checks: SegmentChecks, now_ms: int
    ) -> RemoteSegmentRecord:
        """Replace the pinned checks of a COPY_SEGMENT_FINISHED segment (a re-key rewrote its
        ``.chunks``); ``InvalidLedgerState`` in any other state."""
        ...

    def start_delete(
        self, segment_id: str, now_ms: int, *, error: str | None = None
    ) -> RemoteSegmentRecord: ...

    def finish_delete(self, segment_id: str, now_ms: int) -> RemoteSegmentRecord: ...

    def get_segment(self, segment_id: str) -> RemoteSegmentRecord: ...

    def list_segments(
        self,
        topic: str | None = None,
        partition: int | None = None,
        *,
        states: Sequence[RemoteSegmentState] | None = None,
    ) -> list[RemoteSegmentRecord]:
        """Ordered by topic, partition, base offset, start time."""
        ...

    def record_gap(
        self,
        topic: str,
        partition: int,
        start_offset: int,
        end_offset: int,
        now_ms: int,
        reason: str,
    ) -> KafkaGap: ...

    def list_gaps(self, topic: str | None = None) -> list[KafkaGap]: ...

    def set_retention(self, retention: KafkaRetention) -> KafkaRetention: ...

    def get_retention(self, topic: str) -> KafkaRetention: ...

    def set_topic_transform(self, topic: str, policy: TransformPolicy) -> TransformPolicy:
        """Store (or replace) the topic's transform policy; even the identity is stored (it
        overrides offloader.toml's ``[transform.kafka_topics]``)."""
        ...

    def get_topic_transform(self, topic: str) -> TransformPolicy | None:
        """The topic's stored policy, None when it has none."""
        ...

    def remove_topic_transform(self, topic: str) -> bool:
        """Forget the topic's policy; False when it had none."""
        ...

    def close(self) -> None: ...
