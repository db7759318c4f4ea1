"""Data blocks: the 128-byte ``DataBlockHeader``, entry framing, and ``FE DC DE AD`` padding.

A block is ``header || (len:i32, entry_id:i64, payload)* || padding`` (spec/block-format.md).
:class:`BlockWriter` fills one reusable buffer per block (each payload is copied once, into that
buffer, from payload objects or from :class:`~formats.spans.SpanBatch` spans of a source's
buffer); :func:`iter_block_entries` walks a block's entries as memoryviews (no copies) and
checks every length, id and the padding, raising typed errors that name the offset;
:func:`pack_block_entries` does the same checks in one pass and packs the payloads as an Arrow
binary column (the Spark source's batches).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

from formats.errors import BadMagicError, CorruptDataError, OffloaderError, TruncatedError
from formats.framing import frame_entries, frame_spans, pack_entries, zeroed_bytearray
from formats.spans import SpanBatch
from formats.wire import (
    BLOCK_HEADER_FIELDS,
    BLOCK_HEADER_LEN,
    BLOCK_HEADER_USED,
    DATA_BLOCK_MAGIC,
    ENTRY_HEADER,
    ENTRY_HEADER_LEN,
    PADDING_PATTERN,
)

Buffer = bytes | bytearray | memoryview
#: what :meth:`BlockWriter.write_block_batches` frames in one call: payload objects, or a run
#: of spans of one buffer
Batch = Sequence[Buffer] | SpanBatch


@dataclass(frozen=True)
class DataBlockHeader:
    """The header at the start of every block (Pulsar's ``DataBlockHeaderImpl``)."""

    block_len: int
    first_entry_id: int
    header_len: int = BLOCK_HEADER_LEN

    def encode(self) -> bytes:
        out = bytearray(self.header_len)
        BLOCK_HEADER_FIELDS.pack_into(
            out, 0, DATA_BLOCK_MAGIC, self.header_len, self.block_len, self.first_entry_id
        )
        return bytes(out)

    @classmethod
    def decode(cls, buf: Buffer, offset: int = 0, *, base_offset: int = 0) -> DataBlockHeader:
        """Parse the header at ``buf[offset:]``; ``base_offset`` is added to error offsets."""
        at = base_offset + offset
        if len(buf) - offset < BLOCK_HEADER_USED:
            raise TruncatedError(
                f"block header needs {BLOCK_HEADER_USED} bytes, {max(0, len(buf) - offset)} left",
                offset=at,
            )
        magic, header_len, block_len, first_entry_id = BLOCK_HEADER_FIELDS.unpack_from(buf, offset)
        if magic != DATA_BLOCK_MAGIC:
            raise BadMagicError(
                f"data block magic is 0x{magic:08X}, expected 0x{DATA_BLOCK_MAGIC:08X}", offset=at
            )
        if header_len < BLOCK_HEADER_USED:
            raise CorruptDataError(f"block header length {header_len} is below 28", offset=at + 4)
        if len(buf) - offset < header_len:
            # Pulsar's DataBlockHeaderImpl.fromStream: "Header was too small"
            raise TruncatedError(
                f"block header was too small: it says {header_len} bytes, {len(buf) - offset} left",
                offset=at,
            )
        if block_len < header_len:
            raise CorruptDataError(
                f"block length {block_len} is smaller than its header ({header_len})",
                offset=at + 12,
            )
        if first_entry_id < 0:
            raise CorruptDataError(f"negative first entry id {first_entry_id}", offset=at + 20)
        return cls(block_len=block_len, first_entry_id=first_entry_id, header_len=header_len)


def padding(length: int, phase: int = 0) -> bytes:
    """``length`` bytes of the padding pattern, starting ``phase`` bytes into it."""
    reps = (length + phase) // 4 + 1
    return (PADDING_PATTERN * reps)[phase : phase + length]


def is_padding(view: Buffer) -> bool:
    """True when ``view`` is exactly a run of padding starting at the pattern's first byte."""
    return bytes(view) == padding(len(view))


class BlockWriter:
    """Encodes blocks into one reusable buffer of ``max_block_size`` bytes.

    The memoryview returned by :meth:`write_block` stays valid until the next call; callers that
    keep blocks (concurrent uploads) use one writer per in-flight block.
    """

    def __init__(self, max_block_size: int, buffer: bytearray | None = None) -> None:
        """``buffer``: a bytearray of ``max_block_size`` bytes to write into (prepared ahead
        by the caller, e.g. on another thread), else one is allocated."""
        if buffer is None:
            buffer = zeroed_bytearray(max_block_size)
        elif len(buffer) != max_block_size:
            raise ValueError(f"buffer of {len(buffer)} bytes for blocks of {max_block_size}")
        self.max_block_size = max_block_size
        self._buf = buffer
        self._view = memoryview(self._buf)

    def release(self) -> bytearray:
        """Give up the buffer (to reuse it elsewhere): the writer's own view of it is
        released and the writer keeps none of it (it writes nothing afterwards); views of
        blocks it returned stay valid while their holders keep them."""
        buf = self._buf
        self._view.release()
        self._buf = bytearray()
        self._view = memoryview(self._buf)
        self.max_block_size = 0
        return buf

    def write_block(
        self, first_entry_id: int, payloads: Sequence[Buffer], block_size: int
    ) -> memoryview:
        """Frame ``payloads`` (ids from ``first_entry_id``) into a block of exactly
        ``block_size`` bytes, padded at the end; raises if they do not fit."""
        return self.write_block_batches(first_entry_id, (payloads,), block_size)

    def write_block_batches(
        self,
        first_entry_id: int,
        batches: Iterable[Batch],
        block_size: int,
        on_framed: Callable[[memoryview, int, int], None] | None = None,
    ) -> memoryview:
        """Like :meth:`write_block`, with the payloads given as consecutive batches: each
        batch (a sequence of payloads, or a :class:`~formats.spans.SpanBatch`) is framed in
        one call (in C when built), and only one need be alive at a time (a source can hand
        over a batch it has just read). Either kind gives the same bytes.

        ``on_framed(view, start, end)``, if given, is called after each batch is framed and
        after the padding is written, with the buffer and the block offsets of the bytes just
        written (in order, back to back from the header's end): a checksum summed there
        reads them while they are still in the CPU's cache
        (:class:`formats.span_crc.SpanSummer`)."""
        if block_size > self.max_block_size:
            raise CorruptDataError(
                f"block size {block_size} exceeds the writer's maximum {self.max_block_size}"
            )
        buf = self._buf
        view = self._view
        BLOCK_HEADER_FIELDS.pack_into(
            buf, 0, DATA_BLOCK_MAGIC, BLOCK_HEADER_LEN, block_size, first_entry_id
        )
        view[BLOCK_HEADER_USED:BLOCK_HEADER_LEN] = bytes(BLOCK_HEADER_LEN - BLOCK_HEADER_USED)
        pos, next_id = BLOCK_HEADER_LEN, first_entry_id
        for batch in batches:
            framed_from = pos
            if isinstance(batch, SpanBatch):
                spans = batch.spans
                pos, count = frame_spans(
                    buf,
                    pos,
                    next_id,
                    spans.data,
                    spans.starts,
                    spans.lengths,
                    batch.index,
                    batch.count,
                    block_size,
                )
                wanted = batch.count
            else:
                pos, count = frame_entries(buf, pos, next_id, batch, block_size)
                wanted = len(batch)
            if count < wanted:
                size = (
                    batch.spans.lengths[batch.index + count]
                    if isinstance(batch, SpanBatch)
                    else memoryview(batch[count]).nbytes
                )
                raise CorruptDataError(
                    f"entry {next_id + count} ({size} bytes) does not fit in a block of "
                    f"{block_size} bytes at offset {pos}"
                )
            next_id += count
            if on_framed is not None:
                on_framed(view, framed_from, pos)
        if pos < block_size:
            view[pos:block_size] = padding(block_size - pos)
            if on_framed is not None:
                on_framed(view, pos, block_size)
        return view[:block_size]


def encode_block(first_entry_id: int, payloads: Sequence[Buffer], block_size: int) -> bytes:
    """One block as bytes (convenience for tests and small ledgers)."""
    return bytes(BlockWriter(block_size).write_block(first_entry_id, payloads, block_size))


@dataclass(frozen=True)
class BlockEntry:
    """An entry found in a block: its id, payload view, and object offset of its length field."""

    entry_id: int
    payload: memoryview
    offset: int


def _checked_header(
    view: memoryview,
    base_offset: int,
    expected_first_entry_id: int | None,
    *,
    block_len: int | None = None,
) -> DataBlockHeader:
    """The block's header, checked against the block's length (``len(view)`` unless
    ``block_len`` says it, when the view holds only the start of the block), its reserved
    bytes (zeros) and the first entry id the index expects."""
    header = DataBlockHeader.decode(view, 0, base_offset=base_offset)
    actual = len(view) if block_len is None else block_len
    if header.block_len != actual:
        raise TruncatedError(
            f"block header says {header.block_len} bytes, the block has {actual}",
            offset=base_offset + 12,
        )
    reserved = view[BLOCK_HEADER_USED : header.header_len]
    if any(reserved):
        # Pulsar always writes zeros here; anything else is damage the framing would miss
        first_bad = next(i for i, b in enumerate(reserved) if b)
        raise CorruptDataError(
            "reserved block header bytes are not zero",
            offset=base_offset + BLOCK_HEADER_USED + first_bad,
        )
    if expected_first_entry_id is not None and header.first_entry_id != expected_first_entry_id:
        raise CorruptDataError(
            f"block starts with entry {header.first_entry_id}, index says "
            f"{expected_first_entry_id}",
            offset=base_offset + 20,
        )
    return header


def iter_block_entries(
    block: Buffer,
    *,
    base_offset: int = 0,
    expected_first_entry_id: int | None = None,
    check_padding: bool = True,
) -> Iterator[BlockEntry]:
    """Walk a whole block's entries in order.

    ``base_offset`` is the block's offset in the data object (for offsets in errors and in the
    yielded entries). Entry ids must increase by one from the header's ``first_entry_id``; the
    first non-entry bytes must be padding (a negative length), running to the block's end.
    """
    view = memoryview(block)
    header = _checked_header(view, base_offset, expected_first_entry_id)
    yield from iter_framed_entries(
        view,
        header.header_len,
        header.first_entry_id,
        base_offset=base_offset,
        check_padding=check_padding,
    )


def iter_framed_entries(
    view: memoryview,
    start: int,
    first_entry_id: int,
    *,
    base_offset: int = 0,
    check_padding: bool = True,
    end_entry_id: int | None = None,
) -> Iterator[BlockEntry]:
    """Walk framed entries in ``view[start:]`` until padding or the end of ``view``.

    Stops early after ``end_entry_id`` when given (the rest of the view is then not checked).
    """
    end = len(view)
    pos = start
    expected = first_entry_id
    unpack = ENTRY_HEADER.unpack_from
    while pos < end:
        if end_entry_id is not None and expected > end_entry_id:
            return
        if end - pos >= ENTRY_HEADER_LEN and not view[pos] & 0x80:
            length, entry_id = unpack(view, pos)
            payload_end = pos + ENTRY_HEADER_LEN + length
            if entry_id == expected and payload_end <= end:
                yield BlockEntry(
                    entry_id, view[pos + ENTRY_HEADER_LEN : payload_end], base_offset + pos
                )
                pos = payload_end
                expected += 1
                continue
        error = _stop_error(view, pos, expected, base_offset, check_padding)
        if error is not None:
            raise error
        return


def _stop_error(
    view: memoryview, pos: int, expected: int, base_offset: int, check_padding: bool
) -> OffloaderError | None:
    """Why the entries of ``view`` stop at ``pos``: None for the end or valid padding, else
    the typed error naming the offset."""
    end = len(view)
    remaining = end - pos
    if remaining < 4 or view[pos] & 0x80:
        # a negative length (or fewer than 4 bytes): padding up to the end
        if check_padding and not is_padding(view[pos:end]):
            return CorruptDataError(
                "bytes after the last entry are neither an entry nor padding",
                offset=base_offset + pos,
            )
        return None
    if remaining < ENTRY_HEADER_LEN:
        return TruncatedError(
            f"entry header needs {ENTRY_HEADER_LEN} bytes, {remaining} left",
            offset=base_offset + pos,
        )
    length, entry_id = ENTRY_HEADER.unpack_from(view, pos)
    if entry_id != expected:
        return CorruptDataError(
            f"entry id {entry_id} where entry {expected} was expected",
            offset=base_offset + pos + 4,
        )
    return TruncatedError(
        f"entry {entry_id} of {length} bytes overruns the block ({remaining - 12} left)",
        offset=base_offset + pos,
    )


@dataclass(frozen=True)
class PackedEntries:
    """Consecutive entries as an Arrow binary column: ids ``first_entry_id ..`` (``count`` of
    them), every payload back to back in ``data``, and ``count + 1`` native int32 ``offsets``
    (bytes) into it: entry ``first_entry_id + i`` is ``data[offsets[i] : offsets[i + 1]]``.

    A whole block (:func:`pack_block_entries`, the Spark source) or one buffer's worth of a
    read (``ReadHandle.iter_packed``): no Python object per entry until one is asked for."""

    first_entry_id: int
    count: int
    #: bytes, or a memoryview of a buffer the packer owns (formats.block_packer)
    data: bytes | memoryview
    offsets: bytes | memoryview

    def __len__(self) -> int:
        return self.count

    @property
    def last_entry_id(self) -> int:
        """Id of the last entry (``first_entry_id - 1`` when empty)."""
        return self.first_entry_id + self.count - 1

    @property
    def payload_bytes(self) -> int:
        """Sum of the payload sizes."""
        return memoryview(self.data).nbytes

    def offsets_view(self) -> memoryview:
        """The ``count + 1`` offsets as a memoryview of int32."""
        return memoryview(self.offsets).cast("i")

    def payload(self, entry_id: int) -> bytes:
        """The payload of entry ``entry_id`` (one of this batch's ids)."""
        i = entry_id - self.first_entry_id
        if not 0 <= i < self.count:
            raise IndexError(
                f"entry {entry_id} is not in this batch ({self.first_entry_id}.."
                f"{self.last_entry_id})"
            )
        offsets = self.offsets_view()
        return bytes(self.data[offsets[i] : offsets[i + 1]])

    def payloads(self) -> Iterator[bytes]:
        """Every payload, in id order."""
        data, offsets = memoryview(self.data), self.offsets_view()
        for i in range(self.count):
            yield data[offsets[i] : offsets[i + 1]].tobytes()


def pack_block_entries(
    block: Buffer,
    *,
    base_offset: int = 0,
    expected_first_entry_id: int | None = None,
    check_padding: bool = True,
) -> PackedEntries:
    """Every entry of a whole block, packed in one pass (in C when built): the same checks
    and typed errors as :func:`iter_block_entries`, one copy of the payloads."""
    view = memoryview(block)
    header = _checked_header(view, base_offset, expected_first_entry_id)
    first = header.first_entry_id
    data, offsets, count, stop, _ = pack_entries(view, header.header_len, len(view), first)
    if stop < len(view):
        error = _stop_error(view, stop, first + count, base_offset, check_padding)
        if error is not None:
            raise error
    return PackedEntries(first, count, data, offsets)
