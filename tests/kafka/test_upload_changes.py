"""A segment Kafka truncates or rewrites while it uploads (its log truncation after a leader
change): the attempt fails for that segment alone with a clear detail, is cleaned up (no
object, no open multipart upload, the record DELETE_SEGMENT_FINISHED), never ends
COPY_SEGMENT_FINISHED, and the next pass copies the segment as it is then. Segments are read
with positioned reads, never mmap: a shrinking file is an error, not a SIGBUS."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from formats.kafka.batch import iter_batch_headers, iter_records
from offloader.api import KafkaSettings, KafkaTier
from offloader.errors import SegmentChangedError
from offloader.kafka.segment_file import SegmentFile
from offloader.metadata.kafka_base import COPY_FINISHED, DELETE_FINISHED
from offloader.store.base import Buffer, ObjectStore, UploadedPart
from offloader.store.faulty import FaultyObjectStore
from tests.kafka.logdir import PartitionLayout, write_partition

#: three parts per segment, one at a time, so that a change lands between two part reads
ONE_AT_A_TIME = KafkaSettings(
    part_size=4096, concurrency=1, enforce_min_part_size=False, stale_attempt_ms=0
)


class _BetweenParts(FaultyObjectStore):
    """Runs ``action`` once, just before part ``number`` of the first ``.log`` is sent (the
    parts before it were read already, the ones after are not)."""

    def __init__(self, inner: ObjectStore, number: int, action: Callable[[], None]) -> None:
        super().__init__(inner)
        self.number = number
        self.action: Callable[[], None] | None = action

    def upload_part(
        self, key: str, upload_id: str, part_number: int, data: Buffer, crc32c: int
    ) -> UploadedPart:
        if part_number == self.number and self.action is not None:
            action, self.action = self.action, None
            action()
        return super().upload_part(key, upload_id, part_number, data, crc32c)


def _first_log(layout: PartitionLayout) -> Path:
    return layout.path / f"{layout.segments[0][0]:020d}.log"


def _two_partitions(tmp_path: Path) -> tuple[Path, list[PartitionLayout]]:
    root = tmp_path / "logs"
    return root, [write_partition(root, "t", p, records=300, codecs=(0,)) for p in (0, 1)]


def _assert_cleaned(tier: KafkaTier, topic: str, partition: int) -> None:
    records = tier.ctx.meta.list_segments(topic, partition)
    assert [r.state for r in records] == [DELETE_FINISHED]
    assert not [o for o in tier.ctx.store.list(f"kafka/{topic}-") if f"/{partition}/" in o.key]
    assert tier.ctx.store.list_multipart_uploads("kafka/") == []


def test_a_segment_truncated_while_it_uploads_fails_alone_and_the_next_pass_copies_it(
    tmp_path: Path, make_tier: Callable[..., KafkaTier]
) -> None:
    root, (first, second) = _two_partitions(tmp_path)
    path = _first_log(first)
    batches = list(iter_batch_headers(path.read_bytes()))
    cut = next(h.position for h in batches if h.position > 4096)  # inside part 2
    tier = make_tier(settings=ONE_AT_A_TIME)
    real = tier.ctx.store
    tier.ctx.store = _BetweenParts(real, 2, lambda: os.truncate(path, cut))
    report = tier.upload(root)
    failed = report.of("failed")
    assert [(s.partition, s.base_offset) for s in failed] == [(0, 0)]
    assert "truncated while it was copied" in (failed[0].detail or "")
    _assert_cleaned(tier, "t", 0)
    # the other partition was copied in the same pass
    assert len(report.of("uploaded")) == len(second.segments) - 1
    assert "truncated" in (tier.ctx.meta.get_partition("t", 0).last_error or "")  # type: ignore[union-attr]
    # the next pass copies the segment as Kafka left it, and reads give exactly its records
    tier.ctx.store = real
    again = tier.upload(root)
    assert again.ok and len(again.of("uploaded")) == len(first.segments) - 1
    kept = [r.offset for h, r in iter_records(path.read_bytes()) if not h.is_control]
    got = [r.offset for r in tier.read("t", 0, from_offset=0, count=len(kept))]
    assert (
        got == kept and got[-1] == batches[[h.position for h in batches].index(cut) - 1].last_offset
    )


def test_a_segment_modified_in_place_while_it_uploads_never_finishes(
    tmp_path: Path, make_tier: Callable[..., KafkaTier]
) -> None:
    root, (first, _) = _two_partitions(tmp_path)
    path = _first_log(first)
    size = path.stat().st_size

    def rewrite(position: int) -> Callable[[], None]:
        def action() -> None:
            before = path.stat().st_mtime_ns
            with path.open("r+b") as f:  # same size, other bytes
                f.seek(position)
                byte = f.read(1)
                f.seek(position)
                f.write(bytes([byte[0] ^ 0xFF]))
            if path.stat().st_mtime_ns == before:  # a write within the clock's tick
                os.utime(path, ns=(before, before + 1_000_000))

        return action

    tier = make_tier(settings=ONE_AT_A_TIME)
    real = tier.ctx.store
    original = path.read_bytes()
    # in a part not read yet: the bytes uploaded are not the bytes checked
    tier.ctx.store = _BetweenParts(real, 2, rewrite(size - 10))
    report = tier.upload(root, topics="t")
    assert [s.kind for s in report.segments if s.partition == 0] == ["failed"]
    assert "modified while it was copied" in (report.of("failed")[0].detail or "")
    _assert_cleaned(tier, "t", 0)
    assert not tier.ctx.meta.list_segments("t", 0, states=[COPY_FINISHED])
    # in a part already sent: its modification time tells
    path.write_bytes(original)
    tier.ctx.store = _BetweenParts(real, 2, rewrite(10))
    stamp = path.stat().st_mtime_ns
    report = tier.upload(root, topics="t")
    assert path.stat().st_mtime_ns != stamp
    assert [s.kind for s in report.segments if s.partition == 0] == ["failed"]
    assert "modified while it was copied" in (report.of("failed")[0].detail or "")
    assert not tier.ctx.meta.list_segments("t", 0, states=[COPY_FINISHED])


def test_segment_file_reads_are_errors_once_the_file_shrinks(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(bytes(range(256)) * 64)
    with path.open("rb") as handle:
        file = SegmentFile(handle, str(path))
        assert file.read(100, 50) == (bytes(range(256)) * 64)[100:150]
        os.truncate(path, 1000)
        with pytest.raises(SegmentChangedError, match="truncated while it was copied"):
            file.read(900, 200)
        with pytest.raises(SegmentChangedError, match="truncated while it was copied"):
            file.check_unchanged()
