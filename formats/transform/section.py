"""The transform section of the index extension (tag 3, critical): the chunk table, the wrapped
data key and its key id, encoded as bytes (spec/transforms.md §3).

A transformed data object is the concatenation, block by block, of its *stored chunks*: each
block's original bytes (the Pulsar block: header, entries, padding) cut into ``chunk_size``
pieces (the last piece of a block shorter), each stored zstd-compressed and/or AES-256-GCM
encrypted (a flag per chunk). This module owns the table that says how long each stored chunk
is, so that a reader can map any byte range of the original object to one ranged GET of the
stored object (:class:`ChunkMap`)::

    version u8 = 1 | flags u8 | chunk_size u32
    key_id_len u8 | key_id | wrapped_key_len u8 | wrapped_key
    block_count u32 | block_count x original_len u32
    chunk_count x (chunk_flags u8, stored_len u32, crc32c u32)

Decoding is bounded: every length is checked against what is present, and a table that is
short, long or self-contradictory raises a typed :class:`~formats.errors.FormatError`.
"""

from __future__ import annotations

import struct
from bisect import bisect_right
from dataclasses import dataclass, field

from formats.errors import (
    CorruptDataError,
    IndexInconsistentError,
    TruncatedError,
    UnsupportedVersionError,
)
from formats.extension import TAG_TRANSFORM, ExtensionSection, IndexExtension

#: the object user-metadata format version of transformed objects (data and index): Pulsar's
#: reader refuses anything but "1" ("Invalid object version"), spec/transforms.md §4
CHUNKED_FORMAT_VERSION = "ledger-offloader-chunked-1"
TRANSFORM_VERSION = 1
DEFAULT_CHUNK_SIZE = 1024 * 1024
#: smallest and largest chunk sizes the format allows
MIN_CHUNK_SIZE = 16
MAX_CHUNK_SIZE = 64 * 1024 * 1024

#: section flags
SECTION_ENCRYPTED = 0x01  # every chunk is AES-256-GCM encrypted
SECTION_COMPRESSION = 0x02  # chunks may be zstd-compressed
#: chunk flags
CHUNK_ZSTD = 0x01
CHUNK_AES_GCM = 0x02

_HEAD = struct.Struct(">BBI")
_U8 = struct.Struct(">B")
_U32 = struct.Struct(">I")
_CHUNK = struct.Struct(">BII")
#: AES-KW (RFC 3394) of a 32-byte data key
WRAPPED_KEY_LEN = 40


@dataclass(frozen=True)
class StoredChunk:
    """One chunk as stored: its flags, its stored length and the CRC32C of its stored bytes."""

    flags: int
    stored_len: int
    crc32c: int


@dataclass(frozen=True)
class TransformSection:
    """The decoded section. ``block_lengths`` are the blocks' original lengths; ``chunks`` is
    every chunk of every block in object order."""

    chunk_size: int
    block_lengths: tuple[int, ...]
    chunks: tuple[StoredChunk, ...]
    encrypted: bool = False
    compression: bool = False
    key_id: str = ""
    wrapped_key: bytes = b""

    def __post_init__(self) -> None:
        check_section(self)

    @property
    def flags(self) -> int:
        return (SECTION_ENCRYPTED if self.encrypted else 0) | (
            SECTION_COMPRESSION if self.compression else 0
        )

    @property
    def original_size(self) -> int:
        return sum(self.block_lengths)

    @property
    def stored_size(self) -> int:
        return sum(c.stored_len for c in self.chunks)

    def describe(self) -> str:
        """``zstd+aes-256-gcm``, ``zstd``, ``aes-256-gcm`` (for inspect output)."""
        parts = (["zstd"] if self.compression else []) + (["aes-256-gcm"] if self.encrypted else [])
        return "+".join(parts) or "none"


def chunks_in_block(block_len: int, chunk_size: int) -> int:
    return -(-block_len // chunk_size)


def check_section(s: TransformSection) -> None:
    """Refuse a section that contradicts itself (CorruptDataError)."""
    if not MIN_CHUNK_SIZE <= s.chunk_size <= MAX_CHUNK_SIZE:
        raise CorruptDataError(f"transform chunk size {s.chunk_size} is out of range")
    if any(n <= 0 or n > 0xFFFFFFFF for n in s.block_lengths):
        raise CorruptDataError("transform block lengths must be positive u32 values")
    expected = sum(chunks_in_block(n, s.chunk_size) for n in s.block_lengths)
    if expected != len(s.chunks):
        raise CorruptDataError(
            f"transform chunk table has {len(s.chunks)} chunks, the blocks need {expected}"
        )
    if s.encrypted != bool(s.key_id) or s.encrypted != bool(s.wrapped_key):
        raise CorruptDataError(
            "transform key id and wrapped key must be set exactly when encrypted"
        )
    if s.encrypted and len(s.wrapped_key) != WRAPPED_KEY_LEN:
        raise CorruptDataError(f"wrapped data key is {len(s.wrapped_key)} bytes, not 40")
    if len(s.key_id.encode()) > 255:
        raise CorruptDataError("key id longer than 255 bytes")
    want = CHUNK_AES_GCM if s.encrypted else 0
    allowed = want | (CHUNK_ZSTD if s.compression else 0)
    for i, c in enumerate(s.chunks):
        if c.flags & CHUNK_AES_GCM != want or c.flags & ~allowed:
            raise CorruptDataError(f"chunk {i} has flags 0x{c.flags:02x}, not allowed here")
        if not 0 < c.stored_len <= 0xFFFFFFFF:
            raise CorruptDataError(f"chunk {i} has stored length {c.stored_len}")


def encode_section(s: TransformSection) -> bytes:
    key_id = s.key_id.encode()
    out = bytearray(_HEAD.pack(TRANSFORM_VERSION, s.flags, s.chunk_size))
    out += _U8.pack(len(key_id)) + key_id
    out += _U8.pack(len(s.wrapped_key)) + s.wrapped_key
    out += _U32.pack(len(s.block_lengths))
    out += b"".join(_U32.pack(n) for n in s.block_lengths)
    out += b"".join(_CHUNK.pack(c.flags, c.stored_len, c.crc32c) for c in s.chunks)
    return bytes(out)


class _Cursor:
    def __init__(self, buf: memoryview) -> None:
        self.buf, self.pos = buf, 0

    def take(self, n: int, what: str) -> memoryview:
        if self.pos + n > len(self.buf):
            raise TruncatedError(
                f"transform section ends inside {what} ({len(self.buf)} bytes)", offset=self.pos
            )
        view = self.buf[self.pos : self.pos + n]
        self.pos += n
        return view

    def u8(self, what: str) -> int:
        return int(self.take(1, what)[0])

    def u32(self, what: str) -> int:
        return int(_U32.unpack(self.take(4, what))[0])


def decode_section(data: bytes | bytearray | memoryview) -> TransformSection:
    """Parse a section payload; refuses other versions, unknown flags, truncation, trailing
    bytes and tables that do not match the block lengths."""
    cur = _Cursor(memoryview(data))
    version = cur.u8("the version")
    if version != TRANSFORM_VERSION:
        raise UnsupportedVersionError(f"transform section version {version}", offset=0)
    flags = cur.u8("the flags")
    if flags & ~(SECTION_ENCRYPTED | SECTION_COMPRESSION):
        raise CorruptDataError(f"transform section flags 0x{flags:02x} unknown", offset=1)
    chunk_size = cur.u32("the chunk size")
    key_raw = bytes(cur.take(cur.u8("the key id length"), "the key id"))
    wrapped = bytes(cur.take(cur.u8("the wrapped key length"), "the wrapped key"))
    block_count = cur.u32("the block count")
    lengths_raw = cur.take(4 * block_count, "the block lengths")
    lengths = tuple(v for (v,) in _U32.iter_unpack(lengths_raw))
    if not MIN_CHUNK_SIZE <= chunk_size <= MAX_CHUNK_SIZE:
        raise CorruptDataError(f"transform chunk size {chunk_size} is out of range", offset=2)
    count = sum(chunks_in_block(n, chunk_size) for n in lengths)
    table = cur.take(_CHUNK.size * count, "the chunk table")
    if cur.pos != len(cur.buf):
        raise CorruptDataError(
            f"{len(cur.buf) - cur.pos} bytes after the transform chunk table", offset=cur.pos
        )
    try:
        key_id = key_raw.decode()
    except UnicodeDecodeError:
        raise CorruptDataError("transform key id is not UTF-8", offset=7) from None
    return TransformSection(
        chunk_size=chunk_size,
        block_lengths=lengths,
        chunks=tuple(StoredChunk(*t) for t in _CHUNK.iter_unpack(table)),
        encrypted=bool(flags & SECTION_ENCRYPTED),
        compression=bool(flags & SECTION_COMPRESSION),
        key_id=key_id,
        wrapped_key=wrapped,
    )


@dataclass(frozen=True)
class ChunkSpan:
    """The chunks ``[first, last]`` (global indexes) covering a range of original bytes, and
    the stored bytes ``[stored_start, stored_end)`` that hold them (one ranged GET)."""

    first: int
    last: int
    original_start: int
    stored_start: int
    stored_end: int


@dataclass(frozen=True)
class ChunkMap:
    """Original offset <-> stored offset of every chunk of a transformed object."""

    section: TransformSection
    #: per chunk: (block index, chunk index in its block, original length)
    positions: tuple[tuple[int, int, int], ...] = field(init=False, repr=False)
    original_starts: tuple[int, ...] = field(init=False, repr=False)
    stored_starts: tuple[int, ...] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        s = self.section
        positions: list[tuple[int, int, int]] = []
        orig: list[int] = []
        stored: list[int] = []
        o = p = 0
        i = 0
        for block, length in enumerate(s.block_lengths):
            for k in range(chunks_in_block(length, s.chunk_size)):
                size = min(s.chunk_size, length - k * s.chunk_size)
                positions.append((block, k, size))
                orig.append(o)
                stored.append(p)
                o += size
                p += s.chunks[i].stored_len
                i += 1
        orig.append(o)
        stored.append(p)
        object.__setattr__(self, "positions", tuple(positions))
        object.__setattr__(self, "original_starts", tuple(orig))
        object.__setattr__(self, "stored_starts", tuple(stored))

    @property
    def original_size(self) -> int:
        return self.original_starts[-1]

    @property
    def stored_size(self) -> int:
        return self.stored_starts[-1]

    def span(self, start: int, end: int) -> ChunkSpan:
        """The chunks covering original bytes ``[start, end)`` (clipped at the object's end)."""
        end = min(end, self.original_size)
        if not 0 <= start < end:
            raise CorruptDataError(
                f"range [{start}, {end}) is outside the object's {self.original_size} bytes"
            )
        first = bisect_right(self.original_starts, start) - 1
        last = bisect_right(self.original_starts, end - 1) - 1
        return ChunkSpan(
            first,
            last,
            self.original_starts[first],
            self.stored_starts[first],
            self.stored_starts[last + 1],
        )


def transform_extension_section(section: TransformSection) -> ExtensionSection:
    """The index extension section (tag 3, critical) that carries ``section``."""
    return ExtensionSection(TAG_TRANSFORM, encode_section(section), critical=True)


def transform_of(
    extension: IndexExtension | None, data_object_length: int | None = None
) -> TransformSection | None:
    """The transform of an index (None for a plain object); with ``data_object_length`` (the
    index's), checks that the chunk table describes exactly that many original bytes."""
    if extension is None:
        return None
    raw = extension.section(TAG_TRANSFORM)
    if raw is None:
        return None
    section = decode_section(raw.payload)
    if data_object_length is not None and section.original_size != data_object_length:
        raise IndexInconsistentError(
            f"transform chunk table covers {section.original_size} bytes, the index says "
            f"the data object holds {data_object_length}"
        )
    if len(section.block_lengths) != len(extension.block_crc32c):
        raise IndexInconsistentError(
            f"transform chunk table has {len(section.block_lengths)} blocks, the index "
            f"extension {len(extension.block_crc32c)}"
        )
    return section
