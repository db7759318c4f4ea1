"""One copy per offset range (issue 34, item 2): two uploaders of one home never both copy a
segment (the partition lock; the loser reports the partition busy), and a database that already
holds duplicate copies migrates to one copy each (the others deleted by the next pass)."""

from __future__ import annotations

import itertools
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path

from offloader.api import KafkaTier, UploadReport
from offloader.metadata.kafka_base import COPY_FINISHED, DELETE_FINISHED, DELETE_STARTED
from offloader.metadata.sqlite.db import MIGRATIONS, Database
from offloader.metadata.sqlite.kafka import SqliteKafkaMetadataStore
from tests.kafka.logdir import PartitionLayout, write_partition


def _closed(layout: PartitionLayout) -> list[tuple[int, int]]:
    return layout.segments[:-1]


def _finished(tier: KafkaTier, topic: str = "orders") -> list[tuple[int, int]]:
    return sorted(
        (s.first_offset, s.end_offset)
        for s in tier.ctx.meta.list_segments(topic, 0, states=[COPY_FINISHED])
    )


def test_two_concurrent_uploaders_copy_each_segment_once(
    tmp_path: Path, make_tier: Callable[..., KafkaTier]
) -> None:
    root = tmp_path / "logs"
    layout = write_partition(root, "orders", 0, records=600)
    tiers = [make_tier(), make_tier()]  # two KafkaTiers, two connections, one home
    reports: list[UploadReport] = []
    start = threading.Barrier(2)

    def one(tier: KafkaTier) -> None:
        start.wait()
        reports.append(tier.upload(root))

    threads = [threading.Thread(target=one, args=(t,)) for t in tiers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(r.ok for r in reports)
    uploaded = sorted(s.base_offset for r in reports for s in r.of("uploaded"))
    assert uploaded == [base for base, _ in _closed(layout)]  # each segment by one uploader
    assert _finished(tiers[0]) == _closed(layout)
    status = tiers[1].status("orders")[0]
    assert status.remote_segments == len(_closed(layout))
    assert sum(s.size_bytes for r in reports for s in r.of("uploaded")) == status.remote_bytes
    offsets = [r.offset for r in tiers[1].read("orders", 0, from_offset=0)]
    assert offsets == list(range(_closed(layout)[-1][1] + 1))


def test_the_uploader_that_finds_the_partition_locked_leaves_it_alone(
    tmp_path: Path, make_tier: Callable[..., KafkaTier]
) -> None:
    root = tmp_path / "logs"
    layout = write_partition(root, "orders", 0, records=300)
    holder, other = make_tier(), make_tier()
    holder.ctx.meta.ensure_partition("orders", 0, layout.topic_id, 1)
    with holder.ctx.meta.partition_lock("orders", 0) as held:
        assert held
        report = other.upload(root)
        assert report.ok  # busy is not a failure
        busy = report.of("busy")
        assert [(s.topic, s.partition) for s in busy] == [("orders", 0)]
        assert "another uploader" in (busy[0].detail or "")
        assert not report.of("uploaded") and _finished(other) == []
        with other.ctx.meta.partition_lock("orders", 0) as second:
            assert not second  # one holder at a time
    report = other.upload(root)  # released: the next pass copies
    assert len(report.of("uploaded")) == len(_closed(layout))


def _duplicate_database(tmp_path: Path) -> Path:
    """A version-7 home whose every segment has two finished copies (what two uploaders made
    before one copy per range was enforced)."""
    home = tmp_path / "home"
    home.mkdir()
    Database(home / "metadata.db", migrations=MIGRATIONS[:7]).close()
    root = tmp_path / "logs"
    write_partition(root, "orders", 0, records=300, topic_id="AAAAAAAAAAAAAAAAAAAAAA")
    conn = sqlite3.connect(home / "metadata.db")
    conn.execute(
        "INSERT INTO kafka_partitions (topic, partition, topic_id, watermark, updated_ms) "
        "VALUES ('orders', 0, 'AAAAAAAAAAAAAAAAAAAAAA', 19, 1)"
    )
    for sid, started, state in (
        ("s-late-finished", 30, "COPY_SEGMENT_FINISHED"),
        ("s-early-finished", 20, "COPY_SEGMENT_FINISHED"),
        ("s-earliest-started", 10, "COPY_SEGMENT_STARTED"),
    ):
        conn.execute(
            "INSERT INTO kafka_remote_segments (segment_id, topic, partition, topic_id, "
            "base_offset, end_offset, max_timestamp, size_bytes, leader_epochs, object_keys, "
            "state, started_ms, updated_ms) VALUES (?, 'orders', 0, 'AAAAAAAAAAAAAAAAAAAAAA', "
            "0, 19, 5, 100, '{}', ?, ?, ?, ?)",
            (sid, f'{{"log": "old/{sid}.log"}}', state, started, started),
        )
    conn.commit()
    conn.close()
    return home


def test_a_database_with_duplicate_copies_migrates_to_one(
    tmp_path: Path, make_tier: Callable[..., KafkaTier]
) -> None:
    home = _duplicate_database(tmp_path)
    with SqliteKafkaMetadataStore(home / "metadata.db") as meta:
        states = {s.segment_id: s for s in meta.list_segments("orders", 0)}
        # the finished copy started first is kept; the others are marked for deletion
        assert states["s-early-finished"].state == COPY_FINISHED
        assert states["s-early-finished"].start_offset == 0
        for gone in ("s-late-finished", "s-earliest-started"):
            assert states[gone].state == DELETE_STARTED
            assert "duplicate copy" in (states[gone].error or "")
    tier = make_tier()
    report = tier.upload(tmp_path / "logs")
    assert report.ok
    assert sorted(report.cleaned) == ["s-earliest-started", "s-late-finished"]
    assert tier.ctx.meta.get_segment("s-late-finished").state == DELETE_FINISHED
    finished = tier.ctx.meta.list_segments("orders", 0, states=[COPY_FINISHED])
    assert finished[0].segment_id == "s-early-finished"
    # one copy per offset: the kept copy ends at 19, the next one answers from 20
    spans = [(s.first_offset, s.end_offset) for s in finished]
    assert all(b[0] == a[1] + 1 for a, b in itertools.pairwise(spans))
    assert tier.status("orders")[0].remote_segments == len(finished)
