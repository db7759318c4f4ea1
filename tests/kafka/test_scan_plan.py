"""The kafka-segments scan plan without Spark: segments pruned by partition, offset and time,
tasks cut at index positions and starting at the first wanted offset, rows filtered exactly."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from formats.kafka.batch import iter_batch_headers, iter_records
from offloader.api import KafkaTier
from offloader.kafka.scan import ScanFilter, plan_scan, read_task
from tests.kafka.logdir import write_partition


def test_plan_prunes_splits_and_filters(
    tmp_path: Path, make_tier: Callable[..., KafkaTier]
) -> None:
    root = tmp_path / "logs"
    write_partition(root, "orders", 0, records=600)
    write_partition(root, "orders", 1, records=300)
    tier = make_tier()
    tier.upload(root)
    ctx, cache = tier.ctx, tier.indexes
    segments = ctx.meta.list_segments()
    whole = plan_scan(ctx, cache, None, ScanFilter())
    assert len(whole) == len(segments)
    rows = [r for t in whole for r in read_task(ctx.store, t)]
    assert len({(r.partition, r.offset) for r in rows}) == len(rows)
    # split at index positions (batch boundaries): the same rows, more tasks
    split = plan_scan(ctx, cache, ["orders"], ScanFilter(), split_bytes=5000)
    assert len(split) > len(whole)
    for task in split:
        data = ctx.store.get_range(task.key, task.start, task.end).data
        assert sum(h.size for h in iter_batch_headers(data)) == task.end - task.start
    assert sorted(
        (r.partition, r.offset) for t in split for r in read_task(ctx.store, t)
    ) == sorted((r.partition, r.offset) for r in rows)
    # partition and offset pruning, and a start at the index position of the first offset
    target = ctx.meta.list_segments("orders", 0)[1].base_offset + 100
    flt = ScanFilter().and_("partition", "=", 0).and_("offset", ">=", target)
    tasks = plan_scan(ctx, cache, None, flt.and_("offset", "<", target + 20))
    assert len(tasks) == 1 and tasks[0].partition == 0 and tasks[0].start > 0
    assert [r.offset for r in read_task(ctx.store, tasks[0])] == list(range(target, target + 20))
    assert plan_scan(ctx, cache, None, ScanFilter().and_("partition", "in", [7])) == []
    assert plan_scan(ctx, cache, ["clicks"], ScanFilter()) == []
    # time pruning drops segments whose max timestamp is before the bound
    newest = max(s.max_timestamp for s in segments)
    late = plan_scan(ctx, cache, None, ScanFilter().and_("timestamp", ">=", newest))
    assert 1 <= len(late) < len(whole)
    assert all(r.timestamp >= newest for t in late for r in read_task(ctx.store, t))


def test_a_time_bound_starts_the_task_at_the_batch_the_timeindex_locates(
    tmp_path: Path, make_tier: Callable[..., KafkaTier]
) -> None:
    root = tmp_path / "logs"
    layout = write_partition(root, "orders", 0, records=600)
    tier = make_tier()
    tier.upload(root)
    ctx, cache = tier.ctx, tier.indexes
    segments = ctx.meta.list_segments("orders", 0)
    seg = segments[1]
    times = cache.time_index(seg)
    assert len(times.timestamps) >= 2  # the segment has time entries past its start
    log = (layout.path / f"{seg.base_offset:020d}.log").read_bytes()
    records = [r for h, r in iter_records(log) if not h.is_control]
    since = records[-3].timestamp  # near the segment's end
    tasks = plan_scan(ctx, cache, None, ScanFilter().and_("timestamp", ">=", since))
    first = next(t for t in tasks if t.base_offset == seg.base_offset)
    assert first.start > 0  # the .timeindex and .index located the bytes
    # the batch at the start position holds no record at or after the bound before it
    skipped = log[: first.start]
    assert all(r.timestamp < since for _, r in iter_records(skipped))
    got = sorted((r.offset, r.timestamp) for t in tasks for r in read_task(ctx.store, t))
    want = []
    for s in segments:
        data = (layout.path / f"{s.base_offset:020d}.log").read_bytes()
        want += [(r.offset, r.timestamp) for h, r in iter_records(data) if not h.is_control]
    assert got == sorted(w for w in want if w[1] >= since)
    # a bound past the segment's max timestamp prunes it
    late = plan_scan(ctx, cache, None, ScanFilter().and_("timestamp", ">", records[-1].timestamp))
    assert all(t.base_offset != seg.base_offset for t in late)  # pruned by max timestamp
