"""What a listing of the store says about Kafka segments (spec/kafka-manifests.md §4): the
finished copies (one per offset, duplicates resolved deterministically), the unfinished
attempts and each partition's bucket watermark. Pure: listed keys and sizes in, values out.

Shared by ``offloader metadata rebuild`` (:mod:`offloader.rebuild.kafka_segments`) and the
``kafka-segments`` Spark source's ``discover`` option, so that both read the markers alike.
The one read it may need, a marker body whose key has its leader epochs hashed, goes through
the ``read_body`` callable the caller passes (one GET per such marker).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from formats.errors import FormatError, InvalidKeyError
from formats.kafka.errors import KafkaNameError
from formats.kafka.manifest import (
    KAFKA_KIND,
    KAFKA_MARKERS,
    SegmentMarker,
    decode_segment_marker_body,
    parse_segment_marker_key,
    parse_watermark_name,
)
from formats.kafka.names import parse_remote_key
from formats.manifest import WATERMARKS, parse_watermark_key

__all__ = [
    "FoundSegment",
    "KafkaDiscovery",
    "PartitionKey",
    "UnfinishedAttempt",
    "discover_kafka",
]

#: (topic, topic id, partition)
PartitionKey = tuple[str, str, int]


@dataclass(frozen=True)
class FoundSegment:
    """A finished copy: its marker and the keys of its objects, as listed."""

    marker: SegmentMarker
    keys: Mapping[str, str]
    marker_key: str


@dataclass(frozen=True)
class UnfinishedAttempt:
    """Objects (or an open multipart upload) of a segment id that has no marker."""

    topic: str
    topic_id: str
    partition: int
    base_offset: int
    segment_id: str
    keys: tuple[str, ...]
    upload: bool


@dataclass
class PartitionFound:
    """One partition: its kept copies in offset order, the copies they supersede, its bucket
    watermark (position, tag)."""

    topic: str
    topic_id: str
    partition: int
    kept: list[FoundSegment] = field(default_factory=list)
    superseded: list[tuple[FoundSegment, FoundSegment]] = field(default_factory=list)
    watermark: tuple[int, str] | None = None


@dataclass
class KafkaDiscovery:
    """Everything the listing says: partitions (by :data:`PartitionKey`), unfinished attempts,
    and problems (a marker whose objects are missing or of another size; an unreadable
    manifest key) as ``(key, message)``."""

    partitions: dict[PartitionKey, PartitionFound] = field(default_factory=dict)
    unfinished: list[UnfinishedAttempt] = field(default_factory=list)
    problems: list[tuple[str, str]] = field(default_factory=list)

    def segments(self) -> list[FoundSegment]:
        """Every kept copy, by topic, partition and offset."""
        return [s for key in sorted(self.partitions) for s in self.partitions[key].kept]


def _check_objects(marker: SegmentMarker, keys: Mapping[str, str], sizes: Mapping[str, int]) -> str:
    wrong = [f"its {kind} object is missing" for kind in marker.kinds if kind not in keys]
    log_key = keys.get("log")
    if log_key is not None and marker.transform == "none" and sizes[log_key] != marker.log_size:
        wrong.append(f"{log_key} is {sizes[log_key]} bytes, the marker says {marker.log_size}")
    return "; ".join(wrong)


def discover_kafka(
    objects: Iterable[tuple[str, int]],
    upload_keys: Iterable[str],
    read_body: Callable[[str], bytes],
    select: Callable[[str], bool] = lambda _topic: True,
) -> KafkaDiscovery:
    """The Kafka segments of a listing (``objects``: key and size; ``upload_keys``: the keys
    of incomplete multipart uploads); ``select``: which topics to keep (by name).

    Of two finished copies whose offsets overlap, the one with the lower start offset is kept,
    then the one the partition's bucket watermark names, then the lower segment id; the other
    is returned as superseded. Only selected topics are returned."""
    found = KafkaDiscovery()
    markers: list[tuple[str, SegmentMarker]] = []
    by_segment: dict[str, dict[str, str]] = defaultdict(dict)
    where: dict[str, tuple[str, str, int, int]] = {}
    sizes: dict[str, int] = {}
    watermarks: dict[PartitionKey, tuple[int, str]] = {}
    for key, size in objects:
        sizes[key] = size
        try:
            if key.startswith(KAFKA_MARKERS):
                parsed = parse_segment_marker_key(key)
                if not select(parsed.topic):
                    continue
                marker = parsed.marker or decode_segment_marker_body(read_body(key))
                markers.append((key, marker))
            elif key.startswith(WATERMARKS):
                wm = parse_watermark_key(key)
                if wm.kind != KAFKA_KIND or wm.name is None:
                    continue
                part = parse_watermark_name(wm.name)
                if select(part[0]) and (
                    part not in watermarks or wm.position > watermarks[part][0]
                ):
                    watermarks[part] = (wm.position, wm.tag)
            else:
                remote = parse_remote_key(key)
                if select(remote.topic):
                    by_segment[remote.segment_id][remote.suffix] = key
                    where[remote.segment_id] = (
                        remote.topic,
                        remote.topic_id,
                        remote.partition,
                        remote.base_offset,
                    )
        except KafkaNameError:
            continue  # not a Kafka segment key: Pulsar's, or nobody's
        except (InvalidKeyError, FormatError) as exc:
            found.problems.append((key, str(exc)))
    uploads: dict[str, list[str]] = defaultdict(list)
    for key in upload_keys:
        try:
            remote = parse_remote_key(key)
        except KafkaNameError:
            continue
        if select(remote.topic):
            uploads[remote.segment_id].append(key)
            where.setdefault(
                remote.segment_id,
                (remote.topic, remote.topic_id, remote.partition, remote.base_offset),
            )
    candidates: dict[PartitionKey, list[FoundSegment]] = defaultdict(list)
    marked: set[str] = set()
    for key, marker in markers:
        marked.add(marker.segment_id)
        keys = by_segment.get(marker.segment_id, {})
        wrong = _check_objects(marker, keys, sizes)
        if wrong:
            found.problems.append((key, f"marker without its objects: {wrong}"))
            continue
        part = (marker.topic, marker.topic_id, marker.partition)
        candidates[part].append(FoundSegment(marker, dict(sorted(keys.items())), key))
    for part in sorted(set(candidates) | set(watermarks)):
        pf = PartitionFound(*part, watermark=watermarks.get(part))
        tag = pf.watermark[1] if pf.watermark is not None else None
        ordered = sorted(
            candidates.get(part, []),
            key=lambda s: (
                s.marker.start_offset,
                s.marker.segment_uuid != tag,
                s.marker.segment_id,
            ),
        )
        for seg in ordered:
            last = pf.kept[-1] if pf.kept else None
            if last is not None and seg.marker.start_offset <= last.marker.end_offset:
                pf.superseded.append((seg, last))
            else:
                pf.kept.append(seg)
        found.partitions[part] = pf
    for segment_id in sorted(set(by_segment) | set(uploads)):
        if segment_id in marked:
            continue
        topic, topic_id, partition, base = where[segment_id]
        found.unfinished.append(
            UnfinishedAttempt(
                topic,
                topic_id,
                partition,
                base,
                segment_id,
                tuple(sorted(by_segment.get(segment_id, {}).values())),
                segment_id in uploads,
            )
        )
    found.unfinished.sort(key=lambda a: (a.topic, a.partition, a.base_offset, a.segment_id))
    return found
