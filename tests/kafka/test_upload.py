"""The Kafka uploader: closed segments to the store under KIP-405 keys, states, watermark,
.deleted segments, gaps, corrupt segments, failed and abandoned attempts."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from pathlib import Path

from formats.kafka.batch import iter_records
from formats.kafka.names import parse_remote_key
from offloader.api import KafkaSettings, KafkaTier
from offloader.errors import StoreError
from offloader.kafka.logdir import scan_partition
from offloader.kafka.types import UploadReport
from offloader.kafka.upload import upload_partition
from offloader.metadata.kafka_base import (
    COPY_FINISHED,
    COPY_STARTED,
    DELETE_FINISHED,
    NewRemoteSegment,
)
from offloader.store.faulty import FaultyObjectStore
from tests.kafka.logdir import PartitionLayout, write_partition

LogDir = tuple[Path, dict[tuple[str, int], PartitionLayout]]


def _listing(tree: Path) -> dict[str, str]:
    return {
        str(p.relative_to(tree)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(tree.rglob("*"))
        if p.is_file()
    }


def test_uploads_closed_segments_with_states_and_keys(
    log_dir: LogDir, make_tier: Callable[..., KafkaTier]
) -> None:
    root, layouts = log_dir
    before = _listing(root)
    tier = make_tier()
    report = tier.upload(root)
    assert report.ok and report.partitions == 5
    # never touches Kafka's files
    assert _listing(root) == before
    meta = tier.ctx.meta
    for (topic, partition), layout in layouts.items():
        remote = meta.list_segments(topic, partition)
        closed = layout.segments[:-1]
        assert [(s.base_offset, s.end_offset) for s in remote] == closed
        assert all(s.state == COPY_FINISHED for s in remote)
        watermark = meta.get_partition(topic, partition).watermark  # type: ignore[union-attr]
        assert watermark == (closed[-1][1] if closed else -1)
        for seg in remote:
            assert set(seg.keys) >= {"log", "index", "timeindex", "leader-epoch-checkpoint"}
            parsed = parse_remote_key(seg.keys["log"])
            assert (parsed.topic, parsed.partition, parsed.base_offset) == (
                topic,
                partition,
                seg.base_offset,
            )
            assert parsed.segment_id == seg.segment_id and parsed.topic_id == layout.topic_id
            assert seg.keys["log"].startswith(f"kafka/{topic}-{layout.topic_id}/{partition}/")
            assert seg.leader_epochs and min(seg.leader_epochs.values()) == seg.base_offset
            # the remote .log is the local one, byte for byte (from its .deleted name too)
            name = f"{seg.base_offset:020d}.log"
            local = layout.path / name
            if not local.exists():
                local = layout.path / (name + ".deleted")
            remote_bytes = tier.ctx.store.get(seg.keys["log"]).data
            assert remote_bytes == local.read_bytes()
            assert seg.size_bytes == len(remote_bytes)
            assert [r.offset for _, r in iter_records(remote_bytes)][-1] == seg.end_offset
    deleted = layouts[("orders", 0)].deleted[0]
    assert any(s.from_deleted and s.base_offset == deleted for s in report.of("uploaded"))
    # a second pass has nothing to do
    again = tier.upload(root)
    assert again.segments == []


def test_topics_regex_and_hash_prefix(log_dir: LogDir, make_tier: Callable[..., KafkaTier]) -> None:
    root, _ = log_dir
    tier = make_tier(
        settings=KafkaSettings(
            prefix="tiered", hash_prefix_len=4, part_size=4096, enforce_min_part_size=False
        )
    )
    report = tier.upload(root, "click.*")
    assert {s.topic for s in report.segments} == {"clicks"}
    keys = [k for s in tier.ctx.meta.list_segments() for k in s.keys.values()]
    assert keys and all(len(k.split("/")[0]) == 4 and k.split("/")[1] == "tiered" for k in keys)


def test_new_segments_are_picked_up_and_deleted_ones_become_gaps(
    tmp_path: Path, make_tier: Callable[..., KafkaTier]
) -> None:
    root = tmp_path / "logs"
    layout = write_partition(root, "t", 0, records=500)
    tier = make_tier()
    tier.upload(root)
    watermark = tier.ctx.meta.get_partition("t", 0).watermark  # type: ignore[union-attr]
    assert watermark == layout.segments[-2][1]
    # Kafka rolls the active segment and deletes the one after it before we copy them
    later = write_partition(tmp_path / "more", "t", 0, records=400, start_offset=layout.next_offset)
    for f in later.path.iterdir():
        if f.name.endswith((".log", ".index", ".timeindex", ".snapshot")):
            os.replace(f, layout.path / f.name)
    gone = layout.segments[-1][0]
    for kind in ("log", "index", "timeindex", "snapshot"):
        (layout.path / f"{gone:020d}.{kind}").unlink()
    report = tier.upload(root)
    gaps = tier.ctx.meta.list_gaps("t")
    assert [(g.start_offset, g.end_offset) for g in gaps] == [(gone, layout.next_offset - 1)]
    assert report.of("gap") and report.ok
    status = tier.status("t", root)[0]
    assert status.gaps and status.gaps[0][:2] == (gone, layout.next_offset - 1)
    assert status.watermark == later.segments[-2][1]
    # the gap is recorded once
    tier.upload(root)
    assert len(tier.ctx.meta.list_gaps("t")) == 1


def test_segment_renamed_or_deleted_after_the_scan(
    tmp_path: Path, make_tier: Callable[..., KafkaTier]
) -> None:
    root = tmp_path / "logs"
    layout = write_partition(root, "t", 0, records=500)
    partition = scan_partition(layout.path)
    first, second = layout.segments[0][0], layout.segments[1][0]
    # after the scan, Kafka stages the first segment for deletion and removes the second
    for kind in ("log", "index", "timeindex", "snapshot"):
        name = f"{first:020d}.{kind}"
        os.replace(layout.path / name, layout.path / (name + ".deleted"))
        (layout.path / f"{second:020d}.{kind}").unlink()
    tier = make_tier()
    report = UploadReport()
    upload_partition(tier.ctx, partition, report)
    kinds = [(s.kind, s.base_offset) for s in report.segments]
    assert kinds[:3] == [("uploaded", first), ("gap", second), ("uploaded", layout.segments[2][0])]
    assert report.segments[0].from_deleted is False  # the scan saw it live; read via .deleted
    gap = tier.ctx.meta.list_gaps("t")[0]
    assert (gap.start_offset, gap.end_offset) == (second, layout.segments[2][0] - 1)
    # nothing half-written of the vanished segment
    assert not any(f"{second:020d}-" in o.key for o in tier.ctx.store.list("kafka/"))
    assert [s.base_offset for s in tier.ctx.meta.list_segments("t", 0)] == [
        b for b, _ in layout.segments[:-1] if b != second
    ]


def test_corrupt_segment_is_refused_and_reported(
    tmp_path: Path, make_tier: Callable[..., KafkaTier]
) -> None:
    root = tmp_path / "logs"
    layout = write_partition(root, "t", 0, records=500)
    victim = layout.path / f"{layout.segments[1][0]:020d}.log"
    data = bytearray(victim.read_bytes())
    data[len(data) // 2] ^= 0xFF
    victim.write_bytes(bytes(data))
    tier = make_tier()
    report = tier.upload(root)
    assert [s.kind for s in report.segments] == ["uploaded", "corrupt"]
    assert str(victim) in (report.of("corrupt")[0].detail or "")
    # the batches are checked as the parts upload: the attempt is recorded, then deleted
    remote = tier.ctx.meta.list_segments("t", 0)
    assert [(s.base_offset, s.state) for s in remote] == [
        (layout.segments[0][0], COPY_FINISHED),
        (layout.segments[1][0], DELETE_FINISHED),
    ]
    part = tier.ctx.meta.get_partition("t", 0)
    assert part is not None and part.watermark == layout.segments[0][1]
    assert "CRC32C" in (part.last_error or "")
    # nothing of the corrupt segment reached the store
    stored = [o.key for o in tier.ctx.store.list("kafka/")]
    assert not any(f"{layout.segments[1][0]:020d}-" in k for k in stored)


def test_failed_upload_is_cleaned_and_the_partition_waits(
    tmp_path: Path, make_tier: Callable[..., KafkaTier]
) -> None:
    root = tmp_path / "logs"
    layout = write_partition(root, "t", 0, records=500)
    tier = make_tier()
    faulty = FaultyObjectStore(tier.ctx.store)
    faulty.plan.fail("put", StoreError("injected"), on_call=2, times=1)
    tier.ctx.store = faulty
    report = tier.upload(root)
    assert [s.kind for s in report.segments] == ["failed"]
    records = tier.ctx.meta.list_segments("t", 0)
    assert [r.state for r in records] == [DELETE_FINISHED]
    assert list(faulty.list("kafka/")) == [] and faulty.list_multipart_uploads("kafka/") == []
    assert tier.ctx.meta.get_partition("t", 0).watermark == -1  # type: ignore[union-attr]
    report = tier.upload(root)
    assert report.ok and len(report.of("uploaded")) == len(layout.segments) - 1


def test_abandoned_attempt_is_cleaned_by_the_next_run(
    tmp_path: Path, make_tier: Callable[..., KafkaTier]
) -> None:
    root = tmp_path / "logs"
    layout = write_partition(root, "t", 0, records=300)
    tier = make_tier()
    meta = tier.ctx.meta
    meta.ensure_partition("t", 0, layout.topic_id, 1)
    key = f"kafka/t-{layout.topic_id}/0/{0:020d}-AAAAAAAAAAAAAAAAAAAAAA.log"
    meta.start_copy(
        NewRemoteSegment(
            "AAAAAAAAAAAAAAAAAAAAAA", "t", layout.topic_id, 0, 0, 10, 1, 3, {}, {"log": key}
        ),
        1,
    )
    tier.ctx.store.put(key, b"half", {})
    upload_id = tier.ctx.store.create_multipart_upload(key, {})
    report = tier.upload(root)
    assert report.cleaned == ["AAAAAAAAAAAAAAAAAAAAAA"]
    assert meta.get_segment("AAAAAAAAAAAAAAAAAAAAAA").state == DELETE_FINISHED
    assert all(u.upload_id != upload_id for u in tier.ctx.store.list_multipart_uploads("kafka/"))
    assert not meta.list_segments("t", 0, states=[COPY_STARTED])
    assert len(report.of("uploaded")) == len(layout.segments) - 1


def test_recreated_topic_fails_its_partition_only(
    tmp_path: Path, make_tier: Callable[..., KafkaTier]
) -> None:
    root = tmp_path / "logs"
    write_partition(root, "a", 0, records=300)
    write_partition(root, "b", 0, records=300)
    tier = make_tier()
    tier.ctx.meta.ensure_partition("a", 0, "AQEBAQEBAQEBAQEBAQEBAQ", 1)  # another topic id
    report = tier.upload(root)
    assert [(s.topic, s.kind) for s in report.of("failed")] == [("a", "failed")]
    assert "re-created" in (report.of("failed")[0].detail or "")
    assert {s.topic for s in report.of("uploaded")} == {"b"}


def test_an_unreadable_partition_directory_fails_only_itself(
    tmp_path: Path, make_tier: Callable[..., KafkaTier]
) -> None:
    root = tmp_path / "logs"
    bad = write_partition(root, "a", 0, records=300)
    write_partition(root, "b", 0, records=300)
    tier = make_tier()
    assert tier.upload(root).ok  # both known, both uploaded
    more = write_partition(tmp_path / "more", "a", 1, records=300)
    os.rename(more.path, root / more.path.name)
    (bad.path / "partition.metadata").unlink()  # e.g. a log directory from before Kafka 2.8
    (root / "a-1" / "partition.metadata").unlink()
    write_partition(root, "c", 0, records=300)
    report = tier.upload(root)
    failed = {(s.topic, s.partition): s.detail or "" for s in report.of("failed")}
    assert set(failed) == {("a", 0), ("a", 1)} and not report.ok
    assert all("partition.metadata" in d for d in failed.values())
    assert {s.topic for s in report.of("uploaded")} == {"c"}  # the others go on
    rows = {(s.topic, s.partition): s for s in tier.status(None, root)}
    assert "partition.metadata" in (rows[("a", 0)].last_error or "")  # known: its error kept
    assert "partition.metadata" in (rows[("a", 1)].last_error or "")  # unknown: shown too
    assert rows[("a", 0)].remote_segments > 0 and rows[("c", 0)].last_error is None
    assert "partition.metadata" in (tier.ctx.meta.get_partition("a", 0).last_error or "")  # type: ignore[union-attr]
