"""Kafka segments found from the bucket alone (no metadata store): the store listed once, its
completion markers read by :func:`formats.kafka.discover.discover_kafka` (the parsing the
rebuild shares), and each kept finished copy returned as a COPY_SEGMENT_FINISHED
:class:`~offloader.metadata.kafka_base.RemoteSegmentRecord` for the readers
(the ``kafka-segments`` Spark source's ``discover`` option).

The records carry the ``.log``'s CRC32C and no span checksums (``checks`` None), as a rebuilt
record does: reads check Kafka's batch CRC32Cs and offsets.
"""

from __future__ import annotations

from collections.abc import Iterable

from formats.kafka.discover import FoundSegment, discover_kafka
from offloader.metadata.kafka_base import COPY_FINISHED, RemoteSegmentRecord
from offloader.selection import TopicSelection
from offloader.store.base import ObjectStore

__all__ = ["discover_segments", "found_record"]


def found_record(seg: FoundSegment) -> RemoteSegmentRecord:
    """The record a finished copy found in the bucket stands for."""
    m = seg.marker
    return RemoteSegmentRecord(
        segment_id=m.segment_id,
        topic=m.topic,
        topic_id=m.topic_id,
        partition=m.partition,
        base_offset=m.base_offset,
        end_offset=m.end_offset,
        max_timestamp=m.max_timestamp,
        size_bytes=m.log_size,
        leader_epochs=dict(m.leader_epochs),
        keys=dict(seg.keys),
        state=COPY_FINISHED,
        started_ms=m.finished_ms,
        updated_ms=m.finished_ms,
        log_crc32c=m.log_crc32c,
        start_offset=m.start_offset if m.start_offset > m.base_offset else None,
    )


def discover_segments(
    store: ObjectStore, topics: TopicSelection | Iterable[str] | None = None
) -> list[RemoteSegmentRecord]:
    """Every kept finished copy in the store (of the topics ``topics`` selects: a
    :class:`~offloader.selection.TopicSelection` or exact names; all when None), by topic,
    partition and offset; one listing, plus one GET per marker whose epochs are hashed."""
    if topics is None:
        wanted: TopicSelection | None = None
    elif isinstance(topics, TopicSelection):
        wanted = topics.require_flat()
    else:
        names = list(topics)
        if not names:
            return []
        wanted = TopicSelection.parse_all(names).require_flat()
    found = discover_kafka(
        ((o.key, o.size) for o in store.list()),
        (u.key for u in store.list_multipart_uploads()),
        lambda key: store.get(key).data,
        (lambda _topic: True) if wanted is None else wanted.matches,
    )
    return [found_record(seg) for seg in found.segments()]
