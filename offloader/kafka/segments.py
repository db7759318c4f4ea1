"""Segment views: one segment of one tier (remote object or local file), read by byte range.

A :class:`SegmentView` knows its offsets (``end`` is None for the active local segment), its size,
how to read ``[start, end)`` of its ``.log``, and its indexes (remote ones fetched once and kept
in an :class:`IndexCache`, with the chunk table of a transformed segment: its ``.log`` is then
read through the decoding view of :mod:`offloader.kafka.transform_read`, still one ranged GET
per read). Every remote object is checked against the segment's record before a byte of it is
used (:mod:`offloader.kafka.integrity`). :func:`remote_views` builds them from the metadata
(segments that are COPY_SEGMENT_FINISHED, through :func:`live_copies`: one copy per offset, from
each copy's effective start), :func:`local_views` from a broker log directory (read-only).
"""

from __future__ import annotations

import os
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path

from formats.kafka.index import (
    OffsetIndex,
    TimeIndex,
    decode_offset_index,
    decode_time_index,
)
from formats.kafka.names import partition_dir_name
from formats.transform import TransformSection
from offloader.errors import ObjectNotFound
from offloader.kafka.integrity import VerifiedLog, check_transform, verified_object
from offloader.kafka.logdir import LocalSegment, open_segment_file, scan_partition
from offloader.kafka.transform_read import is_transformed, load_section, segment_view
from offloader.metadata.kafka_base import COPY_FINISHED, KafkaMetadataStore, RemoteSegmentRecord
from offloader.store.base import ObjectStore

Reader = Callable[[int, int], bytes]


class SegmentGone(Exception):
    """A local segment's files vanished (Kafka deleted it) before we opened them."""


@dataclass
class SegmentView:
    tier: str  # "remote" or "local"
    #: the first offset the view answers for: a remote copy's effective start (its ``.log``
    #: and indexes may begin below it, at the segment's base offset)
    base: int
    end: int | None
    size: int
    max_timestamp: int | None
    source: str
    open_reader: Callable[[], tuple[Reader, Callable[[], None], int]]
    offset_index: Callable[[], OffsetIndex]
    time_index: Callable[[], TimeIndex]
    #: a remote segment's record (its checks), None for a local file
    record: RemoteSegmentRecord | None = None

    @property
    def segment_base(self) -> int:
        """The segment's own base offset: where its ``.log`` and indexes begin (below
        :attr:`base` for a copy that straddled the watermark)."""
        return self.record.base_offset if self.record is not None else self.base

    def holds(self, offset: int) -> bool:
        return self.base <= offset and (self.end is None or offset <= self.end)


class IndexCache:
    """Remote ``.index`` / ``.timeindex`` files and the decoding views of transformed
    ``.log`` s, fetched once per segment (LRU-bounded). ``key_ring`` and ``cache_bytes``: how
    transformed segments are decrypted and their decoded chunks cached."""

    def __init__(
        self,
        store: ObjectStore,
        max_segments: int = 512,
        *,
        key_ring: str | None = None,
        cache_bytes: int = 0,
    ) -> None:
        self._store = store
        self._max = max_segments
        self._cache: OrderedDict[tuple[str, str], OffsetIndex | TimeIndex] = OrderedDict()
        self.key_ring = key_ring
        self.cache_bytes = cache_bytes
        self._views: OrderedDict[str, ObjectStore] = OrderedDict()
        self._sections: OrderedDict[str, TransformSection] = OrderedDict()

    def section(self, record: RemoteSegmentRecord) -> TransformSection:
        """The chunk table of a transformed segment (its ``.chunks`` GET once)."""
        found = self._sections.get(record.segment_id)
        if found is None:
            found = self._sections[record.segment_id] = load_section(self._store, record)
            while len(self._sections) > self._max:
                self._sections.popitem(last=False)
        return found

    def log_store(self, record: RemoteSegmentRecord) -> ObjectStore:
        """The store to read the record's ``.log`` from: the store itself for a plain segment,
        the decoding view of a transformed one (its ``.chunks`` fetched once)."""
        if not is_transformed(record):
            return self._store
        found = self._views.get(record.segment_id)
        if found is not None:
            self._views.move_to_end(record.segment_id)
            return found
        view = segment_view(
            self._store,
            record.keys["log"],
            record.segment_id,
            record.base_offset,
            self.section(record),
            key_ring=self.key_ring,
            cache_bytes=self.cache_bytes,
        )
        self._views[record.segment_id] = view
        while len(self._views) > self._max:
            self._views.popitem(last=False)
        return view

    def _get(self, record: RemoteSegmentRecord, kind: str) -> OffsetIndex | TimeIndex:
        key = (record.segment_id, kind)
        found = self._cache.get(key)
        if found is not None:
            self._cache.move_to_end(key)
            return found
        data = verified_object(self._store, record, kind)
        source = record.keys[kind]
        value: OffsetIndex | TimeIndex
        if kind == "index":
            value = decode_offset_index(data, record.base_offset, source=source)
        else:
            value = decode_time_index(data, record.base_offset, source=source)
        self._cache[key] = value
        while len(self._cache) > self._max:
            self._cache.popitem(last=False)
        return value

    def offset_index(self, record: RemoteSegmentRecord) -> OffsetIndex:
        value = self._get(record, "index")
        assert isinstance(value, OffsetIndex)
        return value

    def time_index(self, record: RemoteSegmentRecord) -> TimeIndex:
        value = self._get(record, "timeindex")
        assert isinstance(value, TimeIndex)
        return value


def live_copies(records: Iterable[RemoteSegmentRecord]) -> list[RemoteSegmentRecord]:
    """The finished copies to read, each offset from one copy only: per partition in offset
    order, a copy whose offsets an earlier one holds entirely is left out, one that overlaps
    it answers from the first offset past it (its ``start_offset`` moved up). The metadata
    store keeps one copy per range (since schema version 8); this is what readers rely on
    whatever the store holds. Ordered by topic, partition, first offset."""
    ordered = sorted(
        records, key=lambda r: (r.topic, r.partition, r.first_offset, r.started_ms, r.segment_id)
    )
    out: list[RemoteSegmentRecord] = []
    for record in ordered:
        last = out[-1] if out else None
        if last is not None and (last.topic, last.partition) == (record.topic, record.partition):
            if record.end_offset <= last.end_offset:
                continue  # every offset of it is read from ``last``
            if record.first_offset <= last.end_offset:
                record = replace(record, start_offset=last.end_offset + 1)
        out.append(record)
    return out


def remote_views(
    meta: KafkaMetadataStore, store: ObjectStore, cache: IndexCache, topic: str, partition: int
) -> list[SegmentView]:
    views = []
    for record in live_copies(meta.list_segments(topic, partition, states=[COPY_FINISHED])):
        key = record.keys["log"]

        def opener(
            key: str = key, record: RemoteSegmentRecord = record
        ) -> tuple[Reader, Callable[[], None], int]:
            if is_transformed(record):
                source = cache.log_store(record)  # the .chunks checked, transform included

                def read(start: int, end: int) -> bytes:
                    return source.get_range(key, start, end).data

                return read, lambda: None, -1
            check_transform(record, None)
            return VerifiedLog(store, record).read, lambda: None, -1

        views.append(
            SegmentView(
                "remote",
                record.first_offset,  # records below it belong to the copy before
                record.end_offset,
                record.size_bytes,
                record.max_timestamp,
                key,
                opener,
                lambda r=record: cache.offset_index(r),  # type: ignore[misc]
                lambda r=record: cache.time_index(r),  # type: ignore[misc]
                record,
            )
        )
    return views


def _local_opener(segment: LocalSegment) -> Callable[[], tuple[Reader, Callable[[], None], int]]:
    def opener() -> tuple[Reader, Callable[[], None], int]:
        handle = open_segment_file(segment, "log")
        if handle is None:
            raise SegmentGone(str(segment.path("log")))
        fd = handle.fileno()

        def read(start: int, end: int) -> bytes:
            return os.pread(fd, end - start, start)

        return read, handle.close, os.fstat(fd).st_size

    return opener


def _local_index(segment: LocalSegment, kind: str) -> bytes:
    handle = open_segment_file(segment, kind)
    if handle is None:
        return b""
    with handle:
        return handle.read()


def local_views(log_dir: Path, topic: str, partition: int) -> list[SegmentView]:
    directory = log_dir / partition_dir_name(topic, partition)
    if not directory.is_dir():
        raise ObjectNotFound(f"{directory} is not a partition directory of the log directory")
    part = scan_partition(directory)
    views = []
    bases = [s.base_offset for s in part.segments]
    for i, segment in enumerate(part.segments):
        end = bases[i + 1] - 1 if i + 1 < len(bases) else None
        try:
            size = segment.path("log").stat().st_size
        except FileNotFoundError:
            size = -1
        views.append(
            SegmentView(
                "local",
                segment.base_offset,
                end,
                size,
                None,
                str(segment.path("log")),
                _local_opener(segment),
                lambda s=segment: decode_offset_index(  # type: ignore[misc]
                    _local_index(s, "index"), s.base_offset, source=str(s.path("index"))
                ),
                lambda s=segment: decode_time_index(  # type: ignore[misc]
                    _local_index(s, "timeindex"), s.base_offset, source=str(s.path("timeindex"))
                ),
            )
        )
    return views
