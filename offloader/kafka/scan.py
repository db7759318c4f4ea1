"""Bulk scans of remote Kafka segments (the Spark ``kafka-segments`` source's plan and tasks).

:func:`plan_scan` turns the COPY_SEGMENT_FINISHED segments of the metadata (one copy per offset,
from each copy's effective start: :func:`~offloader.kafka.segments.live_copies`) into picklable
:class:`ScanTask` s: one per segment, or one per ``split_bytes`` of a larger segment cut at
``.index`` positions (batch boundaries). A :class:`ScanFilter` (from pushed-down filters on
``partition``, ``offset`` and ``timestamp``) prunes whole segments by their offset range and
max timestamp, starts a segment's first task at the index position of its first wanted offset
and, with a lower time bound, no earlier than the batch the ``.timeindex`` names for that time
(``.timeindex`` -> offset -> ``.index`` -> position, as a fetch by time does), and filters the
records exactly. :func:`read_task` reads one task with one ranged GET (a plain ``.log``'s bytes
checked against the span CRC32Cs pinned in the segment's record, every batch inside the
segment's offsets; spec/kafka-segments.md §6). A transformed segment's
task carries its chunk table (loaded once, on the driver) and the key ring's path: the executor
reads the task's bytes through the decoding view, still one ranged GET (of the chunks covering
them).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from formats.kafka.batch import BatchHeader, iter_batch_headers
from formats.kafka.columns import RecordColumns, batch_columns
from formats.transform import TransformSection
from offloader.errors import ConfigError
from offloader.kafka.context import KafkaContext
from offloader.kafka.integrity import BatchGuard, VerifiedLog, check_transform
from offloader.kafka.segments import IndexCache, live_copies
from offloader.kafka.transform_read import is_transformed, segment_view
from offloader.kafka.types import KafkaRecordRow
from offloader.logs import get_logger
from offloader.metadata.kafka_base import COPY_FINISHED, RemoteSegmentRecord
from offloader.selection import TopicSelection
from offloader.store.base import ObjectStore

log = get_logger(__name__)

DEFAULT_SPLIT_BYTES = 64 * 1024 * 1024
FILTER_COLUMNS = ("partition", "offset", "timestamp")


@dataclass(frozen=True)
class ScanFilter:
    """ANDed bounds on partition, offset and timestamp (ms), inclusive; None = open."""

    partitions: frozenset[int] | None = None
    partition_range: tuple[float, float] = (-math.inf, math.inf)
    offset_range: tuple[float, float] = (-math.inf, math.inf)
    time_range: tuple[float, float] = (-math.inf, math.inf)

    def and_(self, column: str, op: str, value: Any) -> ScanFilter:
        """This filter and ``column op value`` (``op``: =, >, >=, <, <=, in)."""
        if column not in FILTER_COLUMNS:
            raise ConfigError(f"cannot push a filter on {column}")
        if op == "in":
            if column != "partition":
                raise ConfigError("IN is pushed for partition only")
            values = frozenset(int(v) for v in value)
            parts = values if self.partitions is None else self.partitions & values
            return replace(self, partitions=parts)
        lo, hi = getattr(self, f"{column}_range" if column != "timestamp" else "time_range")
        v = float(value)
        if op == "=":
            lo, hi = max(lo, v), min(hi, v)
        elif op == ">":
            lo = max(lo, math.floor(v) + 1)
        elif op == ">=":
            lo = max(lo, math.ceil(v))
        elif op == "<":
            hi = min(hi, math.ceil(v) - 1)
        elif op == "<=":
            hi = min(hi, math.floor(v))
        else:
            raise ConfigError(f"cannot push operator {op}")
        if column == "timestamp":
            return replace(self, time_range=(lo, hi))
        if column == "offset":
            return replace(self, offset_range=(lo, hi))
        return replace(self, partition_range=(lo, hi))

    def keeps_partition(self, partition: int) -> bool:
        lo, hi = self.partition_range
        return lo <= partition <= hi and (self.partitions is None or partition in self.partitions)

    def keeps_segment(self, seg: RemoteSegmentRecord) -> bool:
        lo, hi = self.offset_range
        return (
            self.keeps_partition(seg.partition)
            and seg.end_offset >= lo
            and seg.first_offset <= hi
            and seg.max_timestamp >= self.time_range[0]
        )

    def keeps(self, offset: int, timestamp: int) -> bool:
        lo, hi = self.offset_range
        tlo, thi = self.time_range
        return lo <= offset <= hi and tlo <= timestamp <= thi


@dataclass(frozen=True)
class ScanTask:
    """One Spark partition: bytes ``[start, end)`` of one remote ``.log``. Picklable."""

    topic: str
    partition: int
    key: str
    base_offset: int
    start: int
    end: int
    scan_filter: ScanFilter = field(default_factory=ScanFilter)
    #: a transformed segment: its id, chunk table, key ring and decoded-chunk cache size
    segment_id: str = ""
    transform: TransformSection | None = None
    key_ring: str | None = None
    cache_bytes: int = 0
    #: the copy's effective start: its records below it are another copy's (not returned)
    start_offset: int = 0
    #: the segment's record: its pinned checks (a plain ``.log``'s spans checked before its
    #: bytes are parsed) and its offsets (every batch checked inside them)
    record: RemoteSegmentRecord | None = None
    #: the offset the first task's ``.index`` position was looked up for (None: no lookup)
    anchor: int | None = None


def _cuts(positions: Iterable[int], start: int, size: int, split: int) -> list[int]:
    """Task boundaries from ``start`` to ``size``: index positions about ``split`` apart."""
    bounds = [start]
    for pos in positions:
        if pos > bounds[-1] and pos - bounds[-1] >= split and pos < size:
            bounds.append(pos)
    bounds.append(size)
    return bounds


def plan_scan(
    ctx: KafkaContext,
    cache: IndexCache,
    topics: TopicSelection | Iterable[str] | None,
    scan_filter: ScanFilter,
    split_bytes: int = DEFAULT_SPLIT_BYTES,
) -> list[ScanTask]:
    """The scan tasks of the remote segments of the topics ``topics`` selects (a
    :class:`~offloader.selection.TopicSelection`, or exact names; None: every topic)."""
    finished = ctx.meta.list_segments(states=[COPY_FINISHED])
    return plan_segments(finished, cache, topics, scan_filter, split_bytes)


def plan_segments(
    finished: Iterable[RemoteSegmentRecord],
    cache: IndexCache,
    topics: TopicSelection | Iterable[str] | None,
    scan_filter: ScanFilter,
    split_bytes: int = DEFAULT_SPLIT_BYTES,
) -> list[ScanTask]:
    """:func:`plan_scan` over these finished copies (from the metadata store, or found in
    the bucket by :func:`offloader.kafka.discover.discover_segments`)."""
    wanted: TopicSelection | None = None
    if isinstance(topics, TopicSelection):
        wanted = topics.require_flat()
    elif topics is not None:
        names = list(topics)
        if not names:
            return []
        wanted = TopicSelection.parse_all(names).require_flat()
    tasks: list[ScanTask] = []
    for seg in live_copies(finished):
        if wanted is not None and not wanted.matches(seg.topic):
            continue
        if not scan_filter.keeps_segment(seg):
            continue
        lo = max(scan_filter.offset_range[0], seg.first_offset)
        since = scan_filter.time_range[0]
        start = 0
        anchor: int | None = None
        index = None
        if lo > seg.base_offset or since > -math.inf or seg.size_bytes > split_bytes:
            index = cache.offset_index(seg)
            if lo > seg.base_offset:
                start, anchor = index.lookup(int(lo))[1], int(lo)
            if since > -math.inf:
                # batches before the one holding the time entry's offset are all older
                _, at = cache.time_index(seg).lookup(math.floor(since))
                if index.lookup(at)[1] > start:
                    start, anchor = index.lookup(at)[1], at
        positions = index.positions if index is not None else ()
        bounds = _cuts(positions, start, seg.size_bytes, split_bytes)
        section = cache.section(seg) if is_transformed(seg) else None
        if section is None:
            check_transform(seg, None)
        for a, b in itertools.pairwise(bounds):
            tasks.append(
                ScanTask(
                    seg.topic,
                    seg.partition,
                    seg.keys["log"],
                    seg.base_offset,
                    a,
                    b,
                    scan_filter,
                    seg.segment_id,
                    section,
                    cache.key_ring,
                    cache.cache_bytes,
                    seg.first_offset,
                    seg,
                    anchor if a == start and start > 0 else None,
                )
            )
    return tasks


def read_task(store: ObjectStore, task: ScanTask) -> Iterator[KafkaRecordRow]:
    """The task's records (filtered), one row each (see :func:`task_columns`)."""
    for header, cols in task_columns(store, task):
        kind = header.timestamp_type
        for i, offset in enumerate(cols.offsets):
            yield KafkaRecordRow(
                task.topic,
                task.partition,
                offset,
                cols.timestamps[i],
                kind,
                cols.keys[i],
                cols.values[i],
                cols.headers[i],
            )


def task_columns(store: ObjectStore, task: ScanTask) -> Iterator[tuple[BatchHeader, RecordColumns]]:
    """The task's records (filtered) batch by batch, as columns (the C decoder of
    :mod:`formats.kafka.columns`), from one ranged GET: a plain ``.log``'s bytes checked
    against the record's span CRC32Cs, a transformed one's chunks against its chunk table,
    every batch inside the segment's offsets (:mod:`offloader.kafka.integrity`)."""
    read = _reader(store, task)
    data = read(task.start, task.end)
    flt = task.scan_filter
    hi = flt.offset_range[1]
    record = task.record
    end_offset = record.end_offset if record is not None else None
    guard = BatchGuard(task.key, task.base_offset, end_offset, record)
    headers = iter_batch_headers(data, source=task.key)
    if task.anchor is not None:
        listed = list(headers)
        if listed and listed[0].base_offset > task.anchor:
            log.warning(
                "the .index pointed past the wanted offset; reading the segment from its start",
                segment=task.key,
                anchor=task.anchor,
                first_batch=listed[0].base_offset,
            )
            data = read(0, task.end)
            listed = list(iter_batch_headers(data, source=task.key))
        headers = iter(listed)
    for header in headers:
        guard.check(header)
        if header.is_control or header.last_offset < flt.offset_range[0]:
            continue
        if header.base_offset > hi:
            return
        if header.max_timestamp < flt.time_range[0]:
            continue
        cols = batch_columns(data, header, source=task.key)
        kept = [
            i
            for i, (offset, ts) in enumerate(zip(cols.offsets, cols.timestamps, strict=True))
            if offset >= task.start_offset and flt.keeps(offset, ts)
        ]
        if len(kept) == len(cols):
            yield header, cols
        elif kept:
            yield (
                header,
                RecordColumns(
                    [cols.offsets[i] for i in kept],
                    [cols.timestamps[i] for i in kept],
                    [cols.keys[i] for i in kept],
                    [cols.values[i] for i in kept],
                    [cols.headers[i] for i in kept],
                ),
            )


def _reader(store: ObjectStore, task: ScanTask) -> Callable[[int, int], bytes]:
    if task.transform is not None:
        view = segment_view(
            store,
            task.key,
            task.segment_id,
            task.base_offset,
            task.transform,
            key_ring=task.key_ring,
            cache_bytes=task.cache_bytes,
        )
        return lambda a, b: view.get_range(task.key, a, b).data
    if task.record is not None:
        return VerifiedLog(store, task.record).read
    return lambda a, b: store.get_range(task.key, a, b).data
