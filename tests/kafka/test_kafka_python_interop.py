"""Our decoder reads what kafka-python's builder wrote; kafka-python reads what we write."""

from __future__ import annotations

import struct

import pytest
from kafka.record.memory_records import MemoryRecords, MemoryRecordsBuilder

from formats.kafka.batch import CONTROL_COMMIT, decode_records, iter_batch_headers, iter_records
from formats.kafka.encode import NewRecord, control_record, encode_batch
from formats.kafka.index import decode_offset_index, decode_time_index
from tests.kafka.logdir import kafka_python_batch, write_partition

ROWS = [
    (
        1_700_000_000_000 + i * 7,
        None if i % 4 == 0 else f"key-{i}".encode(),
        None if i % 9 == 0 else (b"compressible value %d " % i) * 10,
        [("trace", b"abc"), ("empty", None)] if i % 3 == 0 else [],
    )
    for i in range(40)
]


@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])
def test_we_read_kafka_python_batches(codec: int) -> None:
    data = kafka_python_batch(5000, ROWS, codec=codec, leader_epoch=3)
    (header,) = list(iter_batch_headers(data, source="kp.log"))
    assert header.compression == codec  # the codec was kept (compressible data)
    assert (header.base_offset, header.partition_leader_epoch) == (5000, 3)
    decoded = decode_records(data, header)
    assert [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in decoded] == [
        (5000 + i, ts, k, v, h) for i, (ts, k, v, h) in enumerate(ROWS)
    ]


@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])
def test_kafka_python_reads_our_batches(codec: int) -> None:
    rows = [NewRecord(ts, k, v, tuple(h)) for ts, k, v, h in ROWS]
    data = encode_batch(rows, base_offset=77, codec=codec, leader_epoch=2)
    data += encode_batch(rows[:3], base_offset=77 + len(rows), codec=codec, leader_epoch=2)
    memory = MemoryRecords(data)
    seen = []
    while (batch := memory.next_batch()) is not None:
        assert batch.validate_crc()
        assert batch.compression_type == codec
        seen += [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in batch]
    expected = [(77 + i, ts, k, v, h) for i, (ts, k, v, h) in enumerate(ROWS)]
    expected += [(117 + i, ts, k, v, h) for i, (ts, k, v, h) in enumerate(ROWS[:3])]
    assert seen == expected


def test_a_whole_partition_from_kafka_python(tmp_path) -> None:  # type: ignore[no-untyped-def]
    layout = write_partition(tmp_path, "orders", 0, records=500, transactions=True)
    offsets, markers = [], []
    for base, last in layout.segments:
        log = (layout.path / f"{base:020d}.log").read_bytes()
        index = decode_offset_index((layout.path / f"{base:020d}.index").read_bytes(), base)
        times = decode_time_index((layout.path / f"{base:020d}.timeindex").read_bytes(), base)
        seg = [(h, r) for h, r in iter_records(log, source=f"{base}.log")]
        offsets += [r.offset for h, r in seg if not h.is_control]
        markers += [r.offset for h, r in seg if h.is_control]
        assert seg[-1][1].offset == last
        assert index.offsets and times.timestamps  # several 4 KiB strides per segment
        # kafka-python agrees on every batch of the segment
        memory = MemoryRecords(log)
        count = 0
        while (batch := memory.next_batch()) is not None:
            assert batch.validate_crc()
            count += 1
        assert count == len(list(iter_batch_headers(log)))
    # data records and commit markers cover the partition's offsets without a gap
    assert markers and sorted(offsets + markers) == list(range(layout.next_offset))


@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])
def test_we_read_kafka_python_transactional_batches(codec: int) -> None:
    builder = MemoryRecordsBuilder(
        magic=2,
        compression_type=codec,
        batch_size=1 << 24,
        offset=0,
        transactional=True,
        producer_id=4242,
        producer_epoch=3,
        base_sequence=17,
    )
    for ts, key, value, headers in ROWS:
        builder.append(ts, key=key, value=value, headers=headers)
    builder.close()
    data = bytearray(builder.buffer())
    struct.pack_into(">q", data, 0, 900)  # placed by the broker: outside the CRC
    (header,) = list(iter_batch_headers(data, source="txn.log"))
    assert header.is_transactional and not header.is_control
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (4242, 3, 17)
    assert header.compression == codec
    assert [(r.offset, r.key, r.value) for r in decode_records(data, header)] == [
        (900 + i, k, v) for i, (_, k, v, _) in enumerate(ROWS)
    ]


def test_kafka_python_reads_our_transactional_and_control_batches() -> None:
    rows = [NewRecord(ts, k, v, tuple(h)) for ts, k, v, h in ROWS[:5]]
    data = encode_batch(
        rows, base_offset=10, producer_id=7, producer_epoch=2, base_sequence=0, transactional=True
    )
    data += encode_batch(
        [control_record(CONTROL_COMMIT, coordinator_epoch=3, timestamp=6)],
        base_offset=15,
        producer_id=7,
        producer_epoch=2,
        transactional=True,
        control=True,
    )
    memory = MemoryRecords(data)
    txn, commit = memory.next_batch(), memory.next_batch()
    assert memory.next_batch() is None
    assert txn is not None and commit is not None
    assert txn.validate_crc() and commit.validate_crc()
    assert txn.is_transactional and not txn.is_control_batch
    assert (txn.producer_id, txn.producer_epoch, txn.base_sequence) == (7, 2, 0)
    assert [r.offset for r in txn] == list(range(10, 15))
    assert commit.is_control_batch and commit.is_transactional and commit.producer_id == 7
    assert commit.base_offset == 15 and commit.records_count == 1
