"""Two replicas of one partition, rolled at other offsets, uploaded into one home (issue 34,
item 1): the segment that straddles the watermark is copied from the watermark on (its
effective start recorded), reads and scans return every offset once, and a gap is recorded
only for offsets that no local segment holds."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from offloader.api import KafkaTier
from offloader.kafka.scan import ScanFilter, plan_scan, read_task
from offloader.kafka.segments import IndexCache
from offloader.metadata.kafka_base import COPY_FINISHED
from tests.kafka.logdir import PartitionLayout, write_partition

TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAA"


def _replica(root: Path, segment_bytes: int, records: int, start: int = 0) -> PartitionLayout:
    return write_partition(
        root,
        "rep",
        0,
        records=records,
        segment_bytes=segment_bytes,
        codecs=(0,),
        topic_id=TOPIC_ID,
        start_offset=start,
    )


def _straddling(a: PartitionLayout, b: PartitionLayout) -> tuple[int, int]:
    """B's closed segment holding A's watermark + 1 below its base (the test needs one)."""
    watermark = a.segments[-2][1]
    for base, end in b.segments[:-1]:
        if base <= watermark < end:
            return base, end
    raise AssertionError("the layouts have no straddling segment")


def test_straddling_segment_is_copied_from_the_watermark(
    tmp_path: Path, make_tier: Callable[..., KafkaTier]
) -> None:
    a = _replica(tmp_path / "A", 12_000, 1000)
    b = _replica(tmp_path / "B", 20_000, 1600)
    base, end = _straddling(a, b)
    tier = make_tier()
    assert tier.upload(tmp_path / "A").ok
    watermark = a.segments[-2][1]
    report = tier.upload(tmp_path / "B")
    assert report.ok and not report.of("gap")
    assert tier.ctx.meta.list_gaps() == []
    copies = tier.ctx.meta.list_segments("rep", 0, states=[COPY_FINISHED])
    straddler = [c for c in copies if c.base_offset == base and c.end_offset == end]
    assert len(straddler) == 1 and straddler[0].start_offset == watermark + 1
    assert tier.ctx.meta.get_partition("rep", 0).watermark == b.segments[-2][1]  # type: ignore[union-attr]
    # a second pass has nothing left to do and records no gap either
    again = tier.upload(tmp_path / "B")
    assert not again.of("uploaded") and not again.of("gap")
    # every offset once, in order, from the remote tier: by offset ...
    last = b.segments[-2][1]
    offsets = [r.offset for r in tier.read("rep", 0, from_offset=0)]
    assert offsets == list(range(last + 1))
    # ... from inside the straddling segment (the index starts the read below its start) ...
    around = [r.offset for r in tier.read("rep", 0, from_offset=watermark - 2, count=6)]
    assert around == list(range(watermark - 2, watermark + 4))
    # ... and by time (the time index may point below the effective start)
    by_time = [r.offset for r in tier.read("rep", 0, from_timestamp=0)]
    assert by_time == list(range(last + 1))
    # the Spark source's plan reads each offset once too
    cache = IndexCache(tier.ctx.store)
    tasks = plan_scan(tier.ctx, cache, ["rep"], ScanFilter(), split_bytes=4096)
    scanned = sorted(r.offset for t in tasks for r in read_task(tier.ctx.store, t))
    assert scanned == list(range(last + 1))
    status = tier.status("rep")[0]
    assert (status.remote_start, status.remote_end) == (0, last)


def test_a_gap_only_for_offsets_no_local_segment_holds(
    tmp_path: Path, make_tier: Callable[..., KafkaTier]
) -> None:
    a = _replica(tmp_path / "A", 12_000, 500)
    watermark = a.segments[-2][1]
    # replica B's log starts well past A's watermark: those offsets are gone from B's log dir
    b = _replica(tmp_path / "B", 12_000, 600, start=watermark + 200)
    tier = make_tier()
    assert tier.upload(tmp_path / "A").ok
    assert tier.upload(tmp_path / "B").ok
    gaps = [(g.start_offset, g.end_offset) for g in tier.ctx.meta.list_gaps("rep")]
    assert gaps == [(watermark + 1, watermark + 199)]
    tier.upload(tmp_path / "B")
    assert len(tier.ctx.meta.list_gaps("rep")) == 1  # recorded once
    offsets = [r.offset for r in tier.read("rep", 0, from_offset=0)]
    assert offsets == [*range(watermark + 1), *range(watermark + 200, b.segments[-2][1] + 1)]
