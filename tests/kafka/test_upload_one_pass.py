"""The segment upload without a pass before it (issue 40): the end offset from the ``.index``'s
last entry and a few header reads (from the start when the index misleads), the max timestamp
of every batch checked during the copy, parts read into at most ``concurrency`` reused
buffers handed to the store as they are (no copy), and the whole-file CRC32C combined from the
parts'."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path

import crc32c

from formats.kafka.batch import iter_batch_headers
from formats.kafka.encode import NewRecord, encode_batch
from formats.kafka.index import build_indexes
from formats.kafka.names import encode_partition_metadata, segment_file_name, uuid_to_kafka
from offloader.api import KafkaSettings, KafkaTier
from offloader.kafka.segment_file import SegmentFile, index_hint
from offloader.metadata.kafka_base import COPY_FINISHED
from offloader.store.base import Buffer, UploadedPart
from offloader.store.faulty import FaultyObjectStore

#: a peak timestamp in an early batch: the last batch's is not the segment's maximum
PEAK = 1_900_000_000_000


def _partition(root: Path, batches: int = 40, per_batch: int = 8) -> Path:
    """``t-0`` with one closed segment (``batches`` batches, the third one's timestamps the
    highest) and an active one; returns the closed ``.log``."""
    directory = root / "t-0"
    directory.mkdir(parents=True)
    (directory / "partition.metadata").write_bytes(
        encode_partition_metadata(uuid_to_kafka(uuid.uuid4()))
    )
    data = b""
    for b in range(batches):
        ts = PEAK if b == 2 else 1_700_000_000_000 + b
        rows = [NewRecord(ts, None, bytes([b]) * 300) for _ in range(per_batch)]
        data += encode_batch(rows, base_offset=b * per_batch)
    log = directory / segment_file_name(0, "log")
    log.write_bytes(data)
    offsets, times = build_indexes(iter_batch_headers(data), 0)
    (directory / segment_file_name(0, "index")).write_bytes(offsets.encode())
    (directory / segment_file_name(0, "timeindex")).write_bytes(times.encode())
    end = batches * per_batch
    (directory / segment_file_name(end, "log")).write_bytes(
        encode_batch([NewRecord(1, None, b"x")], base_offset=end)
    )
    return log


def test_the_last_batch_from_the_index_and_without_it(tmp_path: Path) -> None:
    log = _partition(tmp_path)
    headers = list(iter_batch_headers(log.read_bytes()))
    with log.open("rb") as handle, log.with_suffix(".index").open("rb") as index:
        file = SegmentFile(handle, str(log))
        hint = index_hint(index, file.size)
        assert hint > 0 and hint in {h.position for h in headers}
        assert file.last_batch(hint) == headers[-1]
        assert file.last_batch(0) == headers[-1]
        # a hint inside a batch (a stale index) is not followed blindly
        assert file.last_batch(headers[3].position + 7) == headers[-1]
        assert index_hint(None, file.size) == 0


class _Recording(FaultyObjectStore):
    """Keeps every part body it was given (so that no two are the same object by accident)."""

    bodies: list[Buffer]

    def upload_part(
        self, key: str, upload_id: str, part_number: int, data: Buffer, crc32c: int
    ) -> UploadedPart:
        self.bodies.append(data)
        return super().upload_part(key, upload_id, part_number, data, crc32c)


def test_parts_in_reused_buffers_the_checked_max_timestamp_and_the_combined_crc(
    tmp_path: Path, make_tier: Callable[..., KafkaTier]
) -> None:
    log = _partition(tmp_path / "logs")
    settings = KafkaSettings(
        part_size=4096, concurrency=2, enforce_min_part_size=False, stale_attempt_ms=0
    )
    tier = make_tier(settings=settings)
    store = _Recording(tier.ctx.store)
    store.bodies = []
    tier.ctx.store = store
    report = tier.upload(tmp_path / "logs")
    assert report.ok and len(report.of("uploaded")) == 1
    data = log.read_bytes()
    parts = -(-len(data) // 4096)
    assert len(store.bodies) == parts > 6
    # handed as they were read: bytearrays, no copy; at most concurrency of them, reused
    # (the last, shorter part has a buffer of its own)
    assert all(type(b) is bytearray for b in store.bodies)
    assert len({id(b) for b in store.bodies}) <= settings.concurrency + 1
    (record,) = tier.ctx.meta.list_segments("t", 0, states=[COPY_FINISHED])
    assert record.max_timestamp == PEAK  # every batch's, not the last one's
    assert record.end_offset == max(h.last_offset for h in iter_batch_headers(data))
    assert record.log_crc32c == crc32c.crc32c(data)
    assert tier.ctx.store.get(record.keys["log"]).data == data
