"""The chunk transform (formats/transform): round trips under hypothesis, tampering, wrong
keys, truncated tables, and the already-compressed check."""

from __future__ import annotations

import contextlib
import os
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from formats.block import encode_block
from formats.errors import (
    ChunkAuthenticationError,
    CorruptDataError,
    FormatError,
    TruncatedError,
    UnsupportedVersionError,
    WrongKeyError,
)
from formats.transform import (
    ChunkDecoder,
    ChunkEncoder,
    ChunkMap,
    ObjectIdentity,
    TransformSection,
    compress_hints,
    decode_section,
    encode_section,
    pulsar_compression_codec,
    unwrap_data_key,
    wrap_data_key,
)
from formats.transform.chunks import MIN_SAVING

IDENT = ObjectIdentity("3f1c9a52-7b1e-4c2a-9d8e-0123456789ab", 42)
KEK = bytes(range(100, 132))


def transform(
    blocks: list[bytes],
    chunk_size: int,
    *,
    level: int | None,
    encrypt: bool,
    identity: ObjectIdentity = IDENT,
) -> tuple[bytes, TransformSection, bytes | None]:
    dek = os.urandom(32) if encrypt else None
    enc = ChunkEncoder(identity, chunk_size=chunk_size, zstd_level=level, data_key=dek)
    stored, rows = b"", []
    for b, block in enumerate(blocks):
        data, r = enc.encode_block(b, block)
        stored += data
        rows += r
    section = TransformSection(
        chunk_size=chunk_size,
        block_lengths=tuple(len(b) for b in blocks),
        chunks=tuple(rows),
        encrypted=encrypt,
        compression=level is not None,
        key_id="k1" if encrypt else "",
        wrapped_key=wrap_data_key(KEK, dek) if dek else b"",
    )
    return stored, section, dek


def read(stored: bytes, section: TransformSection, dek: bytes | None, s: int, e: int) -> bytes:
    chunk_map = ChunkMap(decode_section(encode_section(section)))
    span = chunk_map.span(s, e)
    decoder = ChunkDecoder(chunk_map, IDENT, dek)
    return decoder.read(s, e, stored[span.stored_start : span.stored_end], span.first)


payload = st.one_of(
    st.binary(min_size=0, max_size=300),
    st.integers(0, 400).map(lambda n: b'{"k":"v","n":1}' * n),
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    blocks=st.lists(st.lists(payload, min_size=1, max_size=8), min_size=1, max_size=3),
    chunk_size=st.integers(16, 4096),
    level=st.sampled_from([None, 1, 3]),
    encrypt=st.booleans(),
    data=st.data(),
)
def test_round_trip_any_range(
    blocks: list[list[bytes]],
    chunk_size: int,
    level: int | None,
    encrypt: bool,
    data: st.DataObject,
) -> None:
    raw = [encode_block(0, entries, 140 + sum(12 + len(p) for p in entries)) for entries in blocks]
    original = b"".join(raw)
    stored, section, dek = transform(raw, chunk_size, level=level, encrypt=encrypt)
    assert section.original_size == len(original)
    assert section.stored_size == len(stored)
    s = data.draw(st.integers(0, len(original) - 1))
    e = data.draw(st.integers(s + 1, len(original)))
    assert read(stored, section, dek, s, e) == original[s:e]
    assert read(stored, section, dek, 0, len(original)) == original


def test_compression_kept_only_when_it_saves_ten_percent() -> None:
    text = b'{"user":"alice","event":"click","n":12345}' * 2000
    noise = os.urandom(len(text))
    stored, section, _ = transform([text, noise], 4096, level=3, encrypt=False)
    blocks = [b for b, _k, _n in ChunkMap(section).positions]
    flags_text = {c.flags for c, b in zip(section.chunks, blocks, strict=True) if b == 0}
    flags_noise = {c.flags for c, b in zip(section.chunks, blocks, strict=True) if b == 1}
    assert flags_text == {0x01} and flags_noise == {0}
    compressed = [c for c in section.chunks if c.flags & 1]
    assert all(c.stored_len <= 4096 * (1 - MIN_SAVING) for c in compressed)
    assert len(stored) < len(text) * 0.2 + len(noise) + 100


def test_hint_false_skips_compression() -> None:
    text = b"a" * 10_000
    enc = ChunkEncoder(IDENT, chunk_size=4096, zstd_level=3, data_key=None)
    _data, rows = enc.encode_block(0, text, [True, False, True])
    assert [r.flags for r in rows] == [1, 0, 1]


def test_nonces_never_repeat_within_an_object() -> None:
    dek = os.urandom(32)
    enc = ChunkEncoder(IDENT, chunk_size=64, zstd_level=None, data_key=dek)
    a, _ = enc.encode_block(0, bytes(128))
    b, _ = enc.encode_block(1, bytes(128))
    # identical plaintext at different positions encrypts differently
    assert len({a[:80], a[80:], b[:80], b[80:]}) == 4


@pytest.mark.parametrize("level,encrypt", [(None, True), (3, True), (3, False), (None, False)])
def test_every_flipped_stored_byte_fails_loudly(level: int | None, encrypt: bool) -> None:
    block = encode_block(0, [b"x" * 300, os.urandom(200)], 140 + 12 + 300 + 12 + 200)
    stored, section, dek = transform([block], 128, level=level, encrypt=encrypt)
    for i in range(len(stored)):
        bad = bytearray(stored)
        bad[i] ^= 0x01
        with pytest.raises(ChunkAuthenticationError):
            read(bytes(bad), section, dek, 0, len(block))


def test_swapped_chunks_and_other_identity_fail_authentication() -> None:
    block = bytes(range(256)) * 2
    stored, section, dek = transform([block, block], 256, level=None, encrypt=True)
    # swap block 0 and block 1's first chunks, and their table rows (CRC32C then matches)
    n = section.chunks[0].stored_len
    swapped = stored[2 * n : 3 * n] + stored[n : 2 * n] + stored[:n] + stored[3 * n :]
    rows = list(section.chunks)
    rows[0], rows[2] = rows[2], rows[0]
    moved = TransformSection(
        chunk_size=256,
        block_lengths=section.block_lengths,
        chunks=tuple(rows),
        encrypted=True,
        key_id="k1",
        wrapped_key=section.wrapped_key,
    )
    with pytest.raises(ChunkAuthenticationError):
        read(swapped, moved, dek, 0, 256)
    chunk_map = ChunkMap(section)
    other = ChunkDecoder(chunk_map, ObjectIdentity(IDENT.uuid, 43), dek)
    with pytest.raises(ChunkAuthenticationError):
        other.decode_chunk(0, stored[:n])


def test_flipped_compression_flag_fails_authentication() -> None:
    stored, section, dek = transform([b"z" * 1000], 1000, level=3, encrypt=True)
    (row,) = section.chunks
    flipped = TransformSection(
        chunk_size=1000,
        block_lengths=(1000,),
        chunks=(type(row)(row.flags ^ 0x01, row.stored_len, row.crc32c),),
        encrypted=True,
        compression=True,
        key_id="k1",
        wrapped_key=section.wrapped_key,
    )
    with pytest.raises(ChunkAuthenticationError):
        read(stored, flipped, dek, 0, 1000)


def test_wrong_key_is_a_typed_error_naming_the_key_id() -> None:
    dek = os.urandom(32)
    wrapped = wrap_data_key(KEK, dek)
    with pytest.raises(WrongKeyError, match="'k9'") as info:
        unwrap_data_key(bytes(32), wrapped, "k9")
    assert dek.hex() not in str(info.value) and KEK.hex() not in str(info.value)
    tampered = bytes([wrapped[0] ^ 1]) + wrapped[1:]
    with pytest.raises(WrongKeyError):
        unwrap_data_key(KEK, tampered, "k1")


def test_every_truncation_of_the_section_is_a_typed_error() -> None:
    _stored, section, _ = transform([bytes(1000), bytes(300)], 128, level=3, encrypt=True)
    raw = encode_section(section)
    for cut in range(len(raw)):
        with pytest.raises(TruncatedError):
            decode_section(raw[:cut])
    with pytest.raises(CorruptDataError):
        decode_section(raw + b"\x00")
    with pytest.raises(UnsupportedVersionError):
        decode_section(b"\x02" + raw[1:])


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200))
def test_garbage_sections_are_refused_with_typed_errors(raw: bytes) -> None:
    with contextlib.suppress(FormatError):
        decode_section(raw)


def test_truncated_stored_range_is_a_typed_error() -> None:
    stored, section, dek = transform([bytes(1000)], 128, level=None, encrypt=True)
    chunk_map = ChunkMap(section)
    decoder = ChunkDecoder(chunk_map, IDENT, dek)
    with pytest.raises(TruncatedError):
        decoder.decode_run(0, stored[:-1])


def _pulsar_entry(compression: int | None, body: bytes) -> bytes:
    meta = b"\x0a\x01p" + b"\x10\x01" + b"\x18\x05"  # producer_name, sequence_id, publish_time
    if compression is not None:
        meta += b"\x40" + bytes([compression])  # field 8 varint
    meta += b"\x48\x10"  # uncompressed_size
    return b"\x0e\x01" + b"\x00" * 4 + struct.pack(">I", len(meta)) + meta + body


def test_pulsar_compression_codec() -> None:
    assert pulsar_compression_codec(_pulsar_entry(3, b"zz")) == 3
    assert pulsar_compression_codec(_pulsar_entry(None, b"zz")) == 0
    assert pulsar_compression_codec(_pulsar_entry(0, b"zz")) == 0
    broker = b"\x0e\x02" + struct.pack(">I", 2) + b"\x08\x01"
    assert pulsar_compression_codec(broker + _pulsar_entry(1, b"")) == 1
    assert pulsar_compression_codec(b"") == 0
    assert pulsar_compression_codec(os.urandom(64)) in range(0, 1 << 64)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=80))
def test_pulsar_compression_codec_never_raises(raw: bytes) -> None:
    pulsar_compression_codec(b"\x0e\x01" + raw)


def test_compress_hints_follow_the_entry_at_each_chunk_start() -> None:
    zipped = _pulsar_entry(3, os.urandom(500))
    plain = _pulsar_entry(None, b"a" * 500)
    block = encode_block(0, [zipped, plain], 140 + 24 + len(zipped) + len(plain))
    starts = [128, 128 + 12 + len(zipped)]
    expected = [not (c < starts[1]) for c in range(0, len(block), 256)]
    assert compress_hints(block, starts, 256) == expected
    assert expected.count(False) == 3 and expected.count(True) == 2
