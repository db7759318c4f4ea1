"""Test data: Kafka record batches built by kafka-python's own builder, and log directories.

:func:`kafka_python_batch` makes one batch with kafka-python's ``MemoryRecordsBuilder`` (the
client's encoder, not ours) and patches the base offset and leader epoch as a broker does.
:func:`write_log_dir` lays out a realistic broker log directory: several topics and partitions,
segments rolled at ``segment_bytes`` with ``.index`` / ``.timeindex`` files written by Kafka's
rule, producer snapshots, ``leader-epoch-checkpoint`` and ``partition.metadata``, an active
(newest) segment, optionally a segment staged for deletion (``.deleted``) and transactional and
control batches (made by our encoder: kafka-python cannot write control batches).
"""

from __future__ import annotations

import hashlib
import struct
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from kafka.record.memory_records import MemoryRecordsBuilder

from formats.kafka.batch import CONTROL_COMMIT, iter_batch_headers
from formats.kafka.encode import NewRecord, control_record, encode_batch
from formats.kafka.index import build_indexes
from formats.kafka.names import (
    encode_leader_epoch_checkpoint,
    encode_partition_metadata,
    partition_dir_name,
    segment_file_name,
    uuid_to_kafka,
)

BASE_TS = 1_700_000_000_000


def record_value(topic: str, partition: int, offset: int, pad: int = 0) -> bytes:
    """A compressible value that names its record (so codecs are kept by kafka-python);
    ``pad`` more bytes make it bigger."""
    noise = hashlib.sha256(f"{topic}/{partition}/{offset}".encode()).hexdigest()
    return (f"{topic}/{partition}/{offset}:" + "payload-" * 6 + noise).encode() + noise[
        :16
    ].encode() * (pad // 16)


def kafka_python_batch(
    base_offset: int,
    records: list[tuple[int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]],
    *,
    codec: int,
    leader_epoch: int = 0,
) -> bytes:
    """One batch written by kafka-python, placed at ``base_offset`` as a broker would."""
    builder = MemoryRecordsBuilder(magic=2, compression_type=codec, batch_size=1 << 24, offset=0)
    for ts, key, value, headers in records:
        builder.append(ts, key=key, value=value, headers=headers)
    builder.close()
    buf = bytearray(builder.buffer())
    struct.pack_into(">q", buf, 0, base_offset)
    struct.pack_into(">i", buf, 12, leader_epoch)
    return bytes(buf)


@dataclass
class PartitionLayout:
    topic: str
    partition: int
    topic_id: str
    path: Path
    #: (base offset, last offset) of each segment, oldest first; the last one is active
    segments: list[tuple[int, int]] = field(default_factory=list)
    deleted: list[int] = field(default_factory=list)
    next_offset: int = 0


def _write_segment(directory: Path, base: int, data: bytes, *, deleted: bool = False) -> None:
    headers = list(iter_batch_headers(data))
    offset_index, time_index = build_indexes(headers, base)
    files = {
        "log": data,
        "index": offset_index.encode(),
        "timeindex": time_index.encode(),
        "snapshot": b"producer-state:" + str(base).encode(),
    }
    for kind, payload in files.items():
        (directory / segment_file_name(base, kind, deleted=deleted)).write_bytes(payload)


def write_partition(
    root: Path,
    topic: str,
    partition: int,
    *,
    records: int,
    per_batch: int = 10,
    segment_bytes: int = 12 * 1024,
    codecs: tuple[int, ...] = (0, 1, 2, 3, 4),
    transactions: bool = False,
    delete_first: bool = False,
    topic_id: str | None = None,
    start_offset: int = 0,
    pad: int = 0,
    value_of: Callable[[str, int, int], bytes] | None = None,
) -> PartitionLayout:
    """One partition directory (see the module docstring); the newest segment is active.
    ``value_of(topic, partition, offset)``: the records' values (default :func:`record_value`;
    every 13th record is a tombstone either way)."""
    make = value_of or (lambda t, p, o: record_value(t, p, o, pad))
    directory = root / partition_dir_name(topic, partition)
    directory.mkdir(parents=True)
    topic_id = topic_id or uuid_to_kafka(uuid.uuid5(uuid.NAMESPACE_DNS, topic))
    layout = PartitionLayout(topic, partition, topic_id, directory)
    (directory / "partition.metadata").write_bytes(encode_partition_metadata(topic_id))
    offset = start_offset
    seg_base, seg_data = offset, bytearray()
    batch_no = 0
    epochs: list[tuple[int, int]] = [(0, start_offset)]
    while offset < start_offset + records:
        epoch = len(epochs) - 1
        if batch_no and batch_no % 7 == 0:  # a leader change now and then
            epochs.append((epoch + 1, offset))
            epoch += 1
        count = min(per_batch, start_offset + records - offset)
        rows = [
            (
                BASE_TS + (offset + i) * 10,
                None if (offset + i) % 11 == 0 else f"key-{offset + i}".encode(),
                None if (offset + i) % 13 == 0 else make(topic, partition, offset + i),
                [("h", b"x"), ("n", None)] if (offset + i) % 3 == 0 else [],
            )
            for i in range(count)
        ]
        codec = codecs[batch_no % len(codecs)]
        if transactions and batch_no % 5 == 4:
            batch = encode_batch(
                [NewRecord(ts, k, v, tuple(h)) for ts, k, v, h in rows],
                base_offset=offset,
                codec=codec,
                leader_epoch=epoch,
                producer_id=42,
                producer_epoch=0,
                base_sequence=offset,
                transactional=True,
            )
            offset += count
            marker = control_record(CONTROL_COMMIT, timestamp=BASE_TS + offset * 10)
            batch += encode_batch(
                [marker],
                base_offset=offset,
                leader_epoch=epoch,
                producer_id=42,
                producer_epoch=0,
                transactional=True,
                control=True,
            )
            offset += 1
        else:
            batch = kafka_python_batch(offset, rows, codec=codec, leader_epoch=epoch)
            offset += count
        seg_data += batch
        batch_no += 1
        if len(seg_data) >= segment_bytes and offset < start_offset + records:
            _write_segment(directory, seg_base, bytes(seg_data))
            layout.segments.append((seg_base, offset - 1))
            seg_base, seg_data = offset, bytearray()
    _write_segment(directory, seg_base, bytes(seg_data))
    layout.segments.append((seg_base, offset - 1))
    layout.next_offset = offset
    (directory / "leader-epoch-checkpoint").write_bytes(
        encode_leader_epoch_checkpoint(tuple(epochs))
    )
    if delete_first and len(layout.segments) > 2:
        base = layout.segments[0][0]
        for kind in ("log", "index", "timeindex", "snapshot"):
            src = directory / segment_file_name(base, kind)
            src.rename(directory / segment_file_name(base, kind, deleted=True))
        layout.deleted.append(base)
    return layout


def write_log_dir(root: Path) -> dict[tuple[str, int], PartitionLayout]:
    """A broker log directory: three topics, five partitions, every codec, transactions, a
    ``.deleted`` segment, and directories Kafka keeps that are not partitions."""
    root.mkdir(parents=True, exist_ok=True)
    layouts = {}
    for topic, partition, kwargs in (
        ("orders", 0, {"records": 600, "transactions": True, "delete_first": True}),
        ("orders", 1, {"records": 300}),
        ("clicks", 0, {"records": 400, "codecs": (4,)}),
        ("clicks", 1, {"records": 50}),
        ("audit.log", 0, {"records": 120, "per_batch": 1}),
    ):
        layouts[(topic, partition)] = write_partition(root, topic, partition, **kwargs)  # type: ignore[arg-type]
    (root / "recovery-point-offset-checkpoint").write_text("0\n0\n")
    (root / "orders-7.0123456789abcdef0123456789abcdef-delete").mkdir()
    return layouts
