"""A Kafka broker's log directory, read-only: partitions, their segments, which are closed.

The directory stands for the broker: this module never writes, renames or deletes in it. Kafka
may roll, rename (``*.deleted``) or remove segments while we look, so a scan is a snapshot and
:func:`open_segment_file` tries the live name, then the ``.deleted`` name. A segment is *closed*
when it is not the newest live segment of its partition; ``.deleted`` segments are closed.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from formats.kafka.errors import KafkaFormatError, KafkaNameError
from formats.kafka.names import (
    LEADER_EPOCH_CHECKPOINT,
    PARTITION_METADATA,
    parse_leader_epoch_checkpoint,
    parse_partition_dir,
    parse_partition_metadata,
    parse_segment_file_name,
    segment_file_name,
)
from offloader.errors import ConfigError
from offloader.logs import get_logger
from offloader.selection import TopicSelection

log = get_logger(__name__)


@dataclass(frozen=True)
class LocalSegment:
    """One segment as seen by a scan."""

    base_offset: int
    directory: Path
    deleted: bool
    kinds: frozenset[str]
    active: bool = False

    def path(self, kind: str, *, deleted: bool | None = None) -> Path:
        gone = self.deleted if deleted is None else deleted
        return self.directory / segment_file_name(self.base_offset, kind, deleted=gone)


@dataclass(frozen=True)
class UnreadablePartition:
    """A partition directory whose own files could not be read (no ``partition.metadata``,
    a damaged ``leader-epoch-checkpoint``): reported, and skipped by this pass."""

    topic: str
    partition: int
    directory: Path
    error: str


@dataclass(frozen=True)
class LocalPartition:
    topic: str
    partition: int
    directory: Path
    topic_id: str
    leader_epochs: tuple[tuple[int, int], ...]
    segments: tuple[LocalSegment, ...] = field(default=())

    @property
    def closed(self) -> tuple[LocalSegment, ...]:
        return tuple(s for s in self.segments if not s.active)

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"


def open_segment_file(segment: LocalSegment, kind: str) -> BinaryIO | None:
    """The open file (live name first, then ``.deleted``), or None if both are gone. Once open,
    Kafka renaming or deleting it does not disturb our reads (POSIX keeps the inode)."""
    for deleted in (segment.deleted, not segment.deleted):
        try:
            return segment.path(kind, deleted=deleted).open("rb")
        except FileNotFoundError:
            continue
    return None


def _read_optional(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


def scan_partition(directory: Path) -> LocalPartition:
    topic, partition = parse_partition_dir(directory.name)
    meta = _read_optional(directory / PARTITION_METADATA)
    if meta is None:
        raise KafkaFormatError("no partition.metadata (topic id unknown)", source=str(directory))
    topic_id = parse_partition_metadata(meta, source=str(directory / PARTITION_METADATA))
    epochs_raw = _read_optional(directory / LEADER_EPOCH_CHECKPOINT)
    epochs = (
        ()
        if epochs_raw is None
        else parse_leader_epoch_checkpoint(
            epochs_raw, source=str(directory / LEADER_EPOCH_CHECKPOINT)
        )
    )
    found: dict[tuple[int, bool], set[str]] = {}
    for name in os.listdir(directory):
        try:
            parsed = parse_segment_file_name(name)
        except KafkaNameError:
            continue
        found.setdefault((parsed.base_offset, parsed.deleted), set()).add(parsed.kind)
    live = sorted(
        base for (base, deleted), kinds in found.items() if not deleted and "log" in kinds
    )
    active_base = live[-1] if live else None
    segments = []
    for (base, deleted), kinds in sorted(found.items()):
        if "log" not in kinds:
            continue
        if deleted and (base, False) in found and "log" in found[(base, False)]:
            continue  # both names seen mid-rename: the live one wins
        segments.append(
            LocalSegment(
                base,
                directory,
                deleted,
                frozenset(kinds),
                active=base == active_base and not deleted,
            )
        )
    return LocalPartition(topic, partition, directory, topic_id, epochs, tuple(segments))


def scan_log_dir(
    log_dir: Path,
    topics: str | TopicSelection | None = None,
    unreadable: list[UnreadablePartition] | None = None,
) -> list[LocalPartition]:
    """Every partition directory of ``log_dir`` whose topic ``topics`` selects (the one
    selection form, :mod:`offloader.selection`; None: every topic), sorted by topic and
    partition. Directories that are not partitions are skipped. With an ``unreadable`` list, a
    partition whose own files are bad is added to it (and left out) instead of failing the
    whole scan: one bad directory never hides the others."""
    if not log_dir.is_dir():
        raise ConfigError(f"Kafka log directory {log_dir} does not exist")
    selection = TopicSelection.of(topics)
    if selection is not None:
        selection.require_flat()
    partitions = []
    for entry in sorted(os.listdir(log_dir)):
        path = log_dir / entry
        if not path.is_dir():
            continue
        try:
            topic, number = parse_partition_dir(entry)
        except KafkaNameError:
            continue
        if selection is not None and not selection.matches(topic):
            continue
        try:
            partitions.append(scan_partition(path))
        except FileNotFoundError:
            continue  # the partition was deleted while we looked
        except KafkaFormatError as exc:
            if unreadable is None:
                raise
            log.error(
                "unreadable Kafka partition directory skipped", path=str(path), error=str(exc)
            )
            unreadable.append(UnreadablePartition(topic, number, path, str(exc)))
    return sorted(partitions, key=lambda p: (p.topic, p.partition))
