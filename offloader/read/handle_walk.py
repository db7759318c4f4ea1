"""The block walk of a :class:`~offloader.read.handle.ReadHandle`: positioning its stream on
an entry (:meth:`BlockWalker._seek`: offsets cache, fine offsets, floor lookup; a block read
whole starts at its header so its CRC32C can be checked), the span CRC32C checks made before
any entry of a span is returned, the bounded re-seeks after unexpected bytes, and the check of
a block read whole against its recorded CRC32C."""

from __future__ import annotations

from collections.abc import Sequence

from formats.block import DataBlockHeader
from formats.extension import crc32c
from formats.index import OffloadIndex
from formats.span_crc import SpanChecks
from offloader.errors import ChecksumMismatchError, CorruptDataError, IndexInconsistentError
from offloader.logs import get_logger
from offloader.read.offsets_cache import OffsetsCache
from offloader.read.ranged_stream import RangedStream

__all__ = ["BlockWalker"]

log = get_logger("offloader.read.handle")


class BlockWalker:
    """The checks and seeks of a read handle (its base class; the state is the handle's)."""

    _what: str
    _ledger_id: int
    _index: OffloadIndex
    _cache: OffsetsCache
    _crcs: Sequence[int] | None
    _spans: SpanChecks | None
    _verified_spans: set[int]

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
        if (
            entry_id == row.entry_id
            and self._crcs is not None
            and first <= row.entry_id
            and last >= block_last
        ):
            # the whole block will be read: start at its header so its CRC32C can be checked
            stream.seek(block_start)
            stream.crc_begin()
            header_len = index.data_header_length
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
        CRC32C against the extension."""
        if self._crcs is None or not stream.crc_active:
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
