"""Is a chunk already compressed? A cheap look at Pulsar message metadata, without trying zstd.

A Pulsar entry is ``[0x0e02 size BrokerEntryMetadata]? 0x0e01 crc32c u32 metadata_size u32
MessageMetadata payload``; ``MessageMetadata.compression`` is field 8 (varint; NONE = 0, LZ4,
ZLIB, ZSTD, SNAPPY). An entry whose metadata names a codec holds compressed bytes, and a chunk
starting inside such an entry is not compressed again (spec/transforms.md §2). Anything that
does not parse as a Pulsar message is "not known to be compressed": compression is then tried
and kept only when it pays. Self-contained on purpose (the full Pulsar message decoder lives in
``formats/pulsar/``); bounded: at most ``_MAX_FIELDS`` protobuf fields are looked at.
"""

from __future__ import annotations

import struct
from bisect import bisect_right
from collections.abc import Sequence

from formats.wire import ENTRY_HEADER_LEN

_MAGIC_CHECKSUM = 0x0E01
_MAGIC_BROKER_ENTRY_METADATA = 0x0E02
_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")
_COMPRESSION_FIELD = 8
_MAX_FIELDS = 64


def _varint(buf: memoryview, pos: int, end: int) -> tuple[int, int] | None:
    value = shift = 0
    while pos < end and shift < 64:
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7
    return None


def pulsar_compression_codec(payload: bytes | bytearray | memoryview) -> int:
    """The ``compression`` of a Pulsar entry's MessageMetadata (0 when none, or when the bytes
    are not a Pulsar entry with the checksum magic)."""
    buf = memoryview(payload).cast("B")
    pos = 0
    if len(buf) >= 6 and _U16.unpack_from(buf, 0)[0] == _MAGIC_BROKER_ENTRY_METADATA:
        pos = 6 + _U32.unpack_from(buf, 2)[0]
    if pos + 10 > len(buf) or _U16.unpack_from(buf, pos)[0] != _MAGIC_CHECKSUM:
        return 0
    (size,) = _U32.unpack_from(buf, pos + 6)
    pos += 10
    end = pos + size
    if end > len(buf):
        return 0
    for _ in range(_MAX_FIELDS):
        if pos >= end:
            return 0
        tag = _varint(buf, pos, end)
        if tag is None:
            return 0
        key, pos = tag
        field, wire = key >> 3, key & 7
        if wire == 0:
            value = _varint(buf, pos, end)
            if value is None:
                return 0
            if field == _COMPRESSION_FIELD:
                return value[0]
            pos = value[1]
        elif wire == 2:
            length = _varint(buf, pos, end)
            if length is None:
                return 0
            pos = length[1] + length[0]
        elif wire == 1:
            pos += 8
        elif wire == 5:
            pos += 4
        else:
            return 0
    return 0


def compress_hints(
    block: bytes | bytearray | memoryview,
    entry_starts: Sequence[int],
    chunk_size: int,
) -> list[bool]:
    """Per chunk of ``block``: False when the entry covering the chunk's first byte (or the
    first entry, for the chunk holding the block header) is an already-compressed Pulsar
    message. ``entry_starts`` are the block offsets of the entries' 12-byte frames, ascending."""
    view = memoryview(block).cast("B")
    hints: list[bool] = []
    for start in range(0, len(view), chunk_size):
        i = max(bisect_right(entry_starts, start) - 1, 0)
        if not entry_starts:
            hints.append(True)
            continue
        frame = entry_starts[i]
        if frame + ENTRY_HEADER_LEN > len(view):
            hints.append(True)
            continue
        (length,) = struct.unpack_from(">i", view, frame)
        body = view[frame + ENTRY_HEADER_LEN : frame + ENTRY_HEADER_LEN + max(length, 0)]
        hints.append(pulsar_compression_codec(body) == 0)
    return hints


def kafka_compress_hints(
    compressed_spans: Sequence[tuple[int, int]], start: int, length: int, chunk_size: int
) -> list[bool]:
    """Per chunk of the ``.log`` bytes ``[start, start + length)``: False when at least half
    of the chunk lies in record batches whose attributes carry a codec (``attributes & 0x7``:
    gzip, snappy, lz4, zstd; spec/transforms.md §8). ``compressed_spans`` are those batches'
    ``[start, end)`` byte ranges in the ``.log``, ascending and disjoint."""
    ends = [e for _, e in compressed_spans]
    hints: list[bool] = []
    for a in range(start, start + length, chunk_size):
        b = min(a + chunk_size, start + length)
        covered = 0
        i = bisect_right(ends, a)  # the first span ending after a
        while i < len(compressed_spans) and compressed_spans[i][0] < b:
            s, e = compressed_spans[i]
            covered += min(e, b) - max(s, a)
            i += 1
        hints.append(2 * covered < b - a)
    return hints
