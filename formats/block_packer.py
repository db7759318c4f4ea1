"""Packing a block's entries as its bytes arrive, chunk by chunk, without joining the chunks.

:func:`formats.block.pack_block_entries` packs a whole block held in one buffer. A reader
that streams a block (the Spark source) receives it as chunks of ``read_buffer`` bytes;
joining them costs a copy of the block, and packing only after the last chunk leaves the CPU
idle while the bytes arrive. :class:`BlockPacker` packs each chunk as it is fed (one C call
per chunk, :func:`formats.framing.pack_into`) into one payload buffer and one offsets buffer
of its own (or, for the payloads, a writable buffer the caller passes as ``out`` and reuses
across blocks: a fresh 64 MiB buffer costs about 16,000 page faults, some 30 ms here); an entry
cut by a chunk boundary is assembled from its pieces first (a copy of that one entry). The
result is one :class:`~formats.block.PackedEntries` for the block, its ``data`` and ``offsets``
memoryviews of those buffers.

The verdict is exactly :func:`pack_block_entries`' on the joined block: the same entries, or
the same typed error at the same offset. Nothing is raised before :meth:`BlockPacker.finish`,
so a caller can check the block's length and CRC32C first (a checksum error names the damage
better than the framing error it causes). Where the entries stop early (padding, damage), the
bytes from there to the end are kept and judged whole; if the block header is anything but
plain, every chunk is kept and the whole block goes through ``pack_block_entries``.
"""

from __future__ import annotations

from formats.block import (
    PackedEntries,
    _checked_header,
    _stop_error,
    pack_block_entries,
)
from formats.errors import FormatError
from formats.framing import pack_into
from formats.wire import BLOCK_HEADER_LEN, ENTRY_HEADER, ENTRY_HEADER_LEN

__all__ = ["BlockPacker"]


class BlockPacker:
    """Feed a block of ``block_len`` bytes in order with :meth:`feed`, then :meth:`finish`."""

    def __init__(
        self,
        block_len: int,
        *,
        base_offset: int = 0,
        expected_first_entry_id: int | None = None,
        check_padding: bool = True,
        out: memoryview | bytearray | None = None,
    ) -> None:
        """``out``, when given, receives the payloads: a writable buffer of at least
        ``block_len`` bytes that nothing else writes to until the result is dropped."""
        if out is not None:
            out = memoryview(out).cast("B")
            if out.readonly or len(out) < block_len:
                raise ValueError(f"BlockPacker: out must be writable and hold {block_len} bytes")
        self._block_len = block_len
        self._base = base_offset
        self._expected_first = expected_first_entry_id
        self._check_padding = check_padding
        self._fed = 0  # bytes fed so far
        self._pos = 0  # block offset of the next byte to pack (the start of _pending)
        self._next_id = 0
        self._first_id = 0
        self._count = 0  # entries packed
        #: their payloads, back to back (``out``, or block_len bytes allocated once started)
        self._out: memoryview | bytearray = out if out is not None else bytearray()
        self._out_pos = 0
        self._offsets = bytearray()  # count + 1 native int32 ends (grown as needed)
        #: bytes from _pos on not packed yet (an entry cut by a chunk end), or, once stopped,
        #: everything from _pos to the end
        self._pending: list[bytes] = []
        self._pending_len = 0
        self._entry_len = -1  # framed size of the pending entry, once its header is whole
        #: "header" (chunks kept until the block header can be checked), "packing",
        #: "stopped" (entries ended at _pos: the rest is kept for the verdict) or "whole"
        #: (every chunk kept: the whole block is judged at the end)
        self._mode = "header"
        self._kept: list[bytes] = []  # the chunks fed, in the "header" and "whole" modes
        self._kept_len = 0

    def feed(self, chunk: bytes) -> None:
        """The next ``len(chunk)`` bytes of the block."""
        if not chunk:
            return
        self._fed += len(chunk)
        if self._mode == "packing":
            self._pack_chunk(chunk)
        elif self._mode == "stopped":
            self._pending.append(chunk)
        else:
            self._kept.append(chunk)
            self._kept_len += len(chunk)
            if self._mode == "header" and self._kept_len >= min(BLOCK_HEADER_LEN, self._block_len):
                self._start()

    def finish(self) -> PackedEntries:
        """The block's entries, once every byte was fed; or the typed error the whole block
        gives."""
        if self._fed != self._block_len:
            raise ValueError(f"BlockPacker: {self._fed} bytes fed, the block has {self._block_len}")
        if self._mode in ("header", "whole"):  # "header": a block shorter than a header
            block = b"".join(self._kept)
            return pack_block_entries(
                block,
                base_offset=self._base,
                expected_first_entry_id=self._expected_first,
                check_padding=self._check_padding,
            )
        if self._pending_len or self._mode == "stopped":
            rest = memoryview(b"".join(self._pending))
            error = _stop_error(rest, 0, self._next_id, self._base + self._pos, self._check_padding)
            if error is not None:
                raise error
        data = memoryview(self._out)[: self._out_pos]
        offsets = memoryview(self._offsets)[: 4 * (self._count + 1)]
        return PackedEntries(self._first_id, self._count, data, offsets)

    # --- internals ------------------------------------------------------------------------
    def _start(self) -> None:
        head = b"".join(self._kept)
        try:
            header = _checked_header(
                memoryview(head), self._base, self._expected_first, block_len=self._block_len
            )
        except FormatError:
            header = None
        if header is None or header.header_len > len(head):
            self._mode = "whole"  # let pack_block_entries judge the whole block
            return
        self._mode = "packing"
        self._kept, self._kept_len = [], 0
        self._next_id = self._first_id = header.first_entry_id
        if len(self._out) < self._block_len:  # no ``out`` given
            self._out = bytearray(self._block_len)
        self._offsets = bytearray(4 * (self._block_len // 1024 + 64))
        self._pos = header.header_len
        self._pack_chunk(head, header.header_len)

    def _pack_chunk(self, chunk: bytes, at: int = 0) -> None:
        if self._pending:
            at = self._complete_pending(chunk)
            if at < 0:
                return
        if at == len(chunk):
            return
        stop = self._pack_run(chunk, at)
        self._pos += stop - at
        if stop < len(chunk):
            self._hold(chunk[stop:])

    def _hold(self, rest: bytes) -> None:
        """The bytes from _pos to the chunk's end are not a whole entry: wait for more, or
        stop if they cannot begin the next entry."""
        self._pending, self._pending_len = [rest], len(rest)
        self._judge_pending()

    def _judge_pending(self) -> None:
        """Stop unless the pending bytes may begin the next entry inside the block."""
        left = self._block_len - self._pos
        first = self._pending[0]
        if left < ENTRY_HEADER_LEN or first[0] & 0x80:
            self._mode = "stopped"
            return
        if self._pending_len < ENTRY_HEADER_LEN:
            return
        head = first if len(first) >= ENTRY_HEADER_LEN else b"".join(self._pending)
        length, entry_id = ENTRY_HEADER.unpack_from(head, 0)
        if entry_id != self._next_id or ENTRY_HEADER_LEN + length > left:
            self._mode = "stopped"

    def _complete_pending(self, chunk: bytes) -> int:
        """Add the start of ``chunk`` to the pending entry; returns where the rest of the chunk
        begins once the entry is packed, or -1 (the chunk was used up, or the entries stop)."""
        if self._pending_len < ENTRY_HEADER_LEN:
            take = min(ENTRY_HEADER_LEN - self._pending_len, len(chunk))
            self._pending.append(chunk[:take])
            self._pending_len += take
            self._judge_pending()
            if self._mode == "stopped":
                self._pending[-1] = chunk  # keep the whole chunk: the verdict reads on
                self._pending_len += len(chunk) - take
                return -1
            if self._pending_len < ENTRY_HEADER_LEN:
                return -1
            used = take
        else:
            used = 0
        if self._entry_len < 0:
            if len(self._pending[0]) < ENTRY_HEADER_LEN:
                self._pending = [b"".join(self._pending)]
            self._entry_len = ENTRY_HEADER_LEN + ENTRY_HEADER.unpack_from(self._pending[0], 0)[0]
        need = self._entry_len - self._pending_len
        take = min(need, len(chunk) - used)
        self._pending.append(chunk[used : used + take])
        self._pending_len += take
        if take < need:
            return -1
        entry = b"".join(self._pending)
        self._entry_len = -1
        self._pack_run(entry, 0)
        self._pos += len(entry)
        self._pending, self._pending_len = [], 0
        return used + take

    def _pack_run(self, buf: bytes, at: int) -> int:
        """Pack the entries of ``buf[at:]`` into the block's buffers; returns where they stop."""
        most = self._count + (len(buf) - at) // ENTRY_HEADER_LEN + 2
        have = len(self._offsets) // 4
        if most > have:
            self._offsets.extend(bytes(4 * (max(most, 2 * have) - have)))
        self._out_pos, count, stop = pack_into(
            self._out, self._out_pos, self._offsets, self._count, buf, at, len(buf), self._next_id
        )
        self._count += count
        self._next_id += count
        return stop
