"""The worked example of spec/transforms.md §6, checked byte for byte (registered with the
spec-vector test through :data:`TRANSFORM_CHECKS`)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from formats.block import encode_block
from formats.kafka.encode import NewRecord, encode_batch
from formats.kafka.names import uuid_to_kafka
from formats.transform import (
    AAD_MAGIC_KAFKA,
    ChunkDecoder,
    ChunkEncoder,
    ChunkMap,
    ObjectIdentity,
    TransformSection,
    decode_section,
    decode_segment_table,
    encode_section,
    encode_segment_table,
    read_segment_table,
    unwrap_data_key,
    wrap_data_key,
)
from formats.transform.chunks import chunk_aad, chunk_nonce

IDENTITY = ObjectIdentity("00112233-4455-6677-8899-aabbccddeeff", 3)
DATA_KEY = bytes(range(32))
KEK = bytes(range(0x20, 0x40))
BLOCK = encode_block(0, [b"A" * 10, b"B" * 20, b"C" * 30], 224)


def _example() -> tuple[bytes, TransformSection]:
    encoder = ChunkEncoder(IDENTITY, chunk_size=128, zstd_level=None, data_key=DATA_KEY)
    stored, rows = encoder.encode_block(0, BLOCK)
    section = TransformSection(
        chunk_size=128,
        block_lengths=(224,),
        chunks=tuple(rows),
        encrypted=True,
        key_id="k1",
        wrapped_key=wrap_data_key(KEK, DATA_KEY),
    )
    return stored, section


def check_wrapped_key(raw: bytes) -> None:
    assert wrap_data_key(KEK, DATA_KEY) == raw
    assert unwrap_data_key(KEK, raw, "k1") == DATA_KEY


def check_aad(raw: bytes) -> None:
    assert chunk_aad(IDENTITY, 0, 1, 0x02, 96) == raw
    assert chunk_nonce(0, 1) == bytes(11) + b"\x01"


def check_section(raw: bytes) -> None:
    _stored, section = _example()
    assert encode_section(section) == raw
    assert decode_section(raw) == section


def check_data(raw: bytes) -> None:
    stored, section = _example()
    assert stored == raw
    chunk_map = ChunkMap(section)
    span = chunk_map.span(182, 224)  # entry 2's frame
    assert (span.first, span.last, span.stored_start, span.stored_end) == (1, 1, 144, 256)
    key = unwrap_data_key(KEK, section.wrapped_key, "k1")
    decoder = ChunkDecoder(chunk_map, IDENTITY, key)
    got = decoder.read(182, 224, raw[span.stored_start : span.stored_end], span.first)
    assert got == bytes(BLOCK[182:224])


KAFKA_UUID = "00112233-4455-6677-8899-aabbccddeeff"
KAFKA_IDENTITY = ObjectIdentity(KAFKA_UUID, 1000, AAD_MAGIC_KAFKA)
KAFKA_LOG = encode_batch(
    [NewRecord(1_700_000_000_000, b"key", b"value-" * 8, ())], base_offset=1000
)


def _kafka_example() -> tuple[bytes, TransformSection]:
    encoder = ChunkEncoder(KAFKA_IDENTITY, chunk_size=64, zstd_level=None, data_key=DATA_KEY)
    stored, rows = encoder.encode_block(0, KAFKA_LOG)
    section = TransformSection(
        chunk_size=64,
        block_lengths=(len(KAFKA_LOG),),
        chunks=tuple(rows),
        encrypted=True,
        key_id="k1",
        wrapped_key=wrap_data_key(KEK, DATA_KEY),
    )
    return stored, section


def check_kafka_aad(raw: bytes) -> None:
    assert uuid_to_kafka(uuid.UUID(KAFKA_UUID)) == "ABEiM0RVZneImaq7zN3u_w"
    assert len(KAFKA_LOG) == 119
    assert chunk_aad(KAFKA_IDENTITY, 0, 1, 0x02, 55) == raw


def check_kafka_table(raw: bytes) -> None:
    stored, section = _kafka_example()
    assert encode_segment_table(KAFKA_UUID, 1000, section) == raw
    assert decode_segment_table(raw, KAFKA_UUID, 1000) == section
    table = read_segment_table(raw)  # objects inspect: decoded without knowing the segment
    assert (table.version, table.segment_uuid, table.base_offset) == (1, KAFKA_UUID, 1000)
    assert (table.section, table.length, table.crc32c) == (section, 113, 0x8AEB04D6)
    decoder = ChunkDecoder(ChunkMap(section), KAFKA_IDENTITY, DATA_KEY)
    assert b"".join(decoder.decode_run(0, stored)) == KAFKA_LOG


TRANSFORM_CHECKS: dict[str, Callable[[Any], None]] = {
    "kafka-aad-chunk1": check_kafka_aad,
    "kafka-chunk-table-example": check_kafka_table,
    "transform-wrapped-key": check_wrapped_key,
    "transform-aad-block0-chunk1": check_aad,
    "transform-section-example": check_section,
    "transform-data-example": check_data,
}
