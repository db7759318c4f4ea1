"""The leadership gate against each cluster backend (a real ZooKeeper, znodes written as Kafka
writes them; a KRaft metadata log written as Kafka's controller writes it) and brokers' log
dirs on one home: only the leader's sidecar uploads, a new leader carries on from
the shared watermark, topic configs are honoured (remote.storage.enable, compaction,
remote.log.copy.disable, the KIP-1241 copy lag, retention.*), the KIP-405 lineage rule, and
``kafka status``'s role, epoch and reason."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from formats.kafka.names import LEADER_EPOCH_CHECKPOINT
from offloader.api import KafkaSettings, KafkaTier, Offloader
from offloader.metadata.kafka_base import COPY_FINISHED
from tests.kafka.conftest import SMALL, Clock
from tests.kafka.logdir import write_partition
from tests.kafka_cluster.brokers import topic_id, write_brokers, write_meta_properties
from tests.kafka_cluster.writers import ClusterWriter

TIERED = {"remote.storage.enable": "true"}


@pytest.fixture()
def zk(writer: ClusterWriter) -> ClusterWriter:
    """The cluster's writer: every test runs on ZooKeeper and on KRaft."""
    return writer


@pytest.fixture()
def wall_clock() -> Clock:
    clock = Clock()
    clock.now = int(time.time() * 1000)
    return clock


@pytest.fixture()
def sidecar(
    tmp_path: Path, wall_clock: Clock, zk: ClusterWriter
) -> Iterator[Callable[..., KafkaTier]]:
    """Sidecars (KafkaTiers) on one home, each reading the cluster's metadata."""
    opened: list[Offloader] = []

    def make(settings: KafkaSettings = SMALL) -> KafkaTier:
        off = Offloader.from_settings(tmp_path / "home", None, clock_ms=wall_clock)
        opened.append(off)
        return off.kafka(dataclasses.replace(settings, cluster_metadata=zk.url))

    yield make
    for off in opened:
        off.close()


def _finished(tier: KafkaTier, topic: str, partition: int) -> list[tuple[int, int]]:
    segs = tier.ctx.meta.list_segments(topic, partition, states=[COPY_FINISHED])
    return sorted((s.base_offset, s.end_offset) for s in segs)


def test_only_the_leader_uploads_and_a_new_leader_carries_on(
    tmp_path: Path, zk: ClusterWriter, sidecar: Callable[..., KafkaTier]
) -> None:
    dirs = write_brokers(tmp_path / "logs", {("orders", 0): 300, ("orders", 1): 300})
    zk.create_topic("orders", topic_id("orders"), {0: [1, 2, 3], 1: [2, 3, 1]}, TIERED)
    tiers = {b: sidecar() for b in dirs}
    reports = {b: tiers[b].upload(dirs[b]) for b in dirs}
    # broker 1 leads orders-0, broker 2 orders-1; the third only follows
    assert {(s.topic, s.partition) for s in reports[1].of("uploaded")} == {("orders", 0)}
    assert {(s.topic, s.partition) for s in reports[2].of("uploaded")} == {("orders", 1)}
    assert not reports[3].of("uploaded")
    skipped = {s.partition: s.detail for s in reports[3].of("skipped")}
    assert skipped == {
        0: "follower: broker 1 leads in epoch 0",
        1: "follower: broker 2 leads in epoch 0",
    }
    first = _finished(tiers[1], "orders", 0)
    # the leadership moves; broker 1's next segments appear, broker 3 now leads
    extra = tmp_path / "more"
    for b, log_dir in dirs.items():
        for p in (0,):
            part = log_dir / f"orders-{p}"
            grown = write_partition(extra / str(b), "orders", p, records=500, codecs=(0,))
            for f in grown.path.iterdir():
                (part / f.name).write_bytes(f.read_bytes())
    zk.set_leader("orders", 0, 3, 1, [3, 1])
    assert not tiers[1].upload(dirs[1]).of("uploaded")
    report = tiers[3].upload(dirs[3])
    after = _finished(tiers[3], "orders", 0)
    assert after[: len(first)] == first  # nothing re-uploaded
    assert len(after) > len(first)
    assert [s.base_offset for s in report.of("uploaded")] == [b for b, _ in after[len(first) :]]
    ends = [e for _b, e in after]
    starts = [b for b, _e in after]
    assert all(starts[i + 1] == ends[i] + 1 for i in range(len(after) - 1))


def test_topic_configs_decide_what_is_tiered(
    tmp_path: Path, zk: ClusterWriter, sidecar: Callable[..., KafkaTier]
) -> None:
    dirs = write_brokers(
        tmp_path / "logs",
        {("plain", 0): 200, ("tiered", 0): 200, ("compacted", 0): 200, ("stopped", 0): 200},
        brokers=(1,),
    )
    zk.create_topic("plain", topic_id("plain"), {0: [1]})
    zk.create_topic("tiered", topic_id("tiered"), {0: [1]}, TIERED)
    zk.create_topic("compacted", topic_id("compacted"), {0: [1]}, TIERED)
    zk.create_topic(
        "stopped", topic_id("stopped"), {0: [1]}, {**TIERED, "remote.log.copy.disable": "true"}
    )
    tier = sidecar()
    first = tier.upload(dirs[1], "tiered|compacted")
    assert {s.topic for s in first.of("uploaded")} == {"tiered", "compacted"}
    zk.set_config("compacted", "cleanup.policy", "compact")
    report = tier.upload(dirs[1])
    reasons = {s.topic: s.detail for s in report.of("skipped")}
    assert set(reasons) == {"plain", "compacted", "stopped"}
    assert "remote.storage.enable is not true" in (reasons["plain"] or "")
    assert "KAFKA-19273" in (reasons["compacted"] or "")
    assert "remote.log.copy.disable=true" in (reasons["stopped"] or "")
    rows = {s.topic: s for s in tier.status(log_dir=dirs[1])}
    assert rows["tiered"].role == "leader" and rows["tiered"].not_uploading is None
    assert rows["tiered"].leader_epoch == 0
    compacted = rows["compacted"].not_uploading or ""
    uploaded = _finished(tier, "compacted", 0)
    assert uploaded and f"already uploaded before: {len(uploaded)} segment(s)" in compacted
    assert all(f"{b}..{e}" in compacted for b, e in uploaded)
    # a topic the cluster does not know is not uploaded either
    write_partition(dirs[1], "unknown", 0, records=100, codecs=(0,))
    unknown = tier.upload(dirs[1], "unknown").of("skipped")
    assert len(unknown) == 1 and "has no unknown" in (unknown[0].detail or "")


def test_copy_lag_holds_young_segments_back(
    tmp_path: Path, zk: ClusterWriter, sidecar: Callable[..., KafkaTier], wall_clock: Clock
) -> None:
    dirs = write_brokers(tmp_path / "logs", {("lag", 0): 400}, brokers=(1,))
    zk.create_topic("lag", topic_id("lag"), {0: [1]}, {**TIERED, "remote.copy.lag.ms": "60000"})
    tier = sidecar()
    report = tier.upload(dirs[1])
    assert not report.of("uploaded") and report.ok  # every segment written just now
    (row,) = tier.status(log_dir=dirs[1])
    assert row.role == "leader" and row.upload_lag
    assert row.not_uploading == (
        "waiting for the copy lag (remote.copy.lag.ms=60000): closed segments are copied later"
    )
    wall_clock.now += 61_000
    assert tier.upload(dirs[1]).of("uploaded")
    # by bytes: the segments wait until the partition holds that much not yet remote
    dirs2 = write_brokers(tmp_path / "logs2", {("lagb", 0): 400}, brokers=(1,))
    size = sum(f.stat().st_size for f in (dirs2[1] / "lagb-0").glob("*.log"))
    zk.create_topic(
        "lagb", topic_id("lagb"), {0: [1]}, {**TIERED, "remote.copy.lag.bytes": str(size + 1)}
    )
    assert not tier.upload(dirs2[1]).of("uploaded")
    zk.set_config("lagb", "remote.copy.lag.bytes", str(size // 2))
    uploaded = tier.upload(dirs2[1]).of("uploaded")
    closed = len(list((dirs2[1] / "lagb-0").glob("*.log"))) - 1
    assert 0 < len(uploaded) < closed  # the oldest ones, while the rest stays under the limit


def test_a_remote_copy_from_a_deposed_leader_stops_the_new_one(
    tmp_path: Path, zk: ClusterWriter, sidecar: Callable[..., KafkaTier]
) -> None:
    # broker 1 led and uploaded; broker 2's log took another lineage (its epoch 1 starts at
    # offset 63, broker 1's at 70: records 63..69 of epoch 0 were never replicated)
    one = tmp_path / "b1"
    two = tmp_path / "b2"
    write_meta_properties(one, 1)
    write_meta_properties(two, 2)
    write_partition(one, "div", 0, records=400, per_batch=10, codecs=(0,))
    write_partition(two, "div", 0, records=400, per_batch=9, codecs=(0,))
    zk.create_topic("div", topic_id("div"), {0: [1, 2]}, TIERED)
    tier1, tier2 = sidecar(), sidecar()
    assert tier1.upload(one).of("uploaded")
    zk.set_leader("div", 0, 2, 9, [2])
    report = tier2.upload(two)
    assert not report.of("uploaded")
    detail = report.of("skipped")[0].detail or ""
    assert "diverges from this leader's log at offset 63" in detail
    assert "upload stopped at 62" in detail
    status = tier2.status("div", log_dir=two)[0]
    assert status.not_uploading is None and "offset 63" in (status.last_error or "")


def _checkpoint(directory: Path, epochs: list[tuple[int, int]]) -> None:
    """A ``leader-epoch-checkpoint`` as Kafka writes it: version 0, the count, then one
    ``epoch startOffset`` line per entry."""
    lines = ["0", str(len(epochs)), *(f"{e} {o}" for e, o in epochs)]
    (directory / LEADER_EPOCH_CHECKPOINT).write_text("\n".join(lines) + "\n")


def test_a_lineage_changed_during_the_pass_uploads_the_prefix_that_agrees(
    tmp_path: Path, zk: ClusterWriter, sidecar: Callable[..., KafkaTier]
) -> None:
    from offloader.kafka.logdir import scan_log_dir

    dirs = write_brokers(tmp_path / "logs", {("mid", 0): 400}, brokers=(1,))
    zk.create_topic("mid", topic_id("mid"), {0: [1]}, TIERED)
    tier = sidecar()
    gate = tier.ctx.gate
    assert gate is not None
    gate.begin_pass()
    (part,) = scan_log_dir(dirs[1])
    planned, refused = gate.plan(part, dirs[1])
    assert refused is None
    segments = planned.closed
    assert gate.before_segment(planned, segments[0], segments[1].base_offset) is None
    # Kafka truncated and a new epoch began inside segment 2 (a leader lost the partition)
    cut = segments[1].base_offset + 3
    _checkpoint(part.directory, [*((e, o) for e, o in part.leader_epochs if o < cut), (99, cut)])
    stop = gate.before_segment(planned, segments[1], segments[2].base_offset)
    assert stop is not None and stop.kind == "skipped"
    assert stop.end_offset == cut - 1
    assert f"changed at offset {cut}" in (stop.detail or "")
    assert f"uploaded only up to offset {cut - 1}" in (stop.detail or "")
    # a change at a segment's base offset leaves no prefix: the upload stops before it
    _checkpoint(
        part.directory,
        [
            *((e, o) for e, o in part.leader_epochs if o < segments[2].base_offset),
            (77, segments[2].base_offset),
        ],
    )
    stop = gate.before_segment(planned, segments[2], segments[3].base_offset)
    assert stop is not None and stop.end_offset is None
    assert f"upload stopped at {segments[2].base_offset - 1}" in (stop.detail or "")


def test_the_epoch_rule_uploads_a_segment_only_as_far_as_the_new_lineage_agrees(
    tmp_path: Path, zk: ClusterWriter, sidecar: Callable[..., KafkaTier]
) -> None:
    from formats.kafka.index import decode_offset_index, decode_time_index
    from formats.kafka.manifest import segment_marker_prefix
    from offloader.kafka.logdir import scan_log_dir
    from offloader.kafka.types import UploadReport
    from offloader.kafka.upload import upload_partition

    dirs = write_brokers(tmp_path / "logs", {("epo", 0): 400}, brokers=(1,))
    zk.create_topic("epo", topic_id("epo"), {0: [1]}, TIERED)
    tier = sidecar()
    gate = tier.ctx.gate
    assert gate is not None
    gate.begin_pass(dirs[1])
    (part,) = scan_log_dir(dirs[1])
    planned, refused = gate.plan(part, dirs[1])
    assert refused is None
    closed = planned.closed
    seg = closed[1]
    cut = seg.base_offset + 40  # a batch boundary (10 records a batch): 4 batches agree
    # after the pass planned, Kafka's log took a new epoch at ``cut`` (this broker's old
    # records from there were written under a leader that lost the partition)
    _checkpoint(part.directory, [*((e, o) for e, o in part.leader_epochs if o < cut), (99, cut)])
    report = UploadReport()
    upload_partition(tier.ctx, planned, report)
    uploaded = report.of("uploaded")
    assert [(s.base_offset, s.end_offset) for s in uploaded] == [
        (closed[0].base_offset, seg.base_offset - 1),
        (seg.base_offset, cut - 1),
    ]
    (stop,) = report.of("skipped")
    assert f"uploaded only up to offset {cut - 1}" in (stop.detail or "")
    # the prefix copy: the .log's bytes up to the batch at ``cut``, indexes for the prefix
    (prefix,) = [
        s
        for s in tier.ctx.meta.list_segments("epo", 0, states=[COPY_FINISHED])
        if s.base_offset == seg.base_offset
    ]
    local = seg.path("log").read_bytes()
    remote = tier.ctx.store.get(prefix.keys["log"]).data
    assert prefix.end_offset == cut - 1 and prefix.size_bytes == len(remote) < len(local)
    assert local.startswith(bytes(remote))
    offsets = decode_offset_index(tier.ctx.store.get(prefix.keys["index"]).data, seg.base_offset)
    times = decode_time_index(tier.ctx.store.get(prefix.keys["timeindex"]).data, seg.base_offset)
    assert offsets.positions and all(p < len(remote) for p in offsets.positions)
    assert max(offsets.offsets) < cut and all(o < cut for o in times.offsets)
    assert "snapshot" not in prefix.keys
    markers = list(tier.ctx.store.list(segment_marker_prefix("epo", 0, seg.base_offset)))
    assert len(markers) == 1 and f".e{cut - 1}." in markers[0].key
    assert [r.offset for r in tier.read("epo", 0, from_offset=0)] == list(range(cut))
    # the next pass reads the log afresh (here the records from ``cut`` on are kept, as the
    # new leader wrote them again): the segment is copied from ``cut``, nothing twice
    after = tier.upload(dirs[1])
    assert after.ok
    finished = sorted(
        (s.first_offset, s.end_offset)
        for s in tier.ctx.meta.list_segments("epo", 0, states=[COPY_FINISHED])
    )
    assert finished[2][0] == cut
    assert all(finished[i + 1][0] == finished[i][1] + 1 for i in range(len(finished) - 1))
    last_closed = closed[-1]
    assert finished[-1][1] == planned.segments[-1].base_offset - 1 >= last_closed.base_offset


def test_remote_retention_follows_the_topic_unless_the_project_sets_it(
    tmp_path: Path, zk: ClusterWriter, sidecar: Callable[..., KafkaTier]
) -> None:
    dirs = write_brokers(tmp_path / "logs", {("ret", 0): 300, ("own", 0): 300}, brokers=(1,))
    zk.create_topic("ret", topic_id("ret"), {0: [1]}, TIERED)
    zk.create_topic("own", topic_id("own"), {0: [1]}, TIERED)
    tier = sidecar()
    assert tier.upload(dirs[1]).ok
    before = {t: _finished(tier, t, 0) for t in ("ret", "own")}
    # Kafka's default retention.ms (7 days) keeps them; their records are from 2023
    zk.set_default_config("retention.ms", "3600000")
    tier.set_retention("own", 10**15, -1)  # the project's own policy wins for this one
    tier.ctx.gate.view.refresh()  # type: ignore[union-attr]
    deleted = tier.apply_retention()
    assert deleted
    assert _finished(tier, "own", 0) == before["own"]
    assert len(_finished(tier, "ret", 0)) == 0
    zk.set_config("own", "retention.ms", "1")
    tier.ctx.gate.view.refresh()  # type: ignore[union-attr]
    assert not tier.apply_retention()


def test_a_follower_status_names_the_leader(
    tmp_path: Path, zk: ClusterWriter, sidecar: Callable[..., KafkaTier]
) -> None:
    dirs = write_brokers(tmp_path / "logs", {("s", 0): 100}, brokers=(2,))
    zk.create_topic("s", topic_id("s"), {0: [1, 2]}, TIERED)
    zk.set_leader("s", 0, 1, 4, [1, 2])
    tier = sidecar()
    (row,) = tier.status(log_dir=dirs[2])
    assert (row.role, row.leader, row.leader_epoch) == ("follower", 1, 4)
    assert row.not_uploading == "follower: broker 1 leads in epoch 4"
    zk.set_leader("s", 0, None, 5, [])
    (row,) = tier.status(log_dir=dirs[2])
    assert row.role == "offline" and "no leader" in (row.not_uploading or "")
