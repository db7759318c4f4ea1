"""The KRaft backend of :class:`~offloader.kafka_cluster.base.KafkaClusterView`: a Kafka 4
cluster's metadata read from the broker's own disk, read-only (spec/kafka-metadata.md).

A KRaft broker keeps the cluster's metadata as the log of the ``__cluster_metadata`` partition,
in ``<metadata.log.dir>/__cluster_metadata-0/``: ordinary record batches in
``<base offset>.log`` segments (read with :mod:`formats.kafka.batch`) whose values are
metadata records (:mod:`formats.kafka.metadata_records`), and snapshots of the whole state,
``<end offset 20 digits>-<epoch 10 digits>.checkpoint``, record batches too, framed by a
``SnapshotHeaderRecord`` and a ``SnapshotFooterRecord`` control record. The view loads the
newest snapshot, then the log's records from the snapshot's end offset on, and
:meth:`KRaftClusterView.refresh` reads only what was appended since (it keeps the segment and
the byte position it reached; a rolled segment is followed into the next one). It replays
``TopicRecord``, ``PartitionRecord``, ``PartitionChangeRecord`` (a leader other than -2, -1
"no leader" included, bumps the leader epoch by one), ``ConfigRecord`` (topic overrides;
the default broker resource, name ``""``, for the cluster defaults; a null value deletes) and
``RemoveTopicRecord`` (the topic, its partitions and its configs), holds the records of an open
metadata transaction (KIP-868) until its end (and drops them on an abort), and skips control
batches and every other record type.

What is committed: the on-disk log may end in records the quorum has not committed yet, which
Kafka truncates if the leader changes. The view notices a truncation (its segment shorter than
the position it read, the last batch it applied no longer the same bytes, its segment gone
with no successor at its offset, or the log no longer reaching back to its offset) and then
rebuilds itself from the newest snapshot. A batch cut off at the end of the newest segment is
one being written: the view stops before it and reads it on a later refresh. Any other
malformed bytes (a CRC mismatch, garbage, a cut-off batch with a later segment, an unreadable
record) raise :class:`~offloader.errors.KafkaMetadataError` naming the file and position,
after the view has applied everything before them (its answers stay those of the last good
record, and a later refresh retries from there).
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from formats.kafka.batch import (
    HEADER,
    HEADER_SIZE,
    BatchHeader,
    check_crc,
    decode_records,
    read_batch_header,
)
from formats.kafka.errors import KafkaFormatError, KafkaTruncatedError
from formats.kafka.metadata_records import (
    CONTROL_SNAPSHOT_FOOTER,
    CONTROL_SNAPSHOT_HEADER,
    NO_LEADER_CHANGE,
    RESOURCE_BROKER,
    RESOURCE_TOPIC,
    AbortTransactionRecord,
    BeginTransactionRecord,
    ConfigRecord,
    EndTransactionRecord,
    MetadataRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RemoveTopicRecord,
    TopicRecord,
    control_record_type,
    iter_batch_metadata,
)
from formats.kafka.names import parse_segment_file_name, uuid_to_kafka
from offloader.errors import KafkaMetadataError, KafkaMetadataUnavailable
from offloader.kafka_cluster.base import PartitionState, TopicConfig, TopicState
from offloader.kafka_cluster.configs import effective_config
from offloader.logs import get_logger

log = get_logger(__name__)

#: the metadata partition's directory under ``metadata.log.dir``
METADATA_PARTITION_DIR = "__cluster_metadata-0"
_SNAPSHOT_RE = re.compile(r"^(\d{20})-(\d{10})\.checkpoint$")
#: bytes read from a segment at a time while catching up
READ_CHUNK = 8 * 1024 * 1024


@dataclass(frozen=True, order=True)
class SnapshotFile:
    """A ``.checkpoint`` file: the snapshot of every record below ``end_offset``."""

    end_offset: int
    epoch: int
    path: Path


def snapshot_file_name(end_offset: int, epoch: int) -> str:
    """Kafka's snapshot file name (``Snapshots.filenameFromSnapshotId``)."""
    return f"{end_offset:020d}-{epoch:010d}.checkpoint"


def metadata_partition_dir(metadata_log_dir: Path) -> Path:
    """The ``__cluster_metadata-0`` directory: ``metadata_log_dir`` itself when it is one,
    else its child of that name."""
    if metadata_log_dir.name == METADATA_PARTITION_DIR:
        return metadata_log_dir
    return metadata_log_dir / METADATA_PARTITION_DIR


class _Partition:
    __slots__ = ("isr", "leader", "leader_epoch", "replicas", "state")

    def __init__(
        self, replicas: tuple[int, ...], isr: tuple[int, ...], leader: int, leader_epoch: int
    ) -> None:
        self.replicas = replicas
        self.isr = isr
        self.leader = leader
        self.leader_epoch = leader_epoch
        #: the PartitionState last handed out (None once a record changed the partition)
        self.state: PartitionState | None = None


class _Topic:
    __slots__ = ("kafka_id", "name", "partitions", "topic_id")

    def __init__(self, name: str, topic_id: bytes) -> None:
        self.name = name
        self.topic_id = topic_id
        self.kafka_id = _kafka_id(topic_id)
        self.partitions: dict[int, _Partition] = {}


class KRaftClusterView:
    """A KRaft cluster's metadata from ``metadata_log_dir`` (``metadata.log.dir``, or its
    ``__cluster_metadata-0`` directory itself). Reads on construction; :meth:`refresh`
    follows what is appended."""

    def __init__(self, metadata_log_dir: Path | str) -> None:
        given = Path(metadata_log_dir).absolute()
        self._location = f"kraft:{given}"
        self._dir = metadata_partition_dir(given)
        self._reset()
        self.refresh()

    # --- state -----------------------------------------------------------------------------
    def _reset(self) -> None:
        self._topics: dict[bytes, _Topic] = {}
        self._names: dict[str, bytes] = {}
        self._overrides: dict[str, dict[str, str]] = {}
        self._broker_defaults: dict[str, str] = {}
        self._configs: dict[str, TopicConfig] = {}
        #: the records of an open metadata transaction (None: no transaction open)
        self._txn: list[MetadataRecord] | None = None
        self._loaded = False
        self._snapshot: SnapshotFile | None = None
        #: the next log offset to apply
        self._next_offset = 0
        #: the segment being followed, the byte position reached in it
        self._segment: Path | None = None
        self._position = 0
        #: the last batch applied from ``_segment``: (position, base offset, crc)
        self._last_batch: tuple[int, int, int] | None = None

    @property
    def location(self) -> str:
        return self._location

    @property
    def next_offset(self) -> int:
        """The log offset the view has applied up to (exclusive)."""
        return self._next_offset

    @property
    def snapshot(self) -> SnapshotFile | None:
        """The snapshot the view was built from (None: the log from offset 0)."""
        return self._snapshot

    # --- the Protocol's answers ------------------------------------------------------------
    def topics(self) -> list[str]:
        return sorted(self._names)

    def topic(self, name: str) -> TopicState | None:
        topic_id = self._names.get(name)
        if topic_id is None:
            return None
        topic = self._topics[topic_id]
        partitions = {
            number: self._state(topic, number, part)
            for number, part in sorted(topic.partitions.items())
        }
        return TopicState(name, topic.kafka_id, partitions, self._config(name))

    def partition(self, topic: str, partition: int) -> PartitionState | None:
        topic_id = self._names.get(topic)
        if topic_id is None:
            return None
        owner = self._topics[topic_id]
        part = owner.partitions.get(partition)
        if part is None:
            return None
        return self._state(owner, partition, part)

    @staticmethod
    def _state(topic: _Topic, number: int, part: _Partition) -> PartitionState:
        state = part.state
        if state is None:
            state = PartitionState(
                topic.name,
                number,
                None if part.leader < 0 else part.leader,
                part.leader_epoch,
                part.replicas,
                part.isr,
            )
            part.state = state
        return state

    def _config(self, name: str) -> TopicConfig:
        config = self._configs.get(name)
        if config is None:
            config = effective_config(self._broker_defaults, self._overrides.get(name, {}))
            self._configs[name] = config
        return config

    def close(self) -> None:
        """Nothing is held open between calls; kept for the Protocol."""

    def __enter__(self) -> KRaftClusterView:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- reading the directory -------------------------------------------------------------
    def _listing(self) -> tuple[list[SnapshotFile], list[tuple[int, Path]]]:
        try:
            names = os.listdir(self._dir)
        except FileNotFoundError:
            raise KafkaMetadataUnavailable(
                f"{self._location}: no KRaft metadata log directory {self._dir}"
            ) from None
        except OSError as exc:
            raise KafkaMetadataUnavailable(
                f"{self._location}: cannot list {self._dir}: {exc.strerror or exc}"
            ) from None
        snapshots: list[SnapshotFile] = []
        segments: list[tuple[int, Path]] = []
        for name in names:
            if name.endswith(".log"):
                try:
                    parsed = parse_segment_file_name(name)
                except KafkaFormatError:
                    continue
                segments.append((parsed.base_offset, self._dir / name))
            elif name.endswith(".checkpoint"):
                match = _SNAPSHOT_RE.match(name)
                if match is not None:
                    snapshots.append(SnapshotFile(int(match[1]), int(match[2]), self._dir / name))
        snapshots.sort()
        segments.sort()
        return snapshots, segments

    def refresh(self) -> None:
        """Apply the records appended since the last call (on the first, everything: the
        newest snapshot, then the log after it)."""
        for _ in range(3):
            snapshots, segments = self._listing()
            if self._loaded and self._log_moved(segments):
                self._truncation_seen()
            if not self._loaded:
                self._load_snapshot(snapshots[-1] if snapshots else None)
            if self._follow(segments):
                return
            self._truncation_seen()
        raise KafkaMetadataError(
            f"{self._dir}: the metadata log was truncated under the view three times in a row"
        )

    def _truncation_seen(self) -> None:
        log.info("kraft_metadata_log_truncated", directory=str(self._dir), offset=self._next_offset)
        self._reset()

    def _log_moved(self, segments: list[tuple[int, Path]]) -> bool:
        """True when the listing shows the log no longer holds the view's place: it starts
        after the view's offset, or the view's segment is gone with no successor starting
        at its offset."""
        if segments and segments[0][0] > self._next_offset:
            return True
        if self._segment is None or any(path == self._segment for _, path in segments):
            return False
        return not any(base == self._next_offset for base, _ in segments)

    # --- the snapshot ----------------------------------------------------------------------
    def _load_snapshot(self, snapshot: SnapshotFile | None) -> None:
        self._loaded = True
        self._snapshot = snapshot
        if snapshot is None:
            return
        source = str(snapshot.path)
        try:
            data = snapshot.path.read_bytes()
        except FileNotFoundError:
            # deleted since the listing (a newer one replaced it): list again
            self._loaded = False
            snapshots, _ = self._listing()
            newer = [s for s in snapshots if s != snapshot]
            self._load_snapshot(newer[-1] if newer else None)
            return
        except OSError as exc:
            raise KafkaMetadataUnavailable(f"{source}: cannot read: {exc.strerror}") from None
        try:
            self._apply_snapshot(data, source)
        except KafkaFormatError as exc:
            self._reset()
            raise KafkaMetadataError(f"KRaft snapshot {source}: {exc}") from exc
        self._next_offset = snapshot.end_offset

    def _apply_snapshot(self, data: bytes, source: str) -> None:
        pos = 0
        seen_header = seen_footer = False
        while pos < len(data):
            header = read_batch_header(data, pos, source=source)
            check_crc(data, header, source=source)
            if seen_footer:
                raise KafkaFormatError(
                    "record batches after the snapshot footer", offset=pos, source=source
                )
            if header.is_control:
                kinds = [
                    control_record_type(r.key) for r in decode_records(data, header, source=source)
                ]
                if not seen_header:
                    if not kinds or kinds[0] != CONTROL_SNAPSHOT_HEADER:
                        raise KafkaFormatError(
                            "the snapshot does not start with a SnapshotHeaderRecord",
                            offset=pos,
                            source=source,
                        )
                    seen_header = True
                if CONTROL_SNAPSHOT_FOOTER in kinds:
                    seen_footer = True
            elif not seen_header:
                raise KafkaFormatError(
                    "the snapshot does not start with a SnapshotHeaderRecord",
                    offset=pos,
                    source=source,
                )
            else:
                for _, record in iter_batch_metadata(data, header, source=source):
                    self._apply(record)
            pos = header.end
        if not seen_footer:
            raise KafkaTruncatedError(
                "the snapshot ends without its SnapshotFooterRecord", offset=pos, source=source
            )
        if self._txn is not None:
            raise KafkaFormatError(
                "the snapshot ends inside a metadata transaction", offset=pos, source=source
            )

    # --- the log ---------------------------------------------------------------------------
    def _follow(self, segments: list[tuple[int, Path]]) -> bool:
        """Read the log from the view's place; False when a segment was truncated or deleted
        under it."""
        if not segments:
            return True
        first = segments[0][0]
        if first > self._next_offset:
            where = (
                f"the newest snapshot ends at offset {self._next_offset}"
                if self._snapshot is not None
                else "there is no snapshot"
            )
            raise KafkaMetadataError(
                f"{self._dir}: the metadata log starts at offset {first} but {where}: the "
                "records between are missing"
            )
        # the segment holding the next offset: the last one starting at or before it
        index = 0
        for i, (base, _) in enumerate(segments):
            if base <= self._next_offset:
                index = i
        if self._segment is not None:
            for i, (_, path) in enumerate(segments):
                if path == self._segment:
                    index = i
                    break
        for i in range(index, len(segments)):
            path = segments[i][1]
            if path != self._segment:
                self._segment = path
                self._position = 0
                self._last_batch = None
            if not self._read_segment(path, newest=i == len(segments) - 1):
                return False
        return True

    def _read_segment(self, path: Path, *, newest: bool) -> bool:
        source = str(path)
        try:
            handle = open(path, "rb")  # noqa: SIM115 - closed below, read in chunks
        except FileNotFoundError:
            return False  # deleted since the listing: start again from a new listing
        except OSError as exc:
            raise KafkaMetadataUnavailable(f"{source}: cannot read: {exc.strerror}") from None
        with handle:
            if not self._in_place(handle):
                return False
            handle.seek(self._position)
            buf = b""
            buf_start = self._position  # the file position of buf[0]
            while True:
                chunk = handle.read(READ_CHUNK)
                eof = not chunk
                if chunk:
                    buf = buf[self._position - buf_start :] + chunk
                    buf_start = self._position
                pos = self._position - buf_start
                for header in self._batches(buf, pos, source, buf_start, eof, newest):
                    self._apply_batch(buf, header, source, buf_start)
                if eof:
                    return True

    def _in_place(self, handle: BinaryIO) -> bool:
        """False when the open segment no longer holds what the view read from it: shorter
        than the position reached, or another batch where the last one applied was."""
        if os.fstat(handle.fileno()).st_size < self._position:
            return False
        if self._last_batch is None:
            return True
        position, base_offset, crc = self._last_batch
        handle.seek(position)
        head = handle.read(HEADER_SIZE)
        if len(head) != HEADER_SIZE:
            return False
        fields = HEADER.unpack(head)
        return bool(fields[0] == base_offset and fields[4] == crc)

    def _batches(
        self, buf: bytes, pos: int, source: str, base: int, eof: bool, newest: bool
    ) -> Iterator[BatchHeader]:
        """The complete batches of ``buf`` from ``pos``; a batch cut off by the end of
        ``buf`` ends the walk (before EOF: the next chunk completes it; at the end of the
        newest segment: it is being written; elsewhere: corruption)."""
        end = len(buf)
        while pos < end:
            try:
                header = read_batch_header(buf, pos, source=source)
            except KafkaTruncatedError as exc:
                if not eof or newest:
                    return
                raise self._error(source, base + pos, exc) from None
            except KafkaFormatError as exc:
                raise self._error(source, base + pos, exc) from None
            yield header
            pos = header.end

    def _error(self, source: str, position: int, exc: Exception) -> KafkaMetadataError:
        return KafkaMetadataError(
            f"KRaft metadata log {source}: unreadable at byte {position} ({exc}); the view "
            f"holds the metadata up to offset {self._next_offset - 1}"
        )

    def _apply_batch(self, buf: bytes, header: BatchHeader, source: str, base: int) -> None:
        try:
            check_crc(buf, header, source=source)
        except KafkaFormatError as exc:
            raise self._error(source, base + header.position, exc) from None
        if header.last_offset >= self._next_offset and not header.is_control:
            apply = self._apply
            floor = self._next_offset
            try:
                if header.base_offset >= floor:
                    for _, record in iter_batch_metadata(buf, header, source=source):
                        apply(record)
                else:
                    records = list(iter_batch_metadata(buf, header, source=source))
                    for offset, record in records:
                        if offset >= floor:
                            apply(record)
            except KafkaFormatError as exc:
                raise self._error(source, base + header.position, exc) from None
        if header.next_offset > self._next_offset:
            self._next_offset = header.next_offset
        self._position = base + header.end
        self._last_batch = (base + header.position, header.base_offset, header.crc)

    # --- replay ----------------------------------------------------------------------------
    def _apply(self, record: MetadataRecord) -> None:
        kind = type(record)
        txn = self._txn
        if txn is not None:
            if kind is EndTransactionRecord:
                self._txn = None
                for held in txn:
                    self._replay(held)
            elif kind is AbortTransactionRecord:
                self._txn = None
            elif kind is BeginTransactionRecord:
                log.warning("kraft_metadata_nested_transaction", directory=str(self._dir))
            else:
                txn.append(record)
            return
        if kind is BeginTransactionRecord:
            self._txn = []
            return
        self._replay(record)

    def _replay(self, record: MetadataRecord) -> None:
        kind = type(record)
        if kind is PartitionChangeRecord:
            assert isinstance(record, PartitionChangeRecord)
            topic = self._topics.get(record.topic_id)
            part = None if topic is None else topic.partitions.get(record.partition_id)
            if part is None:
                return  # a partition Kafka does not know either: nothing to change
            if record.leader != NO_LEADER_CHANGE:
                part.leader = record.leader
                part.leader_epoch += 1
            if record.isr is not None:
                part.isr = record.isr
            if record.replicas is not None:
                part.replicas = record.replicas
            part.state = None
        elif kind is PartitionRecord:
            assert isinstance(record, PartitionRecord)
            topic = self._topics.get(record.topic_id)
            if topic is None:
                return
            topic.partitions[record.partition_id] = _Partition(
                record.replicas, record.isr, record.leader, record.leader_epoch
            )
        elif kind is TopicRecord:
            assert isinstance(record, TopicRecord)
            old = self._names.get(record.name)
            if old is not None and old != record.topic_id:
                self._topics.pop(old, None)
            self._topics[record.topic_id] = _Topic(record.name, record.topic_id)
            self._names[record.name] = record.topic_id
        elif kind is ConfigRecord:
            assert isinstance(record, ConfigRecord)
            self._replay_config(record)
        elif kind is RemoveTopicRecord:
            assert isinstance(record, RemoveTopicRecord)
            topic = self._topics.pop(record.topic_id, None)
            if topic is not None:
                if self._names.get(topic.name) == record.topic_id:
                    del self._names[topic.name]
                self._overrides.pop(topic.name, None)
                self._configs.pop(topic.name, None)
        # every other record type (brokers, features, ACLs, no-ops...) is not the view's

    def _replay_config(self, record: ConfigRecord) -> None:
        if record.resource_type == RESOURCE_TOPIC:
            target = self._overrides.setdefault(record.resource_name, {})
            self._configs.pop(record.resource_name, None)
        elif record.resource_type == RESOURCE_BROKER and record.resource_name == "":
            target = self._broker_defaults
            self._configs.clear()
        else:
            return  # one broker's own configs, client quotas...: not a topic's defaults
        if record.value is None:
            target.pop(record.name, None)
        else:
            target[record.name] = record.value


def _kafka_id(raw: bytes) -> str:
    """A topic id's 16 bytes as Kafka prints them (base64url, no padding)."""
    return uuid_to_kafka(uuid.UUID(bytes=raw))
