"""Pulsar's payload codecs, bounded: NONE 0, LZ4 1 (raw block), ZLIB 2 (zlib stream with its
header), ZSTD 3 (a frame), SNAPPY 4 (raw, not framed).

:func:`decompress` never produces more than ``uncompressed_size`` bytes (nor more than
``limit``): output that would be larger is a decompression bomb and a
:class:`~formats.pulsar.errors.DecompressionError`, so is output that is shorter.
"""

from __future__ import annotations

import zlib

import cramjam
import lz4.block
import zstandard

from formats.pulsar.errors import (
    DecompressionError,
    MessageEncodeError,
    UnsupportedCompressionError,
)

NONE, LZ4, ZLIB, ZSTD, SNAPPY = 0, 1, 2, 3, 4
CODEC_NAMES = {NONE: "none", LZ4: "lz4", ZLIB: "zlib", ZSTD: "zstd", SNAPPY: "snappy"}
CODECS_BY_NAME = {name: number for number, name in CODEC_NAMES.items()}
#: default ceiling on one decompressed payload (Pulsar's own limit is 5 MiB per message by
#: default; a chunked message can be larger)
DEFAULT_LIMIT = 1 << 30

_ZSTD_D = zstandard.ZstdDecompressor()


def codec_number(name: str) -> int:
    try:
        return CODECS_BY_NAME[name.lower()]
    except KeyError:
        raise MessageEncodeError(
            f"unknown compression {name!r} (choose from {', '.join(CODECS_BY_NAME)})"
        ) from None


def compress(codec: int, data: bytes) -> bytes:
    """``data`` compressed as the Pulsar client does for ``codec``."""
    if codec == NONE:
        return bytes(data)
    if codec == LZ4:
        return bytes(lz4.block.compress(data, store_size=False))
    if codec == ZLIB:
        return zlib.compress(data)
    if codec == ZSTD:
        return bytes(zstandard.ZstdCompressor(level=3).compress(data))
    if codec == SNAPPY:
        return bytes(cramjam.snappy.compress_raw(data))
    raise MessageEncodeError(f"unknown compression codec {codec}")


def _varint_prefix(data: bytes) -> int | None:
    """The uncompressed length a raw snappy block starts with (None if unreadable)."""
    result = shift = 0
    for i in range(min(5, len(data))):
        byte = data[i]
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result
        shift += 7
    return None


def decompress(
    codec: int, data: bytes, uncompressed_size: int, limit: int = DEFAULT_LIMIT
) -> bytes:
    """Exactly ``uncompressed_size`` bytes from ``data``, or a typed error."""
    if codec == NONE:
        return data
    if codec not in CODEC_NAMES:
        raise UnsupportedCompressionError(f"unknown compression codec {codec}")
    name = CODEC_NAMES[codec]
    if uncompressed_size < 0 or uncompressed_size > limit:
        raise DecompressionError(
            f"{name}: uncompressed_size {uncompressed_size} is outside 0..{limit}"
        )
    try:
        out = _decompress(codec, data, uncompressed_size)
    except DecompressionError:
        raise
    except Exception as exc:  # each library has its own error types; all mean bad input
        raise DecompressionError(f"{name}: corrupt compressed data ({exc})") from None
    if len(out) != uncompressed_size:
        raise DecompressionError(
            f"{name}: decompressed to {len(out)} bytes, uncompressed_size says {uncompressed_size}"
        )
    return out


def _decompress(codec: int, data: bytes, size: int) -> bytes:
    if codec == LZ4:
        if size == 0:
            return b"" if data in (b"", b"\x00") else _too_long("lz4", size)
        # a raw block decompressed into exactly `size` bytes: more output is an error
        return bytes(lz4.block.decompress(data, uncompressed_size=size))
    if codec == ZLIB:
        d = zlib.decompressobj()
        out = d.decompress(data, size + 1)
        if len(out) > size:
            return _too_long("zlib", size)
        if not d.eof:
            raise DecompressionError("zlib: the stream is truncated")
        return out
    if codec == ZSTD:
        declared = zstandard.frame_content_size(data)
        if declared > size:
            return _too_long("zstd", size)
        return bytes(_ZSTD_D.decompress(data, max_output_size=max(size, 1)))
    prefix = _varint_prefix(data)
    if prefix is None:
        raise DecompressionError("snappy: no length prefix")
    if prefix > size:
        return _too_long("snappy", size)
    return bytes(cramjam.snappy.decompress_raw(data))


def _too_long(name: str, size: int) -> bytes:
    raise DecompressionError(
        f"{name}: decompresses to more than uncompressed_size {size} bytes (refused)"
    )
