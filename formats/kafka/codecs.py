"""Kafka's record compression codecs, in Kafka's own framings (attributes & 7).

* 0 none; 1 gzip: a gzip stream; 2 snappy: the xerial snappy-java *stream* framing (a 16-byte
  header ``82 'SNAPPY' 00`` + version + compat, then blocks of big-endian int32 length + raw
  snappy), with a bare raw snappy block accepted on read as Kafka's reader does; 3 lz4: the LZ4
  *frame* format; 4 zstd: a zstd frame.

:func:`decompress` turns every codec failure into :class:`~formats.kafka.errors.CompressionError`
and refuses output beyond ``max_size`` (a bomb guard); :func:`compress` is for the encoder.
"""

from __future__ import annotations

import gzip
import struct
import zlib
from typing import Final

import cramjam
import lz4.frame
import zstandard

from formats.kafka.errors import CompressionError, UnsupportedCodecError

Buffer = bytes | bytearray | memoryview

NONE: Final = 0
GZIP: Final = 1
SNAPPY: Final = 2
LZ4: Final = 3
ZSTD: Final = 4
CODEC_NAMES: Final = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}

XERIAL_MAGIC: Final = b"\x82SNAPPY\x00"
_XERIAL_HEADER: Final = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK: Final = 32 * 1024
_BE_INT32 = struct.Struct(">i")

#: decompressed records larger than this are refused (Kafka's batches are far smaller)
DEFAULT_MAX_SIZE: Final = 256 * 1024 * 1024


def codec_name(codec: int) -> str:
    try:
        return CODEC_NAMES[codec]
    except KeyError:
        raise UnsupportedCodecError(f"unknown compression type {codec}") from None


def compress(codec: int, data: Buffer) -> bytes:
    """``data`` compressed with ``codec`` in Kafka's framing."""
    if codec == NONE:
        return bytes(data)
    if codec == GZIP:
        return gzip.compress(bytes(data), compresslevel=6, mtime=0)
    if codec == SNAPPY:
        out = bytearray(_XERIAL_HEADER)
        view = memoryview(data)
        for start in range(0, len(view), _XERIAL_BLOCK):
            block = bytes(cramjam.snappy.compress_raw(bytes(view[start : start + _XERIAL_BLOCK])))
            out += _BE_INT32.pack(len(block))
            out += block
        return bytes(out)
    if codec == LZ4:
        return bytes(lz4.frame.compress(bytes(data)))
    if codec == ZSTD:
        return bytes(zstandard.ZstdCompressor().compress(bytes(data)))
    codec_name(codec)
    raise AssertionError("unreachable")  # pragma: no cover


def _check_size(size: int, max_size: int, name: str) -> None:
    if size > max_size:
        raise CompressionError(f"{name} records decompress to more than {max_size} bytes")


def _xerial(data: bytes, max_size: int) -> bytes:
    out = bytearray()
    pos = 16
    end = len(data)
    while pos < end:
        if pos + 4 > end:
            raise CompressionError("xerial snappy stream ends inside a block length")
        (length,) = _BE_INT32.unpack_from(data, pos)
        pos += 4
        if length < 0 or pos + length > end:
            raise CompressionError(f"xerial snappy block of {length} bytes runs past the data")
        out += bytes(cramjam.snappy.decompress_raw(data[pos : pos + length]))
        _check_size(len(out), max_size, "snappy")
        pos += length
    return bytes(out)


def decompress(codec: int, data: Buffer, *, max_size: int = DEFAULT_MAX_SIZE) -> bytes:
    """Decompress Kafka-framed ``data``; any damage is a ``CompressionError``."""
    name = codec_name(codec)
    raw = bytes(data)
    if codec == NONE:
        return raw
    try:
        if codec == GZIP:
            dec = zlib.decompressobj(wbits=31)
            out = dec.decompress(raw, max_size + 1)
            _check_size(len(out), max_size, name)
            if not dec.eof:
                raise CompressionError("gzip stream is truncated")
            return out
        if codec == SNAPPY:
            if raw[:8] == XERIAL_MAGIC and len(raw) >= 16:
                return _xerial(raw, max_size)
            out = bytes(cramjam.snappy.decompress_raw(raw))
        elif codec == LZ4:
            lz4_dec = lz4.frame.LZ4FrameDecompressor()
            out = lz4_dec.decompress(raw, max_length=max_size + 1)
            _check_size(len(out), max_size, name)
            if not lz4_dec.eof:
                raise CompressionError("lz4 frame is truncated")
        else:
            dctx = zstandard.ZstdDecompressor()
            out = dctx.decompress(raw, max_output_size=max_size + 1)
    except CompressionError:
        raise
    except (
        zlib.error,
        RuntimeError,
        ValueError,
        zstandard.ZstdError,
        OSError,
        cramjam.DecompressionError,
    ) as exc:
        raise CompressionError(f"{name} records cannot be decompressed: {exc}") from exc
    _check_size(len(out), max_size, name)
    return bytes(out)
