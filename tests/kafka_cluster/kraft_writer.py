"""Writes a KRaft cluster's metadata log as Kafka's controller does, for the tests.

:class:`KRaftLog` appends record batches of metadata records (the project's own encoder,
:mod:`formats.kafka.metadata_records`, from Kafka's published schemas) to the
``__cluster_metadata-0`` log under a directory, rolls segments, writes snapshots
(``<end offset>-<epoch>.checkpoint``: a header control batch, the state as records, a footer
control batch, written to ``.checkpoint.part`` and renamed as Kafka does) and truncates.
:class:`KRaftClusterWriter` is the view contract suite's writer (``writers.ClusterWriter``)
over it: each operation one batch, as the controller writes one batch per event, with the
records a real log carries around them (a ``FeatureLevelRecord``, ``NoOpRecord`` s, leader
change control batches) that a reader must skip. Only the tests write; the project never does.
"""

from __future__ import annotations

import itertools
import os
import struct
from dataclasses import dataclass, field
from pathlib import Path

from formats.kafka.encode import NewRecord, encode_batch
from formats.kafka.metadata_records import (
    CONTROL_LEADER_CHANGE,
    CONTROL_SNAPSHOT_FOOTER,
    CONTROL_SNAPSHOT_HEADER,
    NO_LEADER,
    RESOURCE_BROKER,
    RESOURCE_TOPIC,
    ConfigRecord,
    MetadataRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RemoveTopicRecord,
    TopicRecord,
    UnknownMetadataRecord,
    control_key,
    encode_metadata_record,
    snapshot_footer_value,
    snapshot_header_value,
)
from formats.kafka.names import kafka_uuid_to_uuid, segment_file_name
from offloader.kafka_cluster.configs import BROKER_SYNONYMS
from offloader.kafka_cluster.kraft import (
    METADATA_PARTITION_DIR,
    KRaftClusterView,
    snapshot_file_name,
)

FEATURE_LEVEL_RECORD = 12
NO_OP_RECORD = 20
TIMESTAMP = 1_700_000_000_000


def feature_level(name: str, level: int) -> UnknownMetadataRecord:
    """A ``FeatureLevelRecord`` (api key 12, version 0): a record type the view skips."""
    raw = name.encode()
    body = bytes([len(raw) + 1]) + raw + struct.pack(">h", level) + b"\x00"
    return UnknownMetadataRecord(FEATURE_LEVEL_RECORD, 0, body)


def no_op() -> UnknownMetadataRecord:
    """A ``NoOpRecord`` (api key 20): the controller appends one every few hundred ms."""
    return UnknownMetadataRecord(NO_OP_RECORD, 0, b"\x00")


def leader_change_value(leader: int, voters: tuple[int, ...]) -> bytes:
    """A ``LeaderChangeMessage`` (version 0): the value of a leader change control record."""
    voter_array = bytes([len(voters) + 1]) + b"".join(
        struct.pack(">i", v) + b"\x00" for v in voters
    )
    return struct.pack(">hi", 0, leader) + voter_array + voter_array + b"\x00"


def topic_id_bytes(topic_id: str) -> bytes:
    """A topic id in Kafka's base64 form (or a canonical UUID) as its 16 bytes."""
    if len(topic_id) == 22:
        return kafka_uuid_to_uuid(topic_id).bytes
    import uuid

    return uuid.UUID(topic_id).bytes


@dataclass
class _Part:
    replicas: list[int]
    isr: list[int]
    leader: int
    leader_epoch: int = 0
    partition_epoch: int = 0


@dataclass
class _Topic:
    topic_id: bytes
    partitions: dict[int, _Part] = field(default_factory=dict)


class KRaftLog:
    """A ``__cluster_metadata-0`` log under ``root`` that tests append to, with a model of
    the state its records make (for snapshots and leader epochs)."""

    def __init__(self, root: Path, *, raft_epoch: int = 1) -> None:
        self.root = root
        self.dir = root / METADATA_PARTITION_DIR
        self.dir.mkdir(parents=True, exist_ok=True)
        self.next_offset = 0
        self.raft_epoch = raft_epoch
        self.segment = self.dir / segment_file_name(0, "log")
        self.segment.touch()
        self.topics: dict[str, _Topic] = {}
        #: (resource type, resource name) -> configs
        self.configs: dict[tuple[int, str], dict[str, str]] = {}
        #: (end position, next offset) after each batch of the active segment, for truncate()
        self.marks: list[tuple[Path, int, int]] = []

    # --- raw appends -----------------------------------------------------------------------
    def append(self, records: list[MetadataRecord], *, apply: bool = True) -> int:
        """One batch of ``records`` at the end of the active segment; its base offset."""
        batch = encode_batch(
            [NewRecord(TIMESTAMP, None, encode_metadata_record(r)) for r in records],
            base_offset=self.next_offset,
            leader_epoch=self.raft_epoch,
        )
        return self.append_raw(batch, len(records), apply_records=records if apply else [])

    def append_raw(
        self, batch: bytes, count: int, *, apply_records: list[MetadataRecord] | None = None
    ) -> int:
        base = self.next_offset
        with open(self.segment, "ab") as handle:
            handle.write(batch)
        self.next_offset += count
        self.marks.append((self.segment, self.segment.stat().st_size, self.next_offset))
        for record in apply_records or []:
            self._model(record)
        return base

    def append_control(self, kind: int = CONTROL_LEADER_CHANGE, value: bytes | None = None) -> int:
        """A control batch (a leader change by default) as the quorum writes them."""
        raw = value if value is not None else leader_change_value(1, (1, 2, 3))
        batch = encode_batch(
            [NewRecord(TIMESTAMP, control_key(kind), raw)],
            base_offset=self.next_offset,
            leader_epoch=self.raft_epoch,
            control=True,
        )
        return self.append_raw(batch, 1)

    def roll(self) -> Path:
        """Start a new segment at the next offset (Kafka's segment roll)."""
        self.segment = self.dir / segment_file_name(self.next_offset, "log")
        self.segment.touch()
        return self.segment

    def truncate_to(self, offset: int) -> None:
        """Cut the log back to ``offset`` (a follower's truncation on divergence): whole
        batches from the end of the active segment; the model is not rewound (tests rebuild
        the state they expect)."""
        keep = [m for m in self.marks if m[2] <= offset]
        self.marks = keep
        position = keep[-1][1] if keep and keep[-1][0] == self.segment else 0
        with open(self.segment, "r+b") as handle:
            handle.truncate(position)
        self.next_offset = keep[-1][2] if keep else 0

    # --- snapshots -------------------------------------------------------------------------
    def state_records(self) -> list[MetadataRecord]:
        """The model's state as the records a snapshot holds."""
        records: list[MetadataRecord] = [feature_level("metadata.version", 21)]
        for (kind, name), values in sorted(self.configs.items()):
            for key, value in sorted(values.items()):
                records.append(ConfigRecord(kind, name, key, value))
        for name, topic in sorted(self.topics.items()):
            records.append(TopicRecord(name, topic.topic_id))
            for number, part in sorted(topic.partitions.items()):
                records.append(
                    PartitionRecord(
                        number,
                        topic.topic_id,
                        tuple(part.replicas),
                        tuple(part.isr),
                        leader=part.leader,
                        leader_epoch=part.leader_epoch,
                        partition_epoch=part.partition_epoch,
                    )
                )
        return records

    def write_snapshot(
        self,
        records: list[MetadataRecord] | None = None,
        *,
        end_offset: int | None = None,
        per_batch: int = 50,
        footer: bool = True,
    ) -> Path:
        """A snapshot (of the model at the next offset unless ``records`` and ``end_offset``
        are given), as Kafka writes one: to a ``.checkpoint.part`` file first, renamed when
        complete."""
        end = self.next_offset if end_offset is None else end_offset
        name = snapshot_file_name(end, self.raft_epoch)
        part = self.dir / (name + ".part")
        offset = 0
        out = bytearray()
        out += encode_batch(
            [
                NewRecord(
                    TIMESTAMP,
                    control_key(CONTROL_SNAPSHOT_HEADER),
                    snapshot_header_value(TIMESTAMP),
                )
            ],
            base_offset=offset,
            leader_epoch=self.raft_epoch,
            control=True,
        )
        offset += 1
        if records is None:
            records = self.state_records()
        for start in range(0, len(records), per_batch):
            chunk = records[start : start + per_batch]
            out += encode_batch(
                [NewRecord(TIMESTAMP, None, encode_metadata_record(r)) for r in chunk],
                base_offset=offset,
                leader_epoch=self.raft_epoch,
            )
            offset += len(chunk)
        if footer:
            out += encode_batch(
                [
                    NewRecord(
                        TIMESTAMP, control_key(CONTROL_SNAPSHOT_FOOTER), snapshot_footer_value()
                    )
                ],
                base_offset=offset,
                leader_epoch=self.raft_epoch,
                control=True,
            )
        part.write_bytes(bytes(out))
        final = self.dir / name
        os.replace(part, final)
        return final

    def delete_segments_before(self, offset: int) -> None:
        """Retention: delete every segment whose records all lie below ``offset``."""
        segments = sorted(p for p in self.dir.iterdir() if p.name.endswith(".log"))
        for here, after in itertools.pairwise(segments):
            if int(after.name[:20]) <= offset:
                here.unlink()

    # --- the model -------------------------------------------------------------------------
    def _model(self, record: MetadataRecord) -> None:
        if isinstance(record, TopicRecord):
            self.topics[record.name] = _Topic(record.topic_id)
        elif isinstance(record, PartitionRecord):
            for topic in self.topics.values():
                if topic.topic_id == record.topic_id:
                    topic.partitions[record.partition_id] = _Part(
                        list(record.replicas),
                        list(record.isr),
                        record.leader,
                        record.leader_epoch,
                        record.partition_epoch,
                    )
        elif isinstance(record, PartitionChangeRecord):
            for topic in self.topics.values():
                part = topic.partitions.get(record.partition_id)
                if topic.topic_id != record.topic_id or part is None:
                    continue
                if record.leader != -2:
                    part.leader = record.leader
                    part.leader_epoch += 1
                if record.isr is not None:
                    part.isr = list(record.isr)
                if record.replicas is not None:
                    part.replicas = list(record.replicas)
                part.partition_epoch += 1
        elif isinstance(record, ConfigRecord):
            values = self.configs.setdefault((record.resource_type, record.resource_name), {})
            if record.value is None:
                values.pop(record.name, None)
            else:
                values[record.name] = record.value
            if not values:
                del self.configs[(record.resource_type, record.resource_name)]
        elif isinstance(record, RemoveTopicRecord):
            for name, topic in list(self.topics.items()):
                if topic.topic_id == record.topic_id:
                    del self.topics[name]
                    self.configs.pop((RESOURCE_TOPIC, name), None)


class KRaftClusterWriter:
    """The KRaft writer of the view contract suite (``tests/kafka_cluster/writers.py``): a
    metadata log in ``root`` (a test's tmp dir), each operation one batch, with the records a
    reader must skip between them when ``noise`` (the default)."""

    def __init__(self, root: Path, *, noise: bool = True) -> None:
        self.log = KRaftLog(root / "metadata")
        self.noise = noise
        self.log.append([feature_level("metadata.version", 21)])
        if noise:
            self.log.append_control()

    @property
    def url(self) -> str:
        """The ``--kafka-metadata`` value of this cluster."""
        return f"kraft:{self.log.root}"

    def _noise(self) -> None:
        if self.noise:
            self.log.append([no_op()])

    def create_topic(
        self,
        name: str,
        topic_id: str,
        partitions: dict[int, list[int]],
        config: dict[str, str] | None = None,
    ) -> None:
        raw = topic_id_bytes(topic_id)
        records: list[MetadataRecord] = [
            ConfigRecord(RESOURCE_TOPIC, name, key, value)
            for key, value in sorted((config or {}).items())
        ]
        records.append(TopicRecord(name, raw))
        for number, replicas in sorted(partitions.items()):
            records.append(
                PartitionRecord(
                    number,
                    raw,
                    tuple(replicas),
                    tuple(replicas),
                    leader=replicas[0] if replicas else NO_LEADER,
                    leader_epoch=0,
                    partition_epoch=0,
                )
            )
        self._noise()
        self.log.append(records)

    def _part(self, topic: str, partition: int) -> tuple[bytes, _Part]:
        state = self.log.topics[topic]
        return state.topic_id, state.partitions[partition]

    def set_leader(
        self, topic: str, partition: int, leader: int | None, leader_epoch: int, isr: list[int]
    ) -> None:
        """KRaft records no epoch: each PartitionChangeRecord naming a leader bumps it by one,
        so reaching ``leader_epoch`` takes that many records (the controller writes the
        current leader again to bump it, as it does on an ISR shrink)."""
        topic_id, part = self._part(topic, partition)
        target = NO_LEADER if leader is None else leader
        bumps = leader_epoch - part.leader_epoch
        if bumps < 0 or (bumps == 0 and target != part.leader):
            raise ValueError(
                f"{topic}-{partition}: leader epoch {leader_epoch} cannot follow "
                f"{part.leader_epoch} (KRaft bumps the epoch with every leader change)"
            )
        records: list[MetadataRecord] = [
            PartitionChangeRecord(partition, topic_id, leader=part.leader) for _ in range(bumps - 1)
        ]
        if bumps:
            records.append(
                PartitionChangeRecord(partition, topic_id, isr=tuple(isr), leader=target)
            )
        else:
            records.append(PartitionChangeRecord(partition, topic_id, isr=tuple(isr)))
        self._noise()
        self.log.append(records)

    def set_config(self, topic: str, key: str, value: str | None) -> None:
        self._noise()
        self.log.append([ConfigRecord(RESOURCE_TOPIC, topic, key, value)])

    def set_default_config(self, key: str, value: str | None) -> None:
        """The cluster-wide default as ``kafka-configs --entity-type brokers --entity-default``
        writes it: under the topic config's broker synonym where it has one."""
        synonyms = BROKER_SYNONYMS.get(key)
        name = synonyms[0][0] if synonyms else key
        self._noise()
        self.log.append([ConfigRecord(RESOURCE_BROKER, "", name, value)])

    def delete_topic(self, name: str) -> None:
        self._noise()
        self.log.append([RemoveTopicRecord(self.log.topics[name].topic_id)])

    def open_view(self) -> KRaftClusterView:
        return KRaftClusterView(self.log.root)
