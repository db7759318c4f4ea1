"""Fetch Kafka records by offset or timestamp, from the remote tier, the local log, or both.

From an offset, a remote segment is read by batch fetches (:mod:`offloader.kafka.batches`: the
``.index`` fetched once and cached, then **one ranged GET** of the batches the requested count
needs, from the batch holding the offset) and their records decoded into columns
(:mod:`formats.kafka.columns`, C loop). From a time, and for local segments, the segment is
read from the index position at or before the wanted offset, sized from the segment's bytes per
offset for the requested count (another GET only when that estimate falls short), and decoded
into columns the same way. A time lookup goes ``.timeindex`` -> offset -> ``.index`` ->
position. Records before the wanted offset (or timestamp) in the first batch are dropped, so
the output starts exactly there; so are the records of a remote copy below its effective start
(a segment that straddled the watermark when it was copied: the copy before answers for them);
control batches (transaction markers) are not returned. Every batch must lie inside its
segment's offsets, after the one before, and the first one found through the ``.index`` must
not start after the offset looked up (else the segment is read from its start): a flipped base
offset or a wrong index entry never shifts or skips records
(:class:`~offloader.kafka.integrity.BatchGuard`); remote bytes are checked against the record's
span CRC32Cs before they are parsed.

Modes (Pinterest's): ``kafka-only`` and ``remote-only`` read one tier; ``kafka-preferred`` reads a
segment from the local log when it has it, else from the remote tier; ``remote-preferred`` the
other way round. Reading goes segment by segment from a cursor (the next offset wanted), so a
range that crosses tiers has no gap and no duplicate at the boundary; a local segment that Kafka
deletes before we open it is read from the remote tier instead.

Each read of a remote segment is a remote fetch on the tier's metrics
(:class:`~offloader.metrics.KafkaFetchMeter`: requests, bytes, errors, latency, GETs): every
batch fetch from an offset, and a time lookup's read of one segment.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator
from dataclasses import dataclass
from itertools import chain
from pathlib import Path

from formats.kafka.batch import BatchHeader, iter_batch_headers
from formats.kafka.columns import batch_columns, batch_rows
from offloader.errors import ConfigError, ObjectNotFound
from offloader.kafka.batches import segment_batches
from offloader.kafka.context import KafkaContext
from offloader.kafka.integrity import BatchGuard
from offloader.kafka.segments import (
    IndexCache,
    Reader,
    SegmentGone,
    SegmentView,
    local_views,
    remote_views,
)
from offloader.kafka.types import KafkaRecordRow
from offloader.logs import get_logger
from offloader.metrics.base import NO_METRICS, KafkaFetchMeter, Metrics
from offloader.store.base import ObjectStore

READ_MODES = ("kafka-only", "kafka-preferred", "remote-preferred", "remote-only")
#: a read without a count streams the segment in GETs of this size
MAX_WINDOW = 16 * 1024 * 1024
MIN_WINDOW = 16 * 1024

__all__ = ["READ_MODES", "IndexCache", "read_records"]

log = get_logger(__name__)


@dataclass
class _Start:
    offset: int | None
    timestamp: int | None

    def batch_may_hold(self, header: BatchHeader) -> bool:
        if self.offset is not None:
            return header.last_offset >= self.offset
        assert self.timestamp is not None
        return header.max_timestamp >= self.timestamp

    def record_ok(self, offset: int, timestamp: int) -> bool:
        if self.offset is not None:
            return offset >= self.offset
        assert self.timestamp is not None
        return timestamp >= self.timestamp


def _start_position(view: SegmentView, start: _Start) -> tuple[int, int]:
    """The ``.index`` position to read from and the offset it was looked up for (the first
    batch there must not start after it)."""
    index = view.offset_index()
    if start.offset is not None:
        anchor = max(start.offset, view.base)
        return index.lookup(anchor)[1], anchor
    assert start.timestamp is not None
    _, offset = view.time_index().lookup(start.timestamp)
    return index.lookup(offset)[1], offset


def _window(view: SegmentView, position: int, start: _Start, count: int | None) -> int:
    """Bytes to fetch from ``position`` for ``count`` records: up to an index position past
    the batch that holds the last one (one GET), else an estimate from bytes per offset."""
    if count is None or view.size <= 0:
        return MAX_WINDOW
    if start.offset is not None:
        target = max(start.offset, view.base)
        bound = view.offset_index().end_bound(target + max(count, 1) - 1)
        end = view.size if bound is None else bound
        return min(max(MIN_WINDOW, end - position), MAX_WINDOW * 4)
    if view.end is None:
        return MAX_WINDOW
    per_offset = view.size / max(1, view.end - view.base + 1)
    return max(MIN_WINDOW, int(count * per_offset * 1.25) + 4096)


def _remote_rows(
    store: ObjectStore,
    cache: IndexCache,
    view: SegmentView,
    topic: str,
    partition: int,
    offset: int,
    count: int | None,
    metrics: Metrics,
) -> Iterator[list[KafkaRecordRow]]:
    """Records of a remote segment from ``offset`` on, a list per batch, by batch fetches
    (:func:`~offloader.kafka.batches.segment_batches`: one ranged GET of the batches the
    count needs, or of :data:`MAX_WINDOW` bytes at a time without one), each batch's records
    decoded straight into rows by the C loop (:func:`~formats.kafka.columns.batch_rows`: no
    Python loop per record)."""
    assert view.record is not None and view.end is not None
    cursor = max(offset, view.base)
    remaining = count
    head, tail = (topic, partition), (view.tier,)
    while cursor <= view.end and (remaining is None or remaining > 0):
        fetched = segment_batches(
            store,
            cache,
            view.record,
            cursor,
            max_records=remaining,
            max_bytes=MAX_WINDOW if remaining is None else None,
            min_bytes=MIN_WINDOW,  # control batches take offsets of the count
            metrics=metrics,
        )
        for header in fetched.headers:
            if header.is_control:
                continue
            # from the wanted offset (not below a straddling copy's start), the count's records
            rows = batch_rows(
                fetched.data,
                header,
                KafkaRecordRow,
                head,
                tail,
                source=view.source,
                lo=cursor,
                limit=-1 if remaining is None else remaining,
            )
            if rows:
                yield rows
            if remaining is not None:
                remaining -= len(rows)
        cursor = fetched.next_offset


def _segment_rows(
    view: SegmentView,
    topic: str,
    partition: int,
    start: _Start,
    count: int | None,
    metrics: Metrics = NO_METRICS,
) -> Iterator[list[KafkaRecordRow]]:
    """Records of one segment from ``start`` on, a list per batch (the caller stops after its
    count); a remote segment's reads are one fetch on ``metrics``."""
    read, close, local_size = view.open_reader()
    size = local_size if local_size >= 0 else view.size
    meter = None
    if view.tier == "remote" and metrics.enabled:
        meter = KafkaFetchMeter(metrics, topic)
        read = _metered(read, meter)
    ok = False
    try:
        position, anchor = _start_position(view, start)
        missed = yield from _rows_from(
            view, read, size, position, anchor, topic, partition, start, count
        )
        if missed is not None:
            log.warning(
                "the .index pointed past the wanted offset; reading the segment from its start",
                segment=view.source,
                position=position,
                anchor=anchor,
                first_batch=missed,
            )
            yield from _rows_from(view, read, size, 0, anchor, topic, partition, start, count)
        ok = True
    except GeneratorExit:
        ok = True  # the caller has its count
        raise
    finally:
        close()
        if meter is not None:
            meter.done(ok)


def _metered(read: Reader, meter: KafkaFetchMeter) -> Reader:
    """``read``, each call counted as a GET of the bytes it returns."""

    def counted(start: int, end: int) -> bytes:
        data = read(start, end)
        meter.add_get()
        meter.add_bytes(len(data))
        return data

    return counted


def _rows_from(
    view: SegmentView,
    read: Reader,
    size: int,
    position: int,
    anchor: int,
    topic: str,
    partition: int,
    start: _Start,
    count: int | None,
) -> Generator[list[KafkaRecordRow], None, int | None]:
    """Records of the segment read from byte ``position``, a list per batch, ``count`` of them
    at most (see :func:`_segment_rows`). Returns the base offset of the first batch when it
    starts after ``anchor`` (the ``.index`` was wrong: nothing was yielded, the caller starts
    over from byte 0), else None."""
    guard = BatchGuard(view.source, view.segment_base, view.end, view.record)
    first = position > 0
    window = _window(view, position, start, count)
    started = False
    left = -1 if count is None else count  # rows still wanted (-1: no limit)
    while position < size:
        end = min(size, position + window)
        data = read(position, end)
        consumed = 0
        for header in iter_batch_headers(data, source=view.source, stop_at_partial=True):
            if first and header.base_offset > anchor:
                return header.base_offset  # nothing yielded yet: start over
            first = False
            guard.check(header)
            consumed = header.end
            if header.is_control or (not started and not start.batch_may_hold(header)):
                continue
            cols = batch_columns(data, header, source=view.source)
            kind = header.timestamp_type
            rows: list[KafkaRecordRow] = []
            for i, offset in enumerate(cols.offsets):
                if offset < view.base:
                    continue  # below a straddling copy's start: the copy before has it
                timestamp = cols.timestamps[i]
                if not started:
                    if not start.record_ok(offset, timestamp):
                        continue
                    started = True
                if len(rows) == left:
                    break  # the count is reached
                rows.append(
                    KafkaRecordRow(
                        topic,
                        partition,
                        offset,
                        timestamp,
                        kind,
                        cols.keys[i],
                        cols.values[i],
                        cols.headers[i],
                        view.tier,
                    )
                )
            if rows:
                yield rows
                if left > 0:
                    left -= len(rows)
                    if left == 0:
                        return None
        if consumed == 0:
            if end >= size:
                if view.end is None:
                    return None  # the active segment's last batch is still being written
                list(iter_batch_headers(data, source=view.source))  # raises: truncated
                return None
            window = min(max(window * 2, MIN_WINDOW), MAX_WINDOW * 4)
            continue
        position += consumed
        window = min(max(window, MIN_WINDOW), MAX_WINDOW)
    return None


def _pick(
    mode: str, cursor: int, local: list[SegmentView], remote: list[SegmentView]
) -> SegmentView | None:
    """The segment to read next from ``cursor``, by the mode's preference; when no segment
    holds ``cursor`` (a gap, or before the log start), the first segment after it."""
    order = {
        "kafka-only": (local,),
        "remote-only": (remote,),
        "kafka-preferred": (local, remote),
        "remote-preferred": (remote, local),
    }[mode]
    for tier in order:
        for view in tier:
            if view.holds(cursor):
                return view
    later = [v for tier in order for v in tier if v.base > cursor]
    return min(later, key=lambda v: v.base) if later else None


def read_records(
    ctx: KafkaContext,
    cache: IndexCache,
    topic: str,
    partition: int,
    *,
    from_offset: int | None,
    from_timestamp: int | None,
    count: int | None,
    log_dir: Path | None,
    mode: str,
) -> Iterator[KafkaRecordRow]:
    """Records of one partition (see the module docstring). Errors about the request are
    raised here, before the first record."""
    if count is not None and count < 0:
        raise ConfigError("count must not be negative")
    if from_offset is not None and from_offset < 0:
        raise ConfigError("offset must not be negative")
    remote = (
        [] if mode == "kafka-only" else remote_views(ctx.meta, ctx.store, cache, topic, partition)
    )
    local = (
        [] if mode == "remote-only" or log_dir is None else local_views(log_dir, topic, partition)
    )
    if not remote and not local:
        raise ObjectNotFound(f"no {mode} segments of {topic}-{partition}")
    # rows a batch at a time: the caller's loop over them runs in C (no generator resumed
    # per row)
    return chain.from_iterable(
        _generate(
            ctx.store,
            cache,
            mode,
            topic,
            partition,
            local,
            remote,
            from_offset,
            from_timestamp,
            count,
            ctx.metrics,
        )
    )


def _generate(
    store: ObjectStore,
    cache: IndexCache,
    mode: str,
    topic: str,
    partition: int,
    local: list[SegmentView],
    remote: list[SegmentView],
    from_offset: int | None,
    from_timestamp: int | None,
    count: int | None,
    metrics: Metrics = NO_METRICS,
) -> Iterator[list[KafkaRecordRow]]:
    """The records :func:`read_records` returns, a list per batch (never empty)."""
    remaining = count
    cursor = 0 if from_offset is None else from_offset
    timestamp = from_timestamp
    while remaining is None or remaining > 0:
        view = _pick(mode, cursor, local, remote)
        if view is None:
            return
        if (
            timestamp is not None
            and view.max_timestamp is not None
            and view.max_timestamp < timestamp
        ):
            cursor = (view.end if view.end is not None else cursor) + 1
            continue
        start = _Start(None, timestamp) if timestamp is not None else _Start(cursor, None)
        last = None
        try:
            chunks = (
                # the count's rows at most (batch_rows' limit)
                _remote_rows(store, cache, view, topic, partition, start.offset, remaining, metrics)
                if view.tier == "remote" and start.offset is not None
                else _segment_rows(view, topic, partition, start, remaining, metrics)
            )
            for chunk in chunks:
                if remaining is not None and len(chunk) > remaining:
                    chunk = chunk[:remaining]
                yield chunk
                last = chunk[-1].offset
                if remaining is not None:
                    remaining -= len(chunk)
                    if remaining <= 0:
                        return
        except SegmentGone:
            # Kafka deleted the local segment before we opened it: use the other tier
            (local if view.tier == "local" else remote).remove(view)
            continue
        if last is not None:
            timestamp = None  # found the first record at or after the time: go on by offset
        if view.end is None:
            return  # the active segment was read to its end
        cursor = max(view.end, last if last is not None else view.end) + 1
