"""Fetch as a broker serves: the record batches of a remote segment that cover the wanted
offsets, as they are stored (one buffer, the batches' headers and positions in it), with no
object per record (spec/kafka-segments.md §7).

:func:`fetch_batches` answers for a partition (the live remote copy holding the offset, or the
first one after it), :func:`segment_batches` for one segment. The bytes read are the ones the
batches need: the ``.index`` (fetched once, cached by the :class:`IndexCache`) gives the byte
range, and **one ranged GET** reads it:

* **start**: the entry at or after the offset names the batch that holds it (entries are a
  batch's *last* offset and its position); the batch before (at the entry below) is read only
  when it lies within :data:`SKIP_SLACK` bytes (8 KiB), where Kafka's index rule (an entry
  once more than ``index.interval.bytes`` were appended) may have left small unindexed batches
  in between. Batches bigger than the interval each have their entry: the read starts at the
  wanted one (but in a segment's first two batches: its first batch never has an entry). When the
  read starts at the entry and its first batch starts after the offset (an unindexed batch
  held it), the bytes from the entry below are read by a second GET; when even those start
  after it (a wrong ``.index``), the segment is read from its start, as Kafka's own lookup
  would.
* **end**: the index entry past the batch holding the last wanted offset (``max_records``),
  or the last entry within ``max_bytes`` of the start (Kafka's ``fetch.max.bytes`` /
  ``max.partition.fetch.bytes``: batches are whole, and the first one is returned even when
  it is larger than the limit), whichever comes first.

Every byte stays verified before it is returned (:mod:`offloader.kafka.integrity`): each
batch's CRC32C; a plain ``.log``'s spans lying inside the range against the record's span
CRC32Cs (the range is widened to whole spans when that is cheap, :data:`SPAN_SLACK`), and for a
batch whose first 21 bytes (outside its CRC32C) fall in a partial span at an edge, its offsets
against the ``.index`` entries around it; every batch inside the segment's offsets and after
the one before (:class:`~offloader.kafka.integrity.BatchGuard`). A transformed segment is read
through its decoding view: the chunks covering the range, one ranged GET, each chunk
authenticated against its table.

Every call is one remote fetch on the tier's metrics (KIP-405's ``RemoteFetchRequestsPerSec``,
``RemoteFetchBytesPerSec``, ``RemoteFetchErrorsPerSec``, the fetch latency and the GETs it made:
:class:`~offloader.metrics.KafkaFetchMeter`); the ``.index`` GET the cache answers is not
counted.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from dataclasses import dataclass

from formats.kafka.batch import HEADER_SIZE, BatchHeader, iter_batch_headers
from formats.kafka.index import INDEX_INTERVAL_BYTES
from offloader.errors import ConfigError, ObjectNotFound
from offloader.kafka.context import KafkaContext
from offloader.kafka.integrity import BatchGuard, VerifiedLog, check_transform, mismatch
from offloader.kafka.segments import IndexCache, live_copies
from offloader.kafka.transform_read import is_transformed
from offloader.logs import get_logger
from offloader.metadata.kafka_base import COPY_FINISHED, RemoteSegmentRecord
from offloader.metrics.base import NO_METRICS, KafkaFetchMeter, Metrics
from offloader.store.base import ObjectStore

__all__ = ["SKIP_SLACK", "SPAN_SLACK", "FetchedBatches", "fetch_batches", "segment_batches"]

log = get_logger(__name__)

#: the batch before the wanted one is read (rather than a second GET risked) when it starts at
#: most this many bytes before the index entry of the wanted one: twice Kafka's default
#: ``index.interval.bytes``, below which entries are that close and batches small
SKIP_SLACK = 2 * INDEX_INTERVAL_BYTES
#: a plain ``.log`` read is widened to whole spans (every byte span-checked) when that costs
#: at most this many bytes (or a tenth of the range)
SPAN_SLACK = 128 * 1024

#: reads bytes ``[start, end)`` of the ``.log``: the bytes and the span-checked part [lo, hi)
_Reader = Callable[[int, int], tuple[bytes, int, int]]


@dataclass(frozen=True)
class FetchedBatches:
    """Whole record batches of one segment, back to back as stored. ``headers`` hold the
    batches' positions in ``data`` (``header.position``), their offsets and attributes;
    ``position`` is where ``data`` starts in the segment's ``.log``. Control batches are
    included (a consumer skips them); the first batch may hold offsets below the wanted one."""

    topic: str
    partition: int
    source: str
    segment_id: str
    position: int
    data: bytes
    headers: tuple[BatchHeader, ...]
    #: reads of the ``.log`` this fetch made, each one ranged GET at most (1 unless an
    #: unindexed batch or a wrong ``.index`` needed more; a read inside the whole spans the
    #: previous one fetched costs no GET)
    reads: int

    @property
    def positions(self) -> tuple[int, ...]:
        return tuple(h.position for h in self.headers)

    @property
    def base_offsets(self) -> tuple[int, ...]:
        return tuple(h.base_offset for h in self.headers)

    @property
    def next_offset(self) -> int:
        """The offset after the last batch (where the next fetch starts)."""
        return self.headers[-1].next_offset

    @property
    def size(self) -> int:
        return len(self.data)


def fetch_batches(
    ctx: KafkaContext,
    cache: IndexCache,
    topic: str,
    partition: int,
    offset: int,
    *,
    max_records: int | None = None,
    max_bytes: int | None = None,
) -> FetchedBatches:
    """The batches of the remote copy holding ``offset`` (or of the first one after it) from
    the batch holding it, up to ``max_records`` offsets or ``max_bytes`` bytes (at least one
    batch). ``ObjectNotFound`` when no remote copy holds or follows ``offset``."""
    if offset < 0:
        raise ConfigError("offset must not be negative")
    records = live_copies(ctx.meta.list_segments(topic, partition, states=[COPY_FINISHED]))
    for record in records:
        if record.end_offset >= offset:
            return segment_batches(
                ctx.store,
                cache,
                record,
                max(offset, record.first_offset),
                max_records=max_records,
                max_bytes=max_bytes,
                metrics=ctx.metrics,
            )
    raise ObjectNotFound(f"no remote segment of {topic}-{partition} holds offset {offset} or later")


def _reader(
    store: ObjectStore, cache: IndexCache, record: RemoteSegmentRecord, meter: KafkaFetchMeter
) -> _Reader:
    key = record.keys["log"]
    if is_transformed(record):
        view = cache.log_store(record)  # the .chunks checked, its transform the pinned one

        def read_chunks(start: int, end: int) -> tuple[bytes, int, int]:
            data = view.get_range(key, start, end).data  # chunks authenticated
            meter.add_get()
            meter.add_bytes(len(data))
            return data, start, end

        return read_chunks
    check_transform(record, None)
    verified = VerifiedLog(store, record)

    def read_plain(start: int, end: int) -> tuple[bytes, int, int]:
        gets, fetched = verified.gets, verified.fetched
        data, lo, hi = verified.read_exact(start, end, SPAN_SLACK)
        meter.add_get(verified.gets - gets)
        meter.add_bytes(verified.fetched - fetched)
        return data, lo, hi

    return read_plain


@dataclass
class _Plan:
    floor: int  # the position of the entry below the wanted offset's (0: the segment's start)
    start: int  # where the GET starts (``floor`` or the wanted offset's entry)
    end: int


def _plan(
    record: RemoteSegmentRecord,
    offsets: tuple[int, ...],
    positions: tuple[int, ...],
    target: int,
    max_records: int | None,
    max_bytes: int | None,
    min_bytes: int,
) -> _Plan:
    size = record.size_bytes
    j = bisect.bisect_left(offsets, target)  # the first entry at or after the offset
    floor = positions[j - 1] if j > 0 else 0
    start = floor
    if 0 < j < len(positions) and positions[j] - floor > SKIP_SLACK:
        start = positions[j]  # the entry names the batch holding the offset (its last offset)
    first_end = positions[j + 1] if j + 1 < len(positions) else size  # that batch's end, at most
    end = size
    if max_records is not None:
        k = bisect.bisect_left(offsets, target + max(max_records, 1) - 1)
        end = positions[k + 1] if k + 1 < len(positions) else size
    if max_bytes is not None:
        limit = start + max(max_bytes, 1)
        slot = bisect.bisect_right(positions, limit) - 1
        cut = positions[slot] if slot >= 0 and positions[slot] > start else limit
        end = min(end, cut)
    if min_bytes > end - start:
        slot = bisect.bisect_left(positions, start + min_bytes)
        end = positions[slot] if slot < len(positions) else size
    return _Plan(floor, start, min(size, max(end, first_end)))


def segment_batches(
    store: ObjectStore,
    cache: IndexCache,
    record: RemoteSegmentRecord,
    offset: int,
    *,
    max_records: int | None = None,
    max_bytes: int | None = None,
    min_bytes: int = 0,
    metrics: Metrics = NO_METRICS,
) -> FetchedBatches:
    """The batches of one remote segment from the one holding ``offset`` (see the module
    docstring); ``offset`` must lie in the copy's offsets. ``min_bytes``: read on past
    ``max_records`` to this many bytes (whole batches: a reader of records whose count control
    batches may stretch asks for a little more, still one GET). The fetch is recorded on
    ``metrics`` (its GETs, bytes, latency, and as an error when it raises)."""
    with KafkaFetchMeter(metrics, record.topic) as meter:
        return _segment_batches(
            store, cache, record, offset, max_records, max_bytes, min_bytes, meter
        )


def _segment_batches(
    store: ObjectStore,
    cache: IndexCache,
    record: RemoteSegmentRecord,
    offset: int,
    max_records: int | None,
    max_bytes: int | None,
    min_bytes: int,
    meter: KafkaFetchMeter,
) -> FetchedBatches:
    if max_records is not None and max_records < 0:
        raise ConfigError("max_records must not be negative")
    if not record.first_offset <= offset <= record.end_offset:
        raise ConfigError(
            f"offset {offset} is outside the segment's offsets "
            f"{record.first_offset}..{record.end_offset}"
        )
    key = record.keys["log"]
    index = cache.offset_index(record)
    offsets, positions = index.offsets, index.positions
    read = _reader(store, cache, record, meter)
    plan = _plan(record, offsets, positions, offset, max_records, max_bytes, min_bytes)
    data, lo, hi = read(plan.start, plan.end)
    at, reads, checked = plan.start, 1, [(lo, hi)]
    headers = list(iter_batch_headers(data, source=key, stop_at_partial=True))
    if headers and headers[0].base_offset > offset and at > plan.floor:
        # an unindexed batch between the entry below and the wanted one's holds the offset
        more, lo, hi = read(plan.floor, at)
        data, at, reads = more + data, plan.floor, reads + 1
        checked.append((lo, hi))
        headers = list(iter_batch_headers(data, source=key, stop_at_partial=True))
    if headers and headers[0].base_offset > offset and at > 0:
        log.warning(
            "the .index pointed past the wanted offset; reading the segment from its start",
            segment=key,
            position=at,
            offset=offset,
            first_batch=headers[0].base_offset,
        )
        data, lo, hi = read(0, plan.end)
        at, reads, checked = 0, reads + 1, [(lo, hi)]
        headers = list(iter_batch_headers(data, source=key, stop_at_partial=True))
    chosen = _choose(headers, offset, max_records, max_bytes, min_bytes)
    end = at + len(data)
    while not chosen and end < record.size_bytes:
        # the batch holding the offset runs past what was read (no index entry bounds it)
        end = min(record.size_bytes, end + max(len(data), SPAN_SLACK))
        data, lo, hi = read(at, end)
        reads, checked = reads + 1, [(lo, hi)]
        headers = list(iter_batch_headers(data, source=key, stop_at_partial=True))
        chosen = _choose(headers, offset, max_records, max_bytes, min_bytes)
    if not chosen:
        list(iter_batch_headers(data, source=key))  # raises: a batch cut off by the end
        raise mismatch(record, key, f"no batch in the .log holds offset {offset}")
    _check(record, key, chosen, at, checked, offsets, positions)
    return _cut(record, key, data, at, chosen, reads)


def _choose(
    headers: list[BatchHeader],
    offset: int,
    max_records: int | None,
    max_bytes: int | None,
    min_bytes: int,
) -> list[BatchHeader]:
    """The batches to return: from the one holding ``offset``, whole, within the limits."""
    chosen: list[BatchHeader] = []
    last_wanted = None if max_records is None else offset + max(max_records, 1) - 1
    total = 0
    for header in headers:
        if header.last_offset < offset:
            continue  # the batch before (read when it was cheaper than a second GET)
        if chosen and max_bytes is not None and total + header.size > max_bytes:
            break
        chosen.append(header)
        total += header.size
        if last_wanted is not None and header.last_offset >= last_wanted and total >= min_bytes:
            break
    return chosen


def _check(
    record: RemoteSegmentRecord,
    key: str,
    chosen: list[BatchHeader],
    at: int,
    checked: list[tuple[int, int]],
    offsets: tuple[int, ...],
    positions: tuple[int, ...],
) -> None:
    """Every chosen batch inside the segment and after the one before; a batch whose 21 bytes
    outside its CRC32C were not span-checked, against the ``.index`` entries around it (an
    entry names the last offset of the batches appended at its position)."""
    guard = BatchGuard(key, record.base_offset, record.end_offset, record)
    for header in chosen:
        guard.check(header)
        where = at + header.position
        if record.checks is None or any(
            a <= where and where + HEADER_SIZE <= b for a, b in checked
        ):
            continue
        slot = bisect.bisect_left(positions, where)
        if slot >= len(positions):
            continue  # past the last entry: the guard's order and bounds are the checks
        if positions[slot] == where:
            below = offsets[slot - 1] if slot > 0 else record.base_offset - 1
            if header.base_offset <= below or header.last_offset > offsets[slot]:
                raise guard.fail(_against_index(header, where, below + 1, offsets[slot]))
        elif header.last_offset >= offsets[slot]:
            raise guard.fail(_against_index(header, where, None, offsets[slot] - 1))


def _against_index(header: BatchHeader, where: int, low: int | None, high: int) -> str:
    span = f"{low}..{high}" if low is not None else f"..{high}"
    return (
        f"batch of offsets {header.base_offset}..{header.last_offset} at byte {where} is not "
        f"where the .index puts offsets {span}"
    )


def _cut(
    record: RemoteSegmentRecord,
    key: str,
    data: bytes,
    at: int,
    chosen: list[BatchHeader],
    reads: int,
) -> FetchedBatches:
    """The chosen batches as one buffer (a slice of what was read, positions rebased)."""
    first, last = chosen[0].position, chosen[-1].end
    body = data if (first, last) == (0, len(data)) else data[first:last]
    rebased = tuple(
        BatchHeader(h.position - first, *(getattr(h, f) for f in _FIELDS)) for h in chosen
    )
    return FetchedBatches(
        record.topic, record.partition, key, record.segment_id, at + first, body, rebased, reads
    )


_FIELDS = (
    "base_offset",
    "batch_length",
    "partition_leader_epoch",
    "magic",
    "crc",
    "attributes",
    "last_offset_delta",
    "base_timestamp",
    "max_timestamp",
    "producer_id",
    "producer_epoch",
    "base_sequence",
    "record_count",
)
