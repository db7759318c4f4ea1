"""formats.kafka: .index / .timeindex (Kafka's 4096-byte rule, lookups, corruption) and names."""

from __future__ import annotations

import struct
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from formats.kafka.batch import iter_batch_headers
from formats.kafka.encode import NewRecord, encode_batch
from formats.kafka.errors import KafkaFormatError, KafkaIndexError, KafkaNameError
from formats.kafka.index import (
    build_indexes,
    decode_offset_index,
    decode_time_index,
)
from formats.kafka.names import (
    encode_leader_epoch_checkpoint,
    encode_partition_metadata,
    kafka_uuid_to_uuid,
    parse_leader_epoch_checkpoint,
    parse_partition_dir,
    parse_partition_metadata,
    parse_remote_key,
    parse_segment_file_name,
    remote_key,
    segment_file_name,
    segment_leader_epochs,
    uuid_to_kafka,
)


def _segment(batches: int, per_batch: int, base: int = 100) -> bytes:
    out = bytearray()
    offset = base
    for _ in range(batches):
        rows = [NewRecord(1000 + offset + i, None, bytes(500)) for i in range(per_batch)]
        out += encode_batch(rows, base_offset=offset)
        offset += per_batch
    return bytes(out)


def test_index_rule_one_entry_per_4096_bytes() -> None:
    data = _segment(20, 3)  # batches of ~1.6 KiB
    headers = list(iter_batch_headers(data))
    size = headers[0].size
    offsets, times = build_indexes(headers, 100)
    # an entry goes before the batch that follows more than 4096 bytes since the last entry
    expected_positions = []
    last = 0
    for h in headers:
        if h.position - last > 4096:
            expected_positions.append(h.position)
            last = h.position
    assert list(offsets.positions) == expected_positions
    assert offsets.positions[0] == 3 * size
    by_position = {h.position: h for h in headers}
    assert [by_position[p].last_offset for p in offsets.positions] == list(offsets.offsets)
    # time entries: the max timestamp so far at each offset entry, then the segment's max
    assert times.timestamps[-1] == headers[-1].max_timestamp
    assert times.offsets[-1] == headers[-1].last_offset
    decoded = decode_offset_index(offsets.encode(), 100)
    assert decoded == offsets
    assert decode_time_index(times.encode(), 100) == times


def test_lookups_floor_and_defaults() -> None:
    data = _segment(20, 3)
    offsets, times = build_indexes(list(iter_batch_headers(data)), 100)
    assert offsets.lookup(99) == (100, 0)
    assert offsets.lowest_offset_at(99) == offsets.lowest_offset_at(offsets.offsets[0]) == 100
    assert offsets.lowest_offset_at(offsets.offsets[1] + 1) == offsets.offsets[0] + 1
    # end_bound: a position at or past the end of the batch holding the offset
    headers = list(iter_batch_headers(data))
    for h in headers:
        for offset in (h.base_offset, h.last_offset):
            bound = offsets.end_bound(offset)
            assert bound is None or bound >= h.end
    first = offsets.offsets[0]
    assert offsets.lookup(first) == (first, offsets.positions[0])
    assert offsets.lookup(first + 1) == (first, offsets.positions[0])
    assert times.lookup(0) == (-1, 100)
    assert times.lookup(times.timestamps[1]) == (times.timestamps[1], times.offsets[1])


def test_preallocated_zero_tail_is_ignored() -> None:
    entries = struct.pack(">ii", 5, 4100) + struct.pack(">ii", 9, 8300)
    index = decode_offset_index(entries + bytes(8 * 100), 0)
    assert index.offsets == (5, 9)


@pytest.mark.parametrize(
    "data",
    [
        b"\x00" * 7,
        struct.pack(">ii", 5, 100) + struct.pack(">ii", 4, 200),
        struct.pack(">ii", 5, 100) + struct.pack(">ii", 6, 50),
        struct.pack(">ii", -1, 100),
    ],
)
def test_bad_offset_index(data: bytes) -> None:
    with pytest.raises(KafkaIndexError):
        decode_offset_index(data, 0, source="x.index")


def test_bad_time_index() -> None:
    with pytest.raises(KafkaIndexError):
        decode_time_index(struct.pack(">qi", 10, 1) + struct.pack(">qi", 9, 2), 0)
    with pytest.raises(KafkaIndexError):
        decode_time_index(b"\x01" * 13, 0)


def test_segment_file_names() -> None:
    assert segment_file_name(42, "log") == "00000000000000000042.log"
    assert segment_file_name(42, "index", deleted=True) == "00000000000000000042.index.deleted"
    parsed = parse_segment_file_name("00000000000000000042.timeindex.deleted")
    assert (parsed.base_offset, parsed.kind, parsed.deleted) == (42, "timeindex", True)
    for bad in ("42.log", "00000000000000000042.logx", "00000000000000000042.log.cleaned"):
        with pytest.raises(KafkaNameError):
            parse_segment_file_name(bad)
    assert parse_partition_dir("my-topic-12") == ("my-topic", 12)
    with pytest.raises(KafkaNameError):
        parse_partition_dir("orders-0.0123456789abcdef-delete")


def test_checkpoint_and_metadata_files() -> None:
    pairs = ((0, 0), (3, 150), (4, 300))
    assert parse_leader_epoch_checkpoint(encode_leader_epoch_checkpoint(pairs)) == pairs
    assert segment_leader_epochs(pairs, 100, 200) == {0: 100, 3: 150}
    assert segment_leader_epochs(pairs, 300, 400) == {4: 300}
    with pytest.raises(KafkaFormatError):
        parse_leader_epoch_checkpoint(b"0\n3\n0 0\n")
    topic_id = uuid_to_kafka(uuid.uuid4())
    assert parse_partition_metadata(encode_partition_metadata(topic_id)) == topic_id
    with pytest.raises(KafkaFormatError):
        parse_partition_metadata(b"version: 0\ntopic_id: nope\n")


@given(st.uuids(), st.integers(0, 10**19), st.integers(0, 1000), st.integers(0, 8))
def test_remote_keys_round_trip(seg: uuid.UUID, base: int, partition: int, hashed: int) -> None:
    topic_id, segment_id = uuid_to_kafka(uuid.uuid5(seg, "t")), uuid_to_kafka(seg)
    assert kafka_uuid_to_uuid(segment_id) == seg
    key = remote_key(
        "tier/kafka",
        "orders.v1",
        topic_id,
        partition,
        base,
        segment_id,
        "log",
        hash_prefix_len=hashed,
    )
    parsed = parse_remote_key(key)
    assert (parsed.topic, parsed.topic_id, parsed.partition, parsed.base_offset) == (
        "orders.v1",
        topic_id,
        partition,
        base,
    )
    assert (parsed.segment_id, parsed.suffix) == (segment_id, "log")
    assert key.endswith(f"orders.v1-{topic_id}/{partition}/{base:020d}-{segment_id}.log")
