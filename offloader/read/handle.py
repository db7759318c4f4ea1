"""ReadHandle: entries of an offloaded ledger, read back from its data and index objects.

``ReadHandle.open`` GETs the index once (with Pulsar's format-version check: a foreign object
is refused with :class:`ForeignObjectError`, a missing one with :class:`ObjectNotFound` naming
the ledger and UUID). ``read(first, last)`` / ``iter_entries(first, last)`` (entry tuples),
``iter_packed(first, last)`` (packed batches, no object per entry) and ``iter_spans(first,
last)`` (spans of the fetched buffers, no copy) then work like Pulsar's
``BlobStoreBackedReadHandleImpl``, faster:

* the start position comes from the offsets cache (exact), else the index extension's fine
  offsets (``index.locate``: one point every ~64 KiB), else the floor lookup (binary search) to
  the block's first entry, then entries are skipped forward;
* bytes come through a :class:`~offloader.read.ranged_stream.RangedStream`: ranged GETs of
  ``read_buffer_size`` bytes, clipped to the bytes the request can need, with read-ahead of the
  next range; with the extension, a single-entry read costs at most one data GET;
* a negative length is the end of a block: re-seek to the next block through the index; an
  unexpected entry id re-seeks without the cache, at most ``max(3, n / 4)`` times (as Pulsar),
  then :class:`CorruptDataError`; every loop advances or is bounded;
* the offsets cache learns the exact offset of every entry of a small read (< 64 entries) and
  one offset per 16 KiB of a skip, and of a bulk read when the index has no extension (Pulsar's
  "learned offsets"; with the extension its fine offsets already place every entry), so it
  stays cheap on sequential scans; a re-read starts at most 16 KiB before its entry;
* a block read whole, sequentially, is checked against its CRC32C from the extension
  (:class:`ChecksumMismatchError`; summed by the prefetch thread when the block is streamed),
  its header against the index;
* every GET checks the data object's real size against the index (:class:`IndexInconsistentError`).

A handle is not safe for concurrent use (one read at a time); open one per thread, sharing an
:class:`~offloader.read.offsets_cache.OffsetsCache` if wanted.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from itertools import chain
from types import TracebackType
from typing import NamedTuple, TypeVar

from formats.block import DataBlockHeader, PackedEntries
from formats.crc_combine import crc32c_concat
from formats.cuts import Cut, cut_entries, cut_packed, cut_spans
from formats.extension import crc32c
from formats.framing import NO_LIMIT
from formats.index import OffloadIndex
from formats.keys import data_key, index_key
from formats.ledger_metadata import LedgerMetadata
from formats.span_crc import SpanChecks
from formats.spans import SpanEntries
from formats.wire import DEFAULT_FINE_OFFSET_INTERVAL, ENTRY_HEADER, ENTRY_HEADER_LEN
from offloader.config import OffloadSettings
from offloader.errors import (
    ChecksumMismatchError,
    CorruptDataError,
    EntryOutOfRange,
    IndexInconsistentError,
    ObjectNotFound,
    ReadError,
)
from offloader.logs import get_logger
from offloader.read.objects import RecordedOffload, load_index
from offloader.read.offsets_cache import OffsetsCache
from offloader.read.ranged_stream import RangedStream
from offloader.read.transformed import TransformedObjectView, data_view
from offloader.store.base import ObjectStore

__all__ = ["Entry", "ReadHandle"]

log = get_logger(__name__)

_UNPACK = ENTRY_HEADER.unpack_from
#: a bulk read remembers one offset per LEARN_INTERVAL bytes in the offsets cache (Pulsar's
#: "learned offsets") unless the index extension's fine offsets already locate every entry;
#: a read of fewer than SMALL_READ entries remembers every entry
LEARN_INTERVAL = 16 * 1024
SMALL_READ = 64
#: a request whose bytes span at most max(4 read buffers, 4 fine-offset intervals) is
#: fetched with one GET (with the extension, a single entry's window is about one interval)
SINGLE_GET_BUFFERS = 4
SINGLE_GET_MIN = 4 * DEFAULT_FINE_OFFSET_INTERVAL


class Entry(NamedTuple):
    """One entry read back: its id and payload."""

    entry_id: int
    payload: bytes


_CUT_ENTRIES = cut_entries(Entry)
T = TypeVar("T")


class ReadHandle:
    """Reads entries of one offloaded ledger (``uuid``) from ``store``."""

    def __init__(
        self,
        store: ObjectStore,
        ledger_id: int,
        uuid: str,
        index: OffloadIndex,
        settings: OffloadSettings,
        offsets_cache: OffsetsCache,
        *,
        emulate_pulsar: bool = False,
    ) -> None:
        self._emulate_pulsar = emulate_pulsar
        self._store = store
        self._ledger_id = ledger_id
        self._uuid = uuid
        self._index = index
        self._settings = settings
        self._cache = offsets_cache
        self._stream: RangedStream | None = None
        self._closed = False
        ext = index.extension
        self._crcs = ext.block_crc32c if ext is not None and ext.block_crc32c else None
        self._what = f"offloaded ledger {ledger_id} ({uuid})"
        #: the span CRC32Cs (None: the object has none, only blocks read whole are checked)
        self._spans = None if emulate_pulsar else SpanChecks.of(index)
        self._verified_spans: set[int] = set()
        #: with span checks: (block, CRC32C of its header) when the block is being read whole
        #: from its header; its CRC32C is then combined from the header's and its spans'
        #: (every byte is summed once, by the span checks), not summed a second time
        self._block_head: tuple[int, int] | None = None
        #: a transformed object: every chunk is checked (CRC32C, AES-GCM tag) before any of
        #: its bytes is used, so every entry returned was checked before it was returned
        self._chunks_checked = isinstance(store, TransformedObjectView)

    @classmethod
    def open(
        cls,
        store: ObjectStore,
        ledger_id: int,
        uuid: str,
        settings: OffloadSettings | None = None,
        *,
        offsets_cache: OffsetsCache | None = None,
        use_extension: bool = True,
        emulate_pulsar: bool = False,
        recorded: RecordedOffload | None = None,
    ) -> ReadHandle:
        """GET and check the index (one request). ``use_extension=False`` ignores the index
        extension (the offsets cache and the floor lookup remain). ``emulate_pulsar`` also
        does Pulsar's I/O: fixed ``read_buffer_size`` GETs, no read-ahead, no single-GET
        windows, no fetch growth (benchmarks compare against it). ``recorded``: what the
        metadata recorded (the index's size and CRC32C, the block CRC32Cs), checked against
        the index fetched (see :func:`~offloader.objects.load_index`)."""
        if emulate_pulsar:
            use_extension = False
        settings = settings or OffloadSettings()
        try:
            index = load_index(store, ledger_id, uuid, recorded=recorded)
        except ObjectNotFound as exc:
            raise ObjectNotFound(
                f"offloaded ledger {ledger_id} ({uuid}) not found: no index object "
                f"{index_key(uuid, ledger_id)} in {store.url}"
            ) from exc
        # a transformed object reads through a view in original coordinates
        store = data_view(
            store,
            index,
            ledger_id,
            uuid,
            key_ring=settings.key_ring,
            cache_bytes=settings.chunk_cache_bytes,
        )
        if not use_extension and index.extension is not None:
            index = dataclasses.replace(index, extension=None)
        cache = (
            offsets_cache
            if offsets_cache is not None
            else OffsetsCache(settings.offsets_cache_size)
        )
        log.debug(
            "read handle opened",
            ledger_id=ledger_id,
            uuid=uuid,
            store=store.url,
            blocks=index.block_count,
            extension=index.extension is not None,
        )
        return cls(store, ledger_id, uuid, index, settings, cache, emulate_pulsar=emulate_pulsar)

    # --- what Pulsar's ReadHandle exposes -------------------------------------------------
    @property
    def ledger_id(self) -> int:
        return self._ledger_id

    @property
    def uuid(self) -> str:
        return self._uuid

    @property
    def last_add_confirmed(self) -> int:
        return self._index.last_entry_id

    @property
    def length(self) -> int:
        return self._index.length

    @property
    def is_closed(self) -> bool:
        """The ledger's state in its metadata is CLOSED (not whether this handle is closed)."""
        return self._index.ledger_metadata.is_closed

    @property
    def ledger_metadata(self) -> LedgerMetadata:
        return self._index.ledger_metadata

    @property
    def index(self) -> OffloadIndex:
        return self._index

    @property
    def has_extension(self) -> bool:
        return self._index.extension is not None

    @property
    def verifies_spans(self) -> bool:
        """True when every entry this handle returns was checked before it was returned: the
        object records span CRC32Cs (each span checked), or it is transformed (each chunk's
        CRC32C and AES-GCM tag checked as it is decoded). False (an object written by
        Pulsar, or by an older version of ours): only blocks read whole are checked, at
        their end, after their entries were returned."""
        return self._spans is not None or self._chunks_checked

    @property
    def data_gets(self) -> int:
        """Ranged GETs of the data object issued by this handle so far."""
        return 0 if self._stream is None else self._stream.gets

    @property
    def offsets_cache(self) -> OffsetsCache:
        return self._cache

    # --- reading --------------------------------------------------------------------------
    def read(self, first: int, last: int) -> list[Entry]:
        """Entries ``first..last`` inclusive."""
        return list(self.iter_entries(first, last))

    def read_entry(self, entry_id: int) -> bytes:
        """One entry's payload."""
        return self.read(entry_id, entry_id)[0].payload

    def iter_entries(self, first: int, last: int) -> Iterator[Entry]:
        """Entries ``first..last`` inclusive, fetched as they are consumed.

        Each fetched buffer is checked whole when it is reached, and each ``Entry`` is made
        only when the iterator gets to it. An entry the caller has dropped is recycled for a
        later one (never one the caller still holds, nor a payload it kept): a loop that keeps
        nothing but what it needs is the fastest way to consume this iterator."""
        self._check_range(first, last)
        return chain.from_iterable(self._iter_cut(first, last, _CUT_ENTRIES))

    def iter_packed(self, first: int, last: int) -> Iterator[PackedEntries]:
        """Entries ``first..last`` inclusive as packed batches (about one read buffer each):
        payloads back to back plus int32 offsets, the layout of an Arrow binary column.

        The same reads, checks and errors as :meth:`iter_entries`, without a Python object
        per entry: the fast way to scan many small entries. Batches are never empty and
        their ids follow each other from ``first`` to ``last``."""
        self._check_range(first, last)
        return self._iter_cut(first, last, cut_packed)

    def iter_spans(self, first: int, last: int) -> Iterator[SpanEntries]:
        """Entries ``first..last`` inclusive as :class:`~formats.spans.SpanEntries`: where each
        payload lies in the buffer it was fetched into (about one read buffer per batch).

        No copy of any payload (a batch keeps its buffer alive while it is referenced): the
        cheapest way to scan, for callers that can use memoryviews. The same reads, checks and
        errors as :meth:`iter_entries`; batches are never empty and their ids follow each
        other from ``first`` to ``last``."""
        self._check_range(first, last)
        return self._iter_cut(first, last, cut_spans)

    def _check_range(self, first: int, last: int) -> None:
        if self._closed:
            raise ReadError(f"{self._what}: the read handle is closed")
        lac = self.last_add_confirmed
        if not 0 <= first <= last <= lac:
            raise EntryOutOfRange(
                f"{self._what}: cannot read entries {first}..{last}, valid ids are 0..{lac} "
                "with first <= last"
            )

    def _get_stream(self) -> RangedStream:
        if self._stream is None:
            buf = self._settings.read_buffer_size
            index = self._index
            pulsar = self._emulate_pulsar
            self._stream = RangedStream(
                self._store,
                data_key(self._uuid, self._ledger_id),
                object_length=index.data_object_length,
                buffer_size=buf,
                read_ahead=self._settings.read_ahead and not pulsar,
                single_get_max=0 if pulsar else max(SINGLE_GET_BUFFERS * buf, SINGLE_GET_MIN),
                max_fetch=buf if pulsar else None,
                description=self._what,
                crc_boundaries=self._crc_boundaries(),
                check_version=True,
            )
        return self._stream

    def _crc_boundaries(self) -> list[int]:
        """Where the prefetch thread's CRC32C regions begin and end: with span checks, the
        spans' (the thread sums each span as it arrives; block CRC32Cs are then combined from
        their spans', never summed a second time), else the blocks' (without block CRC32Cs,
        none)."""
        spans = self._spans
        if spans is not None:
            return sorted({*spans.starts, *spans.ends})
        return self._block_boundaries() if self._crcs is not None else []

    def _block_boundaries(self) -> list[int]:
        """Where blocks begin and end in the data object (their CRC32Cs are summed between)."""
        index = self._index
        spans = (index.block_span(b) for b in range(index.block_count))
        return sorted({offset for span in spans for offset in span})

    def _window_end(self, last: int) -> int:
        """The end of the bytes a read up to ``last`` can need."""
        index = self._index
        if index.extension is not None:
            return index.locate(last).end_offset
        return index.block_span(index.block_for(last))[1]

    def _iter_cut(self, first: int, last: int, cut: Cut[T]) -> Iterator[T]:
        """Entries ``first..last`` in order, cut by ``cut`` one buffer's worth at a time."""
        stream = self._get_stream()
        index = self._index
        cache = self._cache
        ledger = self._ledger_id
        stream.set_window(self._window_end(last))
        budget = max(3, (last - first + 1) >> 2)
        small = last - first < SMALL_READ
        learn_interval = 0 if small else LEARN_INTERVAL
        skip_learned_at = -LEARN_INTERVAL
        # the object offset from which the next entry's offset is remembered
        learn_next = 0 if small or index.extension is None else NO_LIMIT
        reseeks = 0
        failed_at: set[int] = set()
        expected = first
        block, cur_id = self._seek(stream, expected, first, last, use_cache=True)
        block_end = index.block_ends[block]
        spans = self._spans
        # the checked run of spans the position is in: [checked_start, checked_end)
        checked_start, checked_end = 0, -1
        # each pass either consumes an entry, moves to a later block, or spends re-seek budget
        while expected <= last:
            pos = stream.position
            if spans is not None and not checked_start <= pos < checked_end:
                checked_start, checked_end = self._check_spans(stream, pos)
            left = block_end - pos
            if left < 4 or stream.view(4)[0] & 0x80:
                # end of the block (padding, or fewer bytes than a length field)
                if expected <= index.block_last_entry_id(block):
                    # the block ended before the entry the index places in it: a wrong
                    # cached offset, or corrupt data; re-seek (bounded) like Pulsar
                    reseeks = self._spend_reseek(
                        reseeks,
                        budget,
                        f"block {block} ends at {pos} before entry {expected}",
                        pos,
                        failed_at,
                    )
                    cache.discard(ledger, expected)
                else:
                    self._finish_block(stream, block, block_end)
                block, cur_id = self._seek(stream, expected, first, last, use_cache=False)
                block_end = index.block_ends[block]
                continue
            if left < ENTRY_HEADER_LEN:
                raise CorruptDataError(
                    f"{self._what}: entry header at {pos} overruns block {block}", offset=pos
                )
            length, entry_id = _UNPACK(stream.view(ENTRY_HEADER_LEN))
            if entry_id != cur_id:
                reseeks = self._spend_reseek(
                    reseeks,
                    budget,
                    f"found entry {entry_id} where {cur_id} was expected",
                    pos,
                    failed_at,
                )
                cache.discard(ledger, expected)
                block, cur_id = self._seek(stream, expected, first, last, use_cache=False)
                block_end = index.block_ends[block]
                continue
            end = pos + ENTRY_HEADER_LEN + length
            if end > block_end:
                raise CorruptDataError(
                    f"{self._what}: entry {entry_id} of {length} bytes at {pos} overruns block "
                    f"{block} (ends at {block_end})",
                    offset=pos,
                )
            if cur_id < expected:  # skipping forward to the first wanted entry
                if pos - skip_learned_at >= LEARN_INTERVAL:
                    cache.put(ledger, cur_id, pos)
                    skip_learned_at = pos
                stream.seek(end)
                cur_id += 1
                continue
            # wanted entries: cut every whole entry the buffer holds in one pass (in C when
            # formats._speedups is built)
            buf, at = stream.buffer(end - pos)
            learned: list[tuple[int, int]] = []
            # with span CRC32Cs, only entries of checked spans (the entry at pos is in one)
            cut_end = block_end if spans is None else min(block_end, checked_end)
            batch, off, cur_id, learn_next = cut(
                buf,
                at,
                at + min(len(buf) - at, cut_end - pos),
                cur_id,
                last,
                pos - at,
                learn_next,
                learn_interval,
                learned,
            )
            if cur_id == expected:  # cannot happen: the entry at pos was checked and is buffered
                raise CorruptDataError(f"{self._what}: no entry parsed at {pos}", offset=pos)
            stream.advance(off - at)
            expected = cur_id
            cache.put_many(ledger, learned)
            if cur_id > index.block_last_entry_id(block):
                # the batch ends the block: check its CRC32C before the caller sees the batch,
                # since a caller that stops at the block's last entry never resumes us
                self._finish_block(stream, block, block_end)
            yield batch
        if expected > index.block_last_entry_id(block):
            self._finish_block(stream, block, block_end)

    # --- the block walk: seeks, span and block CRC32C checks, bounded re-seeks ------------
    def _check_spans(self, stream: RangedStream, pos: int) -> tuple[int, int]:
        """Check the CRC32C of the span holding ``pos`` (and of the spans after it in its
        block whose bytes are already buffered) before any of their entries is returned; the
        run of checked spans ``pos`` is in, ``(start, end)``. A span not yet checked is read
        from its start, where reads of a handle with span checks always begin."""
        spans = self._spans
        assert spans is not None
        checked = self._verified_spans
        k = spans.containing(pos)
        if k not in checked:
            if spans.starts[k] != pos:  # pragma: no cover - reads begin at span starts
                raise CorruptDataError(
                    f"{self._what}: cannot check the span at {spans.starts[k]} from {pos}",
                    offset=pos,
                )
            last = k
            while (
                last + 1 < len(spans.starts)
                and spans.starts[last + 1] == spans.ends[last]
                and spans.ends[last + 1] - pos <= stream.buffered()
            ):
                last += 1
            view = stream.view(spans.ends[last] - pos)
            for i in range(k, last + 1):
                # summed by the prefetch thread as the bytes arrived, else here
                actual = stream.summed_crc(spans.starts[i], spans.ends[i])
                if actual is None:
                    actual = crc32c(view[spans.starts[i] - pos : spans.ends[i] - pos])
                if actual != spans.crcs[i]:
                    raise ChecksumMismatchError(
                        f"{self._what}: bytes {spans.starts[i]}..{spans.ends[i]} (span {i}) "
                        f"have CRC32C 0x{actual:08x}, the index recorded "
                        f"0x{spans.crcs[i]:08x}",
                        offset=spans.starts[i],
                    )
                checked.add(i)
        start, end = spans.starts[k], spans.ends[k]
        while k + 1 in checked and spans.starts[k + 1] == end:
            k += 1
            end = spans.ends[k]
        return start, end

    def _spend_reseek(
        self, reseeks: int, budget: int, reason: str, offset: int, seen: set[int]
    ) -> int:
        """Count one re-seek; past the budget, or when the same offset fails again (a re-seek
        through the index landed on the same bytes: they are corrupt, not a stale cached
        offset), give up with one :class:`CorruptDataError`. The first re-seek of a read is
        logged as a warning, later ones at debug level."""
        if offset in seen:
            raise CorruptDataError(
                f"{self._what}: {reason}, again after re-seeking through the index: the data "
                f"object is corrupt ({reseeks} re-seek(s))",
                offset=offset,
            )
        if reseeks >= budget:
            raise CorruptDataError(
                f"{self._what}: {reason}; gave up after {reseeks} re-seeks", offset=offset
            )
        seen.add(offset)
        (log.warning if reseeks == 0 else log.debug)(
            "unexpected data, re-seeking", ledger_id=self._ledger_id, reason=reason, offset=offset
        )
        return reseeks + 1

    def _seek(
        self, stream: RangedStream, entry_id: int, first: int, last: int, *, use_cache: bool
    ) -> tuple[int, int]:
        """Position the stream on an entry at or before ``entry_id`` in its block; returns
        (block, id of the entry at the position)."""
        index = self._index
        block = index.block_for(entry_id)
        row = index.entries[block]
        block_start, block_end = index.block_span(block)
        block_last = index.block_last_entry_id(block)
        self._block_head = None
        if (
            entry_id == row.entry_id
            and self._crcs is not None
            and first <= row.entry_id
            and last >= block_last
        ):
            # the whole block will be read: start at its header so its CRC32C can be checked
            stream.seek(block_start)
            header_len = index.data_header_length
            if self._spans is None:
                stream.crc_begin()
            else:
                self._block_head = (block, crc32c(stream.view(header_len)[:header_len]))
            header = DataBlockHeader.decode(stream.view(header_len), base_offset=block_start)
            if header.first_entry_id != row.entry_id or header.block_len != (
                block_end - block_start
            ):
                raise IndexInconsistentError(
                    f"{self._what}: block {block} header says first entry "
                    f"{header.first_entry_id}, {header.block_len} bytes; the index says "
                    f"{row.entry_id}, {block_end - block_start} bytes"
                )
            stream.advance(header_len)
            return block, row.entry_id
        start_id, start = row.entry_id, block_start + index.data_header_length
        if index.extension is not None and entry_id != row.entry_id:
            loc = index.locate(entry_id)
            start_id, start = loc.start_entry_id, loc.start_offset
        if use_cache and entry_id != start_id and self._spans is None:
            # (with span checks a read starts at a span start, where the span can be checked)
            hit = self._cache.probe_back(self._ledger_id, entry_id, start_id + 1)
            if hit is not None and block_start < hit[1] < block_end:
                start_id, start = hit
        stream.seek(start)
        return block, start_id

    def _finish_block(self, stream: RangedStream, block: int, block_end: int) -> None:
        """If the block was consumed whole from its header, read its padding and check its
        CRC32C against the extension (with span checks: combined from its header's and its
        spans', which were checked as they were read)."""
        if self._crcs is None:
            return
        if self._spans is not None:
            self._finish_block_spans(stream, block, block_end)
            return
        if not stream.crc_active:
            return
        rest = block_end - stream.position
        try:
            if rest > 0:
                stream.view(rest)
                stream.advance(rest)
        finally:
            actual = stream.crc_end()
        if actual is None:
            return
        recorded = self._crcs[block]
        if actual != recorded:
            start = self._index.block_span(block)[0]
            raise ChecksumMismatchError(
                f"{self._what}: block {block} CRC32C is 0x{actual:08x}, the index recorded "
                f"0x{recorded:08x}",
                offset=start,
            )

    def _finish_block_spans(self, stream: RangedStream, block: int, block_end: int) -> None:
        """:meth:`_finish_block` with span checks: the block's CRC32C is its header's
        combined with its spans' (each checked against the index before any of its entries was
        returned), compared with the one the index recorded: the header's bytes are checked
        too, and the spans agree with the block CRC32C."""
        head, self._block_head = self._block_head, None
        if head is None or head[0] != block:
            return
        spans = self._spans
        assert spans is not None and self._crcs is not None
        rest = block_end - stream.position
        if rest > 0:  # the padding: in the block's last span, checked with it
            stream.view(rest)
            stream.advance(rest)
        start = self._index.block_span(block)[0]
        k = spans.at(start + self._index.data_header_length)
        if k is None:
            return
        pieces = []
        while k < len(spans.starts) and spans.starts[k] < block_end:
            if k not in self._verified_spans:
                return  # (cannot happen: a block read whole had every span checked)
            pieces.append((spans.crcs[k], spans.ends[k] - spans.starts[k]))
            k += 1
        actual = crc32c_concat(pieces, head[1])
        recorded = self._crcs[block]
        if actual != recorded:
            raise ChecksumMismatchError(
                f"{self._what}: block {block} CRC32C is 0x{actual:08x}, the index recorded "
                f"0x{recorded:08x}",
                offset=start,
            )

    # --- lifecycle ------------------------------------------------------------------------
    def close(self) -> None:
        self._closed = True
        if self._stream is not None:
            self._stream.close()
            self._stream = None

    def __enter__(self) -> ReadHandle:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
