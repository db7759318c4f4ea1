"""formats.kafka: record batch round trips (hypothesis), codecs, control batches, magic 0/1."""

from __future__ import annotations

import struct
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from formats.kafka import codecs
from formats.kafka.batch import (
    CONTROL_ABORT,
    CONTROL_COMMIT,
    decode_control,
    decode_records,
    iter_batch_headers,
    iter_records,
)
from formats.kafka.encode import NewRecord, control_record, encode_batch
from formats.kafka.errors import CorruptBatchError, UnsupportedCodecError, UnsupportedMagicError
from formats.kafka.varint import read_varint, read_varlong, write_varint

optional_bytes = st.one_of(st.none(), st.binary(max_size=64))
headers = st.lists(st.tuples(st.text(max_size=8), optional_bytes), max_size=3).map(tuple)
records = st.lists(
    st.builds(
        NewRecord,
        timestamp=st.integers(0, 2**40),
        key=optional_bytes,
        value=optional_bytes,
        headers=headers,
    ),
    min_size=1,
    max_size=12,
)


@settings(max_examples=60, deadline=None)
@given(
    rows=records,
    base=st.integers(0, 2**40),
    codec=st.sampled_from([0, 1, 2, 3, 4]),
    epoch=st.integers(-1, 2**31 - 1),
)
def test_batch_round_trip(rows: list[NewRecord], base: int, codec: int, epoch: int) -> None:
    data = encode_batch(rows, base_offset=base, codec=codec, leader_epoch=epoch)
    (header,) = list(iter_batch_headers(data))
    assert header.size == len(data)
    assert (header.base_offset, header.compression, header.partition_leader_epoch) == (
        base,
        codec,
        epoch,
    )
    assert header.last_offset == base + len(rows) - 1
    assert header.max_timestamp == max(r.timestamp for r in rows)
    decoded = decode_records(data, header)
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in decoded] == [
        (base + i, r.timestamp, r.key, r.value, r.headers) for i, r in enumerate(rows)
    ]


@given(st.integers(-(2**63), 2**63 - 1))
def test_varlong_round_trip(value: int) -> None:
    assert read_varlong(write_varint(value), 0) == (value, len(write_varint(value)))


@given(st.integers(-(2**31), 2**31 - 1))
def test_varint_round_trip(value: int) -> None:
    assert read_varint(write_varint(value), 0)[0] == value


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_codecs_round_trip_and_refuse_garbage(codec: int) -> None:
    data = b"kafka " * 5000
    packed = codecs.compress(codec, data)
    assert len(packed) < len(data)
    assert codecs.decompress(codec, packed) == data
    with pytest.raises(codecs.CompressionError):
        codecs.decompress(codec, packed[: len(packed) // 2])
    with pytest.raises(codecs.CompressionError):
        codecs.decompress(codec, b"\x82SNAPPY\x00" + b"\xff" * 40 if codec == 2 else b"\x00" * 40)


def test_decompression_bomb_is_refused() -> None:
    for codec in (1, 2, 3, 4):
        packed = codecs.compress(codec, bytes(100_000))
        with pytest.raises(codecs.CompressionError, match="more than"):
            codecs.decompress(codec, packed, max_size=10_000)


def test_unknown_codec() -> None:
    with pytest.raises(UnsupportedCodecError):
        codecs.compress(7, b"x")


def test_xerial_snappy_blocks_of_32k() -> None:
    packed = codecs.compress(codecs.SNAPPY, bytes(range(256)) * 400)  # 100 KiB: 4 blocks
    assert packed.startswith(codecs.XERIAL_MAGIC + struct.pack(">ii", 1, 1))
    assert codecs.decompress(codecs.SNAPPY, packed) == bytes(range(256)) * 400


def test_control_and_transactional_batches() -> None:
    data = encode_batch(
        [NewRecord(5, b"k", b"v")],
        base_offset=10,
        producer_id=7,
        producer_epoch=1,
        base_sequence=0,
        transactional=True,
    )
    data += encode_batch(
        [control_record(CONTROL_COMMIT, coordinator_epoch=3, timestamp=6)],
        base_offset=11,
        producer_id=7,
        transactional=True,
        control=True,
    )
    data += encode_batch([control_record(CONTROL_ABORT, timestamp=7)], base_offset=12, control=True)
    first, commit, abort = list(iter_batch_headers(data))
    assert first.is_transactional and not first.is_control and first.producer_id == 7
    assert commit.is_control and commit.is_transactional
    marker = decode_control(decode_records(data, commit)[0])
    assert (marker.type, marker.coordinator_epoch) == (CONTROL_COMMIT, 3)
    assert decode_control(decode_records(data, abort)[0]).type == CONTROL_ABORT


def test_log_append_time_batches_use_the_max_timestamp() -> None:
    data = encode_batch(
        [NewRecord(1, None, b"a"), NewRecord(2, None, b"b")], base_offset=0, log_append_time=99
    )
    header, record = next(iter_records(data))
    assert header.timestamp_type == 1
    assert [r.timestamp for _, r in iter_records(data)] == [99, 99]
    assert record.offset == 0


def _magic_message(magic: int, *, offset: int = 0) -> bytes:
    # offset i64 | size i32 | crc u32 | magic i8 | attributes i8 | [timestamp i64] | key | value
    body = struct.pack(">bb", magic, 0) + (struct.pack(">q", 1) if magic else b"")
    body += struct.pack(">i", -1) + struct.pack(">i", 3) + b"abc"
    return struct.pack(">qiI", offset, len(body) + 4, zlib.crc32(body)) + body


@pytest.mark.parametrize("magic", [0, 1])
def test_old_magic_is_refused_naming_the_segment(magic: int) -> None:
    with pytest.raises(UnsupportedMagicError, match=r"00000000000000000000\.log") as info:
        list(iter_batch_headers(_magic_message(magic), source="orders-0/00000000000000000000.log"))
    assert info.value.magic == magic and info.value.offset == 0
    assert "convert the segment" in str(info.value)


@pytest.mark.parametrize("magic", [0, 1])
def test_an_old_message_cut_off_is_still_an_old_format(magic: int) -> None:
    data = _magic_message(magic)[:-2]
    with pytest.raises(UnsupportedMagicError):
        list(iter_batch_headers(data, source="s.log"))


def test_a_flipped_magic_byte_is_corruption_not_an_old_format() -> None:
    first = encode_batch([NewRecord(1, b"k", b"v")], base_offset=0)
    second = bytearray(encode_batch([NewRecord(2, b"k", b"w")], base_offset=1))
    for magic in (0, 1, 3, 0x82):
        second[16] = magic
        data = first + bytes(second)
        with pytest.raises(CorruptBatchError) as info:
            list(iter_batch_headers(data, source="orders-0/00000000000000000000.log"))
        assert str(info.value) == (
            f"corrupt record batch at position {len(first)} in "
            f"orders-0/00000000000000000000.log: magic byte {magic} is not 2, and the bytes are "
            "not a magic 0/1 message either"
        )
        assert info.value.offset == len(first) and info.value.magic == magic
        assert "convert the segment" not in str(info.value)


@pytest.mark.parametrize("magic", [0, 1])
def test_an_old_message_with_a_wrong_crc_is_corruption(magic: int) -> None:
    data = bytearray(_magic_message(magic))
    data[-1] ^= 1
    with pytest.raises(CorruptBatchError, match=r"corrupt record batch at position 0 in s\.log"):
        list(iter_batch_headers(bytes(data), source="s.log"))


def test_garbage_is_corruption() -> None:
    data = bytes(range(7, 7 + 100))
    with pytest.raises(CorruptBatchError, match="at position 0: magic byte 23 is not 2"):
        list(iter_batch_headers(data))
