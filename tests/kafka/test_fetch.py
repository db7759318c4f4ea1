"""Fetch by offset and by timestamp: remote (index cached, one ranged GET), local, and the
four consumption modes across the tier boundary (no gap, no duplicate)."""

from __future__ import annotations

import os
import random
from collections.abc import Callable
from pathlib import Path

import pytest

from formats.kafka.batch import iter_records
from offloader.api import KafkaTier
from offloader.errors import ConfigError, ObjectNotFound
from offloader.kafka.types import KafkaRecordRow
from offloader.store.faulty import FaultyObjectStore
from tests.kafka.logdir import PartitionLayout, write_partition

Row = tuple[int, int, bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...]]


def _expected(layout: PartitionLayout) -> list[Row]:
    rows: list[Row] = []
    for path in sorted(layout.path.glob("*.log*")):
        for header, r in iter_records(path.read_bytes()):
            if not header.is_control:
                rows.append((r.offset, r.timestamp, r.key, r.value, r.headers))
    return sorted(rows)


def _rows(records: object) -> list[Row]:
    return [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in records]  # type: ignore[attr-defined]


@pytest.fixture()
def uploaded(
    tmp_path: Path, make_tier: Callable[..., KafkaTier]
) -> tuple[KafkaTier, PartitionLayout, Path]:
    root = tmp_path / "logs"
    layout = write_partition(root, "orders", 0, records=700, transactions=True)
    tier = make_tier()
    assert tier.upload(root).ok
    return tier, layout, root


def test_remote_read_from_every_kind_of_offset(
    uploaded: tuple[KafkaTier, PartitionLayout, Path],
) -> None:
    tier, layout, _ = uploaded
    expected = [r for r in _expected(layout) if r[0] <= layout.segments[-2][1]]
    offsets = [r[0] for r in expected]
    rng = random.Random(7)
    starts = [0, offsets[-1], *(b for b, _ in layout.segments[:-1]), *rng.sample(offsets, 25)]
    for start in starts:
        for count in (1, 7, 300):
            got = _rows(tier.read("orders", 0, from_offset=start, count=count))
            first = next(i for i, o in enumerate(offsets) if o >= start)
            assert got == expected[first : first + count], (start, count)
    # everything, in one go, crossing every segment
    assert _rows(tier.read("orders", 0, from_offset=0)) == expected


def test_remote_rows_are_whole_record_rows(
    uploaded: tuple[KafkaTier, PartitionLayout, Path],
) -> None:
    """The rows the C loop builds (rows mode) are KafkaRecordRow like any other: every field,
    the timestamp type of their batch, the tier, and the named tuple's methods."""
    tier, layout, _ = uploaded
    expected = [r for r in _expected(layout) if r[0] <= layout.segments[-2][1]]
    got = list(tier.read("orders", 0, from_offset=expected[3][0], count=50))
    assert _rows(got) == expected[3:53]
    for row in got:
        assert type(row) is KafkaRecordRow and len(row) == len(KafkaRecordRow._fields)
        assert (row.topic, row.partition, row.tier, row.timestamp_type) == (
            "orders",
            0,
            "remote",
            0,
        )
        assert KafkaRecordRow(**row._asdict()) == row and row._replace(tier="x").tier == "x"


def test_one_ranged_get_per_fetch_once_the_index_is_cached(
    uploaded: tuple[KafkaTier, PartitionLayout, Path],
) -> None:
    tier, layout, _ = uploaded
    counting = FaultyObjectStore(tier.ctx.store)
    tier.ctx.store = counting
    tier.indexes._store = counting
    base, end = layout.segments[2]
    list(tier.read("orders", 0, from_offset=base + 5, count=10))
    assert counting.calls["get"] == 1 and counting.calls["get_range"] == 1  # .index, data
    for start in range(base + 1, end - 20, 13):
        counting.reset_counts()
        got = list(tier.read("orders", 0, from_offset=start, count=20))
        assert got[0].offset >= start and len(got) == 20
        assert (counting.calls["get"], counting.calls["get_range"]) == (0, 1)


def test_read_by_timestamp(uploaded: tuple[KafkaTier, PartitionLayout, Path]) -> None:
    tier, layout, _ = uploaded
    expected = [r for r in _expected(layout) if r[0] <= layout.segments[-2][1]]
    for target in (0, expected[0][1], expected[100][1] - 3, expected[400][1], expected[-1][1]):
        got = _rows(tier.read("orders", 0, from_timestamp=target, count=5))
        first = next(i for i, r in enumerate(expected) if r[1] >= target)
        assert got == expected[first : first + 5], target
    assert list(tier.read("orders", 0, from_timestamp=expected[-1][1] + 1)) == []


def test_modes_cross_the_tier_boundary(
    uploaded: tuple[KafkaTier, PartitionLayout, Path],
) -> None:
    tier, layout, root = uploaded
    expected = _expected(layout)
    # Kafka deletes the two oldest local segments: they are only remote now
    for base, _ in layout.segments[:2]:
        for f in layout.path.glob(f"{base:020d}.*"):
            f.unlink()
    local_start = layout.segments[2][0]
    active = layout.segments[-1][0]
    for mode, first_tier in (
        ("kafka-preferred", "remote"),
        ("remote-preferred", "remote"),
    ):
        got = list(tier.read("orders", 0, from_offset=0, log_dir=root, mode=mode))
        assert _rows(got) == expected, mode
        tiers = {r.offset: r.tier for r in got}
        assert tiers[0] == first_tier and tiers[active] == "local"
        if mode == "kafka-preferred":
            assert tiers[local_start] == "local"
        else:
            assert tiers[local_start] == "remote"
    only_local = _rows(tier.read("orders", 0, from_offset=0, log_dir=root, mode="kafka-only"))
    assert only_local == [r for r in expected if r[0] >= local_start]
    only_remote = _rows(tier.read("orders", 0, from_offset=active - 30, count=1000))
    assert only_remote == [r for r in expected if active - 30 <= r[0] < active]


def test_local_reads_stop_at_the_count_inside_a_batch(
    uploaded: tuple[KafkaTier, PartitionLayout, Path],
) -> None:
    """A local read hands rows over a batch at a time and stops at its count mid-batch: from
    any offset, any count gives exactly the records from there (also by timestamp)."""
    tier, layout, root = uploaded
    expected = _expected(layout)
    offsets = [r[0] for r in expected]
    rng = random.Random(11)
    for start in [0, *rng.sample(offsets, 15)]:
        first = offsets.index(start)
        for count in (1, 2, 7, 300):
            got = tier.read(
                "orders", 0, from_offset=start, count=count, log_dir=root, mode="kafka-only"
            )
            assert _rows(got) == expected[first : first + count], (start, count)
        at = expected[first][1]
        by_time = tier.read(
            "orders", 0, from_timestamp=at, count=3, log_dir=root, mode="kafka-only"
        )
        want = next(i for i, r in enumerate(expected) if r[1] >= at)
        assert _rows(by_time) == expected[want : want + 3], at


def test_bad_requests(uploaded: tuple[KafkaTier, PartitionLayout, Path]) -> None:
    tier, _, _ = uploaded
    with pytest.raises(ConfigError):
        tier.read("orders", 0)
    with pytest.raises(ConfigError):
        tier.read("orders", 0, from_offset=0, mode="kafka-only")
    with pytest.raises(ConfigError):
        tier.read("orders", 0, from_offset=0, mode="sideways")
    with pytest.raises(ObjectNotFound):
        tier.read("nope", 0, from_offset=0)


def test_local_segments_staged_or_deleted_under_a_read(
    uploaded: tuple[KafkaTier, PartitionLayout, Path],
) -> None:
    """Kafka renames one segment to ``.deleted`` and removes the next after the read looked at
    the log directory and before it opened them: the first is read from its ``.deleted`` name,
    the second from the remote tier; no gap, no duplicate."""
    tier, layout, root = uploaded
    expected = _expected(layout)
    rows = tier.read("orders", 0, from_offset=0, log_dir=root, mode="kafka-preferred")
    first, second = layout.segments[0][0], layout.segments[1][0]
    for f in layout.path.glob(f"{first:020d}.*"):
        os.replace(f, f.with_name(f.name + ".deleted"))
    for f in layout.path.glob(f"{second:020d}.*"):
        f.unlink()
    got = list(rows)
    assert _rows(got) == expected
    tiers = {r.offset: r.tier for r in got}
    assert tiers[first] == "local" and tiers[second] == "remote"
    assert tiers[layout.segments[2][0]] == "local"
