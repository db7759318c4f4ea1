"""formats.kafka: every truncation and flipped byte ends in a typed error, never a crash."""

from __future__ import annotations

import pytest

from formats.errors import FormatError
from formats.kafka.batch import decode_records, iter_batch_headers, iter_records
from formats.kafka.encode import NewRecord, encode_batch
from formats.kafka.errors import (
    KafkaChecksumError,
    KafkaCorruptError,
    KafkaFormatError,
    KafkaTruncatedError,
)

ROWS = [
    NewRecord(1000 + i, None if i == 2 else b"key%d" % i, b"value" * i, (("h", b"1"),))
    for i in range(6)
]


@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])
def test_every_truncation_is_a_typed_error(codec: int) -> None:
    data = encode_batch(ROWS, base_offset=3, codec=codec)
    for cut in range(1, len(data)):
        with pytest.raises(KafkaTruncatedError):
            list(iter_records(data[:cut], source="seg.log"))
        # a prefix read stops quietly before the cut-off batch
        assert list(iter_batch_headers(data[:cut], stop_at_partial=True)) == []


@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])
def test_every_flipped_byte_is_caught(codec: int) -> None:
    data = encode_batch(ROWS, base_offset=3, codec=codec)
    for pos in range(len(data)):
        bad = bytearray(data)
        bad[pos] ^= 0x5A
        try:
            out = [r for _, r in iter_records(bytes(bad), source="seg.log")]
        except FormatError:
            continue
        # only the base offset and the leader epoch are outside the CRC (a broker rewrites
        # them): a flip there decodes, with the records intact
        assert pos < 8 or 12 <= pos < 16, pos
        assert [r.value for r in out] == [r.value for r in ROWS]


def test_crc_mismatch_names_the_segment_and_offset() -> None:
    data = bytearray(encode_batch(ROWS, base_offset=0) * 1)
    second = encode_batch(ROWS, base_offset=6)
    data += second
    data[len(data) - 1] ^= 1
    with pytest.raises(KafkaChecksumError, match=r"orders-0/0\.log.*base offset 6") as info:
        list(iter_batch_headers(bytes(data), source="orders-0/0.log"))
    assert info.value.offset == len(data) - len(second)


def test_corrupt_records_under_a_valid_crc() -> None:
    # a batch whose records lie (count too high), re-sealed with a correct CRC
    import struct

    import crc32c

    data = bytearray(encode_batch(ROWS, base_offset=0))
    struct.pack_into(">i", data, 57, len(ROWS) + 1)
    struct.pack_into(">I", data, 17, crc32c.crc32c(bytes(data[21:])))
    (header,) = list(iter_batch_headers(bytes(data)))
    with pytest.raises(KafkaFormatError, match="announces 7 records"):
        decode_records(bytes(data), header, source="s.log")
    struct.pack_into(">i", data, 57, len(ROWS) - 1)
    struct.pack_into(">I", data, 17, crc32c.crc32c(bytes(data[21:])))
    (header,) = list(iter_batch_headers(bytes(data)))
    with pytest.raises(KafkaCorruptError, match="bytes after"):
        decode_records(bytes(data), header)


def test_batches_going_back_are_refused() -> None:
    data = encode_batch(ROWS, base_offset=10) + encode_batch(ROWS, base_offset=12)
    with pytest.raises(KafkaCorruptError, match="goes back"):
        list(iter_batch_headers(data))
