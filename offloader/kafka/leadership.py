"""The leadership gate: what the Kafka cluster's metadata allows this sidecar to upload.

With ``--kafka-metadata`` the uploader consults a
:class:`~offloader.kafka_cluster.base.KafkaClusterView` (ZooKeeper or KRaft, read-only):

* once per upload pass (:meth:`LeadershipGate.begin_pass`) the view is refreshed, and each
  partition of the log dir is **admitted** (:meth:`LeadershipGate.plan`) only while this broker
  (``meta.properties`` in the log dir) leads it, its topic is the cluster's (same topic id),
  ``remote.storage.enable=true``, it is not compacted (Kafka refuses tiered storage for
  compacted topics, KAFKA-19273) and ``remote.log.copy.disable`` is not ``true``;
* KIP-1241's ``remote.copy.lag.ms``/``remote.copy.lag.bytes`` (where set) hold back closed
  segments until they are old enough (their ``.log``'s last write) or the partition's local
  bytes not yet remote reach the limit; the held-back segments wait for a later pass;
* KIP-405's epoch rule: the remote copy (the finished segments' leader epochs, uploaded by
  whichever sidecar led before) must agree with this leader's lineage (its
  ``leader-epoch-checkpoint``) up to the shared watermark; where they diverge, the remote
  records past that offset were written under a leader that lost the partition, and nothing
  more is uploaded for the partition (its last error says where);
* a partition this sidecar has just gained the leadership of (not admitted in its previous
  pass; a new leader with its own SQLite home) first takes the bucket's finished copies above
  its own watermark (its markers and watermark object,
  :mod:`offloader.kafka.adopt`), so the upload carries on after the last finished offset;
* before each segment (:meth:`LeadershipGate.before_segment`) the view is refreshed again (in
  steady state a ZooKeeper ``sync`` or a read of the KRaft log's new records) and leadership
  re-checked, and the partition's ``leader-epoch-checkpoint`` read afresh: a segment whose
  offsets the lineage no longer agrees on (Kafka changed leaders while the pass ran) is
  uploaded only as far as the lineages agree: the prefix of its batches wholly below the
  divergence offset, as a copy of its own (the ``.log``'s prefix, offset and time indexes
  rebuilt for it, its marker at the prefix's end); the rest waits for the next pass, where
  the re-read log (truncated by Kafka, or rewritten by the new leader) is copied from the
  divergence offset on.

Uploads stay exactly-once without the gate too (the partition lock and the watermark of a
shared store); the gate is what keeps followers from uploading at all, and what makes the
leader's sidecar carry on from the shared watermark after a leadership change.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from formats.kafka.errors import KafkaFormatError
from formats.kafka.names import LEADER_EPOCH_CHECKPOINT, parse_leader_epoch_checkpoint
from offloader.errors import KafkaMetadataError
from offloader.kafka.logdir import LocalPartition, LocalSegment
from offloader.kafka.types import SegmentOutcome
from offloader.kafka_cluster.base import KafkaClusterView, TopicState
from offloader.kafka_cluster.identity import read_broker_identity
from offloader.logs import get_logger
from offloader.metadata.kafka_base import (
    COPY_FINISHED,
    KafkaMetadataStore,
    KafkaRetention,
    RemoteSegmentRecord,
)

log = get_logger(__name__)

Role = Literal["leader", "follower", "offline", "no metadata"]
Lineage = tuple[tuple[int, int], ...]


@dataclass(frozen=True)
class ClusterRole:
    """A partition as the cluster's metadata sees it from this broker."""

    role: Role
    leader: int | None
    leader_epoch: int | None
    #: why the partition is not uploading (None: it uploads)
    reason: str | None = None


def topic_refusal(topic: TopicState) -> str | None:
    """Why the topic's configuration keeps it out of the tier (None: it is tiered)."""
    config = topic.config
    if config.compacted:
        return (
            f"compacted topic (cleanup.policy={','.join(config.cleanup_policy)}): Kafka refuses "
            "tiered storage for compacted topics (KAFKA-19273); not uploading"
        )
    if not config.remote_storage_enable:
        return "remote.storage.enable is not true for this topic: not tiered"
    if config.remote_log_copy_disable:
        return "remote.log.copy.disable=true: copies stopped"
    return None


def epoch_at(lineage: Lineage, offset: int) -> int | None:
    """The leader epoch of ``offset`` in ``lineage`` ((epoch, start offset) pairs), None
    below its first entry."""
    found = None
    for epoch, start in lineage:
        if start > offset:
            break
        found = epoch
    return found


def divergence(ours: Lineage, theirs: Lineage, first: int, last: int) -> int | None:
    """The first offset of ``first..last`` where the two lineages name different epochs
    (offsets below either lineage's first entry are not compared); None where they agree."""
    points = sorted({first, *(s for _e, s in ours if first < s <= last), *(s for _e, s in theirs)})
    for point in points:
        if not first <= point <= last:
            continue
        a, b = epoch_at(ours, point), epoch_at(theirs, point)
        if a is not None and b is not None and a != b:
            return point
    return None


def remote_divergence(
    local: Lineage, segments: Sequence[RemoteSegmentRecord], watermark: int
) -> tuple[int, RemoteSegmentRecord] | None:
    """Where the finished remote segments stop agreeing with this leader's lineage, at or
    below the watermark: the offset and the remote segment holding it."""
    if not local:
        return None
    local_start = local[0][1]
    for seg in sorted(segments, key=lambda s: s.base_offset):
        last = min(seg.end_offset, watermark)
        if last < local_start:
            continue
        remote = tuple(sorted(((e, o) for e, o in seg.leader_epochs.items()), key=lambda p: p[1]))
        first = max(seg.first_offset, local_start)
        if first > last:
            continue
        point = divergence(local, remote, first, last)
        if point is not None:
            return point, seg
    return None


def read_lineage(directory: Path) -> Lineage:
    """The partition's ``leader-epoch-checkpoint`` now (empty when it has none)."""
    path = directory / LEADER_EPOCH_CHECKPOINT
    try:
        return parse_leader_epoch_checkpoint(path.read_bytes(), source=str(path))
    except FileNotFoundError:
        return ()


class LeadershipGate:
    """The gate of one uploader (see the module docstring)."""

    def __init__(
        self,
        open_view: Callable[[], KafkaClusterView],
        meta: KafkaMetadataStore,
        clock_ms: Callable[[], int],
        adopt: Callable[[LocalPartition], object] | None = None,
    ) -> None:
        """``open_view`` opens the cluster's view on first use (so commands that never consult
        the cluster, ``kafka read`` say, never connect to it). ``adopt`` records the bucket's
        finished copies of an admitted partition this metadata has no record of
        (:func:`offloader.kafka.adopt.adopt_bucket_copies`: a new leader's sidecar with its own
        SQLite home carries on from the bucket's watermark and markers)."""
        self._adopt = adopt
        self._view: KafkaClusterView | None = None
        self._open = open_view
        self.meta = meta
        self._clock_ms = clock_ms
        self._brokers: dict[Path, int] = {}
        #: (topic, partition) -> the broker id it was admitted for in this pass
        self._admitted: dict[tuple[str, int], int] = {}
        #: the partitions admitted in the previous pass (led then: nothing to adopt)
        self._previous: set[tuple[str, int]] = set()

    @property
    def view(self) -> KafkaClusterView:
        if self._view is None:
            self._view = self._open()
        return self._view

    def close(self) -> None:
        if self._view is not None:
            self._view.close()

    def begin_pass(self, log_dir: Path | None = None) -> None:
        """Once per upload pass: the cluster's metadata brought up to date, and this broker's
        id read from ``log_dir`` (a missing or malformed ``meta.properties`` fails the pass
        before any partition is looked at)."""
        self.view.refresh()
        self._previous = set(self._admitted)
        self._admitted.clear()
        if log_dir is not None:
            self.broker_id(log_dir)

    def broker_id(self, log_dir: Path) -> int:
        """This broker's id, from the log dir's ``meta.properties`` (read once)."""
        key = Path(log_dir)
        if key not in self._brokers:
            self._brokers[key] = read_broker_identity(key).broker_id
        return self._brokers[key]

    # --- decisions --------------------------------------------------------------------------

    def role(self, topic: str, partition: int, broker_id: int | None) -> ClusterRole:
        """Leader / follower / offline / no metadata, with the reason it does not upload
        (``broker_id`` None: not relative to a broker; ``leader`` then means it has one)."""
        state = self.view.topic(topic)
        if state is None:
            where = self.view.location
            return ClusterRole("no metadata", None, None, f"the cluster ({where}) has no {topic}")
        p = state.partitions.get(partition)
        if p is None:
            return ClusterRole(
                "no metadata", None, None, f"the cluster has no partition {topic}-{partition}"
            )
        if p.leader is None:
            return ClusterRole(
                "offline", None, p.leader_epoch, f"no leader (offline) in epoch {p.leader_epoch}"
            )
        if broker_id is not None and p.leader != broker_id:
            return ClusterRole(
                "follower",
                p.leader,
                p.leader_epoch,
                f"follower: broker {p.leader} leads in epoch {p.leader_epoch}",
            )
        # this broker leads it (or, with no broker id, someone does)
        return ClusterRole("leader", p.leader, p.leader_epoch, topic_refusal(state))

    def plan(
        self, partition: LocalPartition, log_dir: Path
    ) -> tuple[LocalPartition, SegmentOutcome | None]:
        """The partition as this pass may upload it: its closed segments held back by the
        copy lag marked not closed yet; or a ``skipped`` outcome saying why it is not
        uploaded at all."""
        topic, number = partition.topic, partition.partition
        first = partition.segments[0].base_offset if partition.segments else 0
        me = self.broker_id(log_dir)
        role = self.role(topic, number, me)
        state = self.view.topic(topic)
        reason = role.reason
        cluster_id = None if state is None else state.topic_id
        if reason is None and cluster_id not in (None, partition.topic_id):
            reason = (
                f"the log dir's topic id {partition.topic_id} is not the cluster's "
                f"{cluster_id} (the topic was deleted and re-created)"
            )
        meta = self.meta
        if reason is None:
            record = meta.get_partition(topic, number)
            if self._adopt is not None and (topic, number) not in self._previous:
                # leadership gained: what other sidecars finished meanwhile, from the bucket
                self._adopt(partition)
                record = meta.get_partition(topic, number)
            if record is not None and record.watermark >= 0:
                finished = meta.list_segments(topic, number, states=[COPY_FINISHED])
                found = remote_divergence(partition.leader_epochs, finished, record.watermark)
                if found is not None:
                    point, seg = found
                    reason = (
                        f"the remote copy diverges from this leader's log at offset {point} "
                        f"(remote segment {seg.base_offset}..{seg.end_offset} was written under "
                        f"epoch {epoch_at(_pairs(seg.leader_epochs), point)}, a leader that lost "
                        f"the partition; this log has epoch "
                        f"{epoch_at(partition.leader_epochs, point)}): upload stopped at "
                        f"{point - 1}"
                    )
                    meta.set_partition_error(topic, number, reason, self._clock_ms())
        if reason is not None:
            log.info("kafka partition not uploaded", partition=partition.name, reason=reason)
            return partition, SegmentOutcome(topic, number, first, "skipped", detail=reason)
        self._admitted[(topic, number)] = me
        assert state is not None
        return self._hold_back(partition, state), None

    def _hold_back(self, partition: LocalPartition, state: TopicState) -> LocalPartition:
        lag_ms = state.config.remote_copy_lag_ms
        lag_bytes = state.config.remote_copy_lag_bytes
        if lag_ms is None and lag_bytes is None:
            return partition
        now = self._clock_ms()
        sizes = [_size(s) for s in partition.segments]
        held = False
        out: list[LocalSegment] = []
        for i, seg in enumerate(partition.segments):
            if not seg.active and not held:
                old = lag_ms is not None and now - _mtime_ms(seg) >= lag_ms
                big = lag_bytes is not None and sum(sizes[i:]) >= lag_bytes
                held = not (old or big)
            out.append(dataclasses.replace(seg, active=True) if held and not seg.active else seg)
        return dataclasses.replace(partition, segments=tuple(out))

    def before_segment(
        self, partition: LocalPartition, segment: LocalSegment, next_base: int | None
    ) -> SegmentOutcome | None:
        """Re-checked before each segment's copy: a ``skipped`` outcome when the partition
        must stop here (leadership moved, or its lineage changed over this segment). When the
        lineage changed inside the segment, past its base offset, the outcome's
        ``end_offset`` is the last offset that agrees: the caller copies the segment's prefix
        up to it (KIP-405's epoch rule), then stops."""
        topic, number = partition.topic, partition.partition
        me = self._admitted.get((topic, number))
        if me is None:
            return None  # not planned by this gate
        try:
            self.view.refresh()
        except KafkaMetadataError as exc:
            return SegmentOutcome(
                topic, number, segment.base_offset, "skipped", detail=f"leadership unknown: {exc}"
            )
        role = self.role(topic, number, me)
        if role.reason is not None:
            return SegmentOutcome(topic, number, segment.base_offset, "skipped", detail=role.reason)
        try:
            now = read_lineage(partition.directory)
        except KafkaFormatError as exc:
            return SegmentOutcome(topic, number, segment.base_offset, "skipped", detail=str(exc))
        last = next_base - 1 if next_base is not None else 2**63 - 1
        point = divergence(now, partition.leader_epochs, segment.base_offset, last)
        if point is None:
            return None
        if point > segment.base_offset:
            # the segment's records below the divergence agree: its prefix is copied
            reason = (
                f"leader epoch lineage changed at offset {point} while uploading (records from "
                f"there were written under a leader that lost the partition): segment "
                f"{segment.base_offset} uploaded only up to offset {point - 1}, where this "
                "leader's log agrees; the rest waits for the next pass"
            )
            return SegmentOutcome(
                topic, number, segment.base_offset, "skipped", end_offset=point - 1, detail=reason
            )
        reason = (
            f"leader epoch lineage changed at offset {point} while uploading (records written "
            f"under a leader that lost the partition): upload stopped at "
            f"{segment.base_offset - 1}, before this segment"
        )
        if self.meta.get_partition(topic, number) is not None:
            self.meta.set_partition_error(topic, number, reason, self._clock_ms())
        return SegmentOutcome(topic, number, segment.base_offset, "skipped", detail=reason)

    def copy_lag_reason(self, topic: str) -> str | None:
        """What KIP-1241's copy lag makes closed segments of ``topic`` wait for (None: none
        set)."""
        state = self.view.topic(topic)
        if state is None:
            return None
        parts = []
        if state.config.remote_copy_lag_ms is not None:
            parts.append(f"remote.copy.lag.ms={state.config.remote_copy_lag_ms}")
        if state.config.remote_copy_lag_bytes is not None:
            parts.append(f"remote.copy.lag.bytes={state.config.remote_copy_lag_bytes}")
        if not parts:
            return None
        return f"waiting for the copy lag ({' or '.join(parts)}): closed segments are copied later"

    # --- remote retention ---------------------------------------------------------------------

    def retention(self, topic: str) -> KafkaRetention | None:
        """The topic's ``retention.ms``/``retention.bytes`` as the cluster has them."""
        state = self.view.topic(topic)
        if state is None:
            return None
        ms, size = state.config.retention_ms, state.config.retention_bytes
        return KafkaRetention(topic, -1 if ms is None else ms, -1 if size is None else size)


def _pairs(epochs: Mapping[int, int]) -> Lineage:
    return tuple(sorted(epochs.items(), key=lambda p: p[1]))


def _size(segment: LocalSegment) -> int:
    try:
        return os.stat(segment.path("log")).st_size
    except OSError:
        return 0


def _mtime_ms(segment: LocalSegment) -> int:
    try:
        return int(os.stat(segment.path("log")).st_mtime * 1000)
    except OSError:
        return 0
