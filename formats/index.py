"""The index object: ``OffloadIndex`` (v1 encode/decode, v2 decode), floor lookup.

Layout v1 (Pulsar's ``OffloadIndexBlockImpl``, spec/index-format.md)::

    magic u32 0xDE47DE47 | index_block_len i32 | data_object_len i64 | data_header_len i64
    index_entry_count i32 | segment_metadata_len i32 | LedgerMetadataFormat protobuf
    index_entry_count x (first_entry_id i64, part_id i32, offset i64)
    [our extension, formats/extension.py; anything else after the rows is ignored, as Pulsar does]

Decoding is strict by default: besides the byte layout it checks that rows, offsets and the
data object length agree, so an index written by Pulsar's oversize-entry bug is reported
(:class:`IndexInconsistentError`) instead of yielding short data later.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass, field

from formats.errors import (
    CorruptDataError,
    FormatError,
    IndexInconsistentError,
    TruncatedError,
    UnsupportedVersionError,
)
from formats.extension import (
    IndexExtension,
    decode_extension,
    encode_extension,
    is_extension,
    looks_like_damaged_extension,
)
from formats.layout import BlockPlan
from formats.ledger_metadata import LedgerMetadata, decode_ledger_metadata, encode_ledger_metadata
from formats.protowire import iter_fields, to_signed64
from formats.wire import (
    BLOCK_HEADER_LEN,
    BLOCK_HEADER_USED,
    ENTRY_HEADER_LEN,
    INDEX_ENTRY,
    INDEX_ENTRY_LEN,
    INDEX_V1_HEADER,
    INDEX_V1_MAGIC,
    INDEX_V2_HEADER,
    INDEX_V2_LEDGER_HEADER,
    INDEX_V2_MAGIC,
    U32,
)


@dataclass(frozen=True)
class IndexEntry:
    """One index row: a block's first entry id, its part number and its object offset."""

    entry_id: int
    part_id: int
    offset: int


@dataclass(frozen=True)
class EntryLocation:
    """Where to start reading to reach an entry: one ranged GET of ``[start, end)`` holds it
    (when ``end`` comes from a fine point) or at least starts at it."""

    block: int
    start_offset: int  # object offset of the length field of ``start_entry_id``
    start_entry_id: int
    end_offset: int  # exclusive upper bound of the bytes needed (block end at worst)


@dataclass(frozen=True)
class OffloadIndex:
    """A decoded (or to-be-encoded) index for one ledger."""

    ledger_metadata: LedgerMetadata
    entries: tuple[IndexEntry, ...]
    data_object_length: int
    data_header_length: int = BLOCK_HEADER_LEN
    extension: IndexExtension | None = None
    version: int = 1
    #: v2 only: the ledger this index record belongs to
    ledger_id: int | None = None
    #: exclusive end offset of each block (derived from the rows unless given)
    block_ends: tuple[int, ...] = field(default=())
    _entry_ids: tuple[int, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_entry_ids", tuple(e.entry_id for e in self.entries))
        if not self.block_ends:
            ends = [e.offset for e in self.entries[1:]] + [self.data_object_length]
            object.__setattr__(self, "block_ends", tuple(ends))

    # --- properties Pulsar's ReadHandle exposes ----------------------------------------------
    @property
    def last_entry_id(self) -> int:
        md = self.ledger_metadata.last_entry_id
        if md is not None:
            return md
        raise IndexInconsistentError("ledger metadata has no lastEntryId")

    @property
    def length(self) -> int:
        return self.ledger_metadata.length

    @property
    def block_count(self) -> int:
        return len(self.entries)

    # --- lookups ------------------------------------------------------------------------------
    def block_for(self, entry_id: int) -> int:
        """Index of the block holding ``entry_id`` (floor lookup, binary search)."""
        if entry_id < 0 or entry_id > self.last_entry_id:
            raise FormatError(f"entry {entry_id} is outside 0..{self.last_entry_id}")
        i = bisect.bisect_right(self._entry_ids, entry_id) - 1
        if i < 0:
            raise IndexInconsistentError(f"no index row at or before entry {entry_id}")
        return i

    def block_span(self, block: int) -> tuple[int, int]:
        """``[start, end)`` object offsets of a block, header included."""
        return self.entries[block].offset, self.block_ends[block]

    def block_last_entry_id(self, block: int) -> int:
        if block + 1 < len(self.entries):
            return self.entries[block + 1].entry_id - 1
        return self.last_entry_id

    def locate(self, entry_id: int) -> EntryLocation:
        """Where to read ``entry_id`` from, using the fine offsets when present."""
        block = self.block_for(entry_id)
        row = self.entries[block]
        block_start, block_end = self.block_span(block)
        start, start_id, end = block_start + self.data_header_length, row.entry_id, block_end
        ext = self.extension
        if ext is not None and ext.fine_offsets:
            ids = ext.fine_entry_ids
            j = bisect.bisect_right(ids, entry_id) - 1
            if j >= 0 and ids[j] >= row.entry_id:
                start_id, start = ext.fine_offsets[j]
            if j + 1 < len(ids) and ext.fine_offsets[j + 1][1] < block_end:
                end = ext.fine_offsets[j + 1][1]
        return EntryLocation(block, start, start_id, end)

    def validate(self) -> None:
        """Check rows, offsets and lengths agree (raises IndexInconsistentError)."""
        rows = self.entries
        if not rows:
            raise IndexInconsistentError("the index has no rows")
        if rows[0].entry_id != 0 or rows[0].offset != 0:
            raise IndexInconsistentError(
                f"the first index row is entry {rows[0].entry_id} at offset {rows[0].offset}, "
                "expected entry 0 at offset 0"
            )
        last = self.ledger_metadata.last_entry_id
        minimum_block = self.data_header_length + ENTRY_HEADER_LEN
        for i, row in enumerate(rows):
            start, end = row.offset, self.block_ends[i]
            if i and row.entry_id <= rows[i - 1].entry_id:
                raise IndexInconsistentError(f"index row {i}: entry ids are not ascending")
            if last is not None and row.entry_id > last:
                raise IndexInconsistentError(
                    f"index row {i} starts at entry {row.entry_id}, past the ledger's last "
                    f"entry {last}"
                )
            if end - start < minimum_block:
                raise IndexInconsistentError(
                    f"block {i} (entries from {row.entry_id}, part {row.part_id}) spans "
                    f"{max(0, end - start)} bytes at offset {start}, data object length "
                    f"{self.data_object_length}: the index claims entries the data object "
                    "does not hold (Pulsar's oversize-entry bug?)"
                )
        if self.extension is not None and len(self.extension.block_crc32c) != len(rows):
            raise IndexInconsistentError(
                f"index extension has {len(self.extension.block_crc32c)} block checksums for "
                f"{len(rows)} blocks"
            )


def index_from_plans(
    metadata: LedgerMetadata,
    plans: Sequence[BlockPlan],
    extension: IndexExtension | None = None,
) -> OffloadIndex:
    """The index describing a data object planned by :func:`formats.layout.plan_blocks`."""
    rows = tuple(IndexEntry(p.first_entry_id, p.part_number, p.offset) for p in plans)
    return OffloadIndex(
        ledger_metadata=metadata,
        entries=rows,
        data_object_length=sum(p.size for p in plans),
        extension=extension,
    )


def encode_index(index: OffloadIndex, *, with_extension: bool = True) -> bytes:
    """Serialize a v1 index; bytes before the extension are exactly Pulsar's."""
    if index.version != 1:
        raise UnsupportedVersionError(f"only index v1 is written, not v{index.version}")
    metadata = encode_ledger_metadata(index.ledger_metadata)
    count = len(index.entries)
    index_len = INDEX_V1_HEADER.size + len(metadata) + INDEX_ENTRY_LEN * count
    out = bytearray(
        INDEX_V1_HEADER.pack(
            INDEX_V1_MAGIC,
            index_len,
            index.data_object_length,
            index.data_header_length,
            count,
            len(metadata),
        )
    )
    out += metadata
    for row in index.entries:
        out += INDEX_ENTRY.pack(row.entry_id, row.part_id, row.offset)
    if with_extension and index.extension is not None:
        out += encode_extension(index.extension)
    return bytes(out)


def decode_index(data: bytes | bytearray | memoryview, *, strict: bool = True) -> OffloadIndex:
    """Parse a v1 index. ``strict`` also runs :meth:`OffloadIndex.validate`."""
    buf = memoryview(data)
    if len(buf) < 4:
        raise TruncatedError(f"index of {len(buf)} bytes has no magic", offset=0)
    (magic,) = U32.unpack_from(buf, 0)
    if magic == INDEX_V2_MAGIC:
        raise UnsupportedVersionError(
            "this is a v2 (streaming) index: read it with decode_index_v2", offset=0
        )
    if magic != INDEX_V1_MAGIC:
        raise UnsupportedVersionError(f"invalid index magic 0x{magic:08X}", offset=0)
    if len(buf) < INDEX_V1_HEADER.size:
        raise TruncatedError(f"index header needs 32 bytes, {len(buf)} present", offset=0)
    _m, _len, data_len, header_len, count, md_len = INDEX_V1_HEADER.unpack_from(buf, 0)
    _check_header(data_len, header_len, offset=8)
    if count < 0 or md_len < 0:
        raise CorruptDataError(
            f"negative index count {count} or metadata length {md_len}", offset=24
        )
    pos = INDEX_V1_HEADER.size
    if md_len > len(buf) - pos:
        raise TruncatedError(f"ledger metadata of {md_len} bytes overruns the index", offset=pos)
    metadata = decode_ledger_metadata(buf[pos : pos + md_len], base_offset=pos)
    pos += md_len
    rows, pos = _read_rows(buf, pos, count)
    extension = None
    trailing = buf[pos:]
    if is_extension(trailing):
        extension = decode_extension(trailing, base_offset=pos)
    elif looks_like_damaged_extension(trailing, len(rows)):
        raise CorruptDataError(
            "bytes after the index rows are a ledger-offloader index extension with a damaged "
            "magic",
            offset=pos,
        )
    index = OffloadIndex(metadata, rows, data_len, header_len, extension)
    if strict:
        index.validate()
    return index


def _check_header(data_len: int, header_len: int, *, offset: int) -> None:
    if data_len < 0:
        raise CorruptDataError(f"negative data object length {data_len}", offset=offset)
    if not BLOCK_HEADER_USED <= header_len <= 1 << 20:
        raise CorruptDataError(
            f"data header length {header_len} is not plausible", offset=offset + 8
        )


def _read_rows(buf: memoryview, pos: int, count: int) -> tuple[tuple[IndexEntry, ...], int]:
    if count * INDEX_ENTRY_LEN > len(buf) - pos:
        raise TruncatedError(
            f"{count} index rows need {count * INDEX_ENTRY_LEN} bytes, {len(buf) - pos} present",
            offset=pos,
        )
    seen: dict[int, IndexEntry] = {}
    for i in range(count):
        entry_id, part_id, offset = INDEX_ENTRY.unpack_from(buf, pos + INDEX_ENTRY_LEN * i)
        if entry_id < 0 or offset < 0:
            raise CorruptDataError(
                f"index row {i} has entry id {entry_id}, offset {offset}",
                offset=pos + INDEX_ENTRY_LEN * i,
            )
        seen.setdefault(entry_id, IndexEntry(entry_id, part_id, offset))  # Pulsar keeps the first
    rows = tuple(seen[k] for k in sorted(seen))
    return rows, pos + INDEX_ENTRY_LEN * count


def _ledger_info_metadata(buf: memoryview, base: int) -> tuple[int | None, LedgerMetadata]:
    """A v2 record's ``ManagedLedgerInfo.LedgerInfo``: (ledger id, metadata derived from it)."""
    values: dict[int, int] = {}
    for number, wire, value, _off in iter_fields(buf, base):
        if wire == 0 and number in (1, 2, 3, 4):
            assert isinstance(value, int)
            values[number] = to_signed64(value)
    entries = values.get(2, 0)
    md = LedgerMetadata(
        ensemble_size=0,
        write_quorum_size=0,
        ack_quorum_size=None,
        last_entry_id=entries - 1,
        length=values.get(3, 0),
        state="CLOSED",
        digest_type=None,
        ctime=values.get(4),
    )
    return values.get(1), md


def decode_index_v2(data: bytes | bytearray | memoryview) -> dict[int, OffloadIndex]:
    """Parse a v2 (PIP-76 streaming) index: one :class:`OffloadIndex` per ledger (read-only)."""
    buf = memoryview(data)
    if len(buf) < INDEX_V2_HEADER.size:
        raise TruncatedError(f"v2 index header needs 24 bytes, {len(buf)} present", offset=0)
    magic, _len, data_len, header_len = INDEX_V2_HEADER.unpack_from(buf, 0)
    if magic != INDEX_V2_MAGIC:
        raise UnsupportedVersionError(f"invalid v2 index magic 0x{magic:08X}", offset=0)
    _check_header(data_len, header_len, offset=8)
    pos = INDEX_V2_HEADER.size
    records: list[tuple[int, LedgerMetadata, tuple[IndexEntry, ...]]] = []
    while pos < len(buf):
        if len(buf) - pos < INDEX_V2_LEDGER_HEADER.size:
            raise TruncatedError("v2 index ledger record header is truncated", offset=pos)
        ledger_id, count, md_len = INDEX_V2_LEDGER_HEADER.unpack_from(buf, pos)
        if count < 0 or md_len < 0:
            raise CorruptDataError("negative v2 index count or metadata length", offset=pos)
        pos += INDEX_V2_LEDGER_HEADER.size
        if md_len > len(buf) - pos:
            raise TruncatedError("v2 ledger info overruns the index", offset=pos)
        _id, md = _ledger_info_metadata(buf[pos : pos + md_len], pos)
        pos += md_len
        rows, pos = _read_rows(buf, pos, count)
        records.append((ledger_id, md, rows))
    starts = sorted(r.offset for _l, _m, rows in records for r in rows)
    result: dict[int, OffloadIndex] = {}
    for ledger_id, md, rows in records:
        ends = []
        for row in rows:
            k = bisect.bisect_right(starts, row.offset)
            ends.append(starts[k] if k < len(starts) else data_len)
        result[ledger_id] = OffloadIndex(
            md,
            rows,
            data_len,
            header_len,
            None,
            version=2,
            ledger_id=ledger_id,
            block_ends=tuple(ends),
        )
    return result
