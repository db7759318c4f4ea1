"""Three sidecars with their own SQLite homes (no shared PostgreSQL store) on one moto bucket,
on ZooKeeper and on KRaft: across leadership changes the new leader's sidecar carries on from
the bucket's markers and partition watermark object (:mod:`offloader.kafka.adopt`), and no
finished segment is ever uploaded twice."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest

from devservers.endpoint import S3Endpoint
from formats.kafka.manifest import segment_marker_prefix
from offloader.api import KafkaTier, Offloader
from offloader.metadata.kafka_base import COPY_FINISHED
from tests.kafka.conftest import SMALL
from tests.kafka.logdir import write_partition
from tests.kafka_cluster.brokers import topic_id, write_brokers
from tests.kafka_cluster.writers import ClusterWriter

TIERED = {"remote.storage.enable": "true"}
BROKERS = (1, 2, 3)


@pytest.fixture()
def homes(
    tmp_path: Path,
    writer: ClusterWriter,
    moto_endpoint: S3Endpoint,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[dict[int, KafkaTier]]:
    """One sidecar per broker, each on its own SQLite home, all on one fresh moto bucket."""
    for name, value in moto_endpoint.env().items():
        monkeypatch.setenv(name, value)
    bucket = moto_endpoint.new_bucket()
    opened: list[Offloader] = []
    tiers: dict[int, KafkaTier] = {}
    url = writer.url
    for b in BROKERS:
        off = Offloader.from_settings(
            tmp_path / f"home-{b}", f"s3://{bucket}/tier", endpoint_url=moto_endpoint.url
        )
        opened.append(off)
        tiers[b] = off.kafka(dataclasses.replace(SMALL, cluster_metadata=url))
    yield tiers
    for off in opened:
        off.close()


def _finished(tier: KafkaTier) -> list[tuple[int, int]]:
    segs = tier.ctx.meta.list_segments("orders", 0, states=[COPY_FINISHED])
    return sorted((s.first_offset, s.end_offset) for s in segs)


def _grow(tmp_path: Path, dirs: dict[int, Path], records: int) -> list[tuple[int, int]]:
    """Every replica's log grows to ``records`` (byte for byte alike); its segment spans."""
    scratch = tmp_path / f"scratch-{records}"
    layout = write_partition(scratch, "orders", 0, records=records, codecs=(0,))
    for log_dir in dirs.values():
        for f in layout.path.iterdir():
            (log_dir / "orders-0" / f.name).write_bytes(f.read_bytes())
    return list(layout.segments)


@pytest.mark.s3
def test_a_new_leader_with_its_own_home_carries_on_from_the_bucket(
    tmp_path: Path, writer: ClusterWriter, homes: dict[int, KafkaTier]
) -> None:
    dirs = write_brokers(tmp_path / "logs", {("orders", 0): 300}, brokers=BROKERS)
    writer.create_topic("orders", topic_id("orders"), {0: list(BROKERS)}, TIERED)
    reports = {b: homes[b].upload(dirs[b]) for b in BROKERS}
    assert reports[1].of("uploaded") and not reports[2].of("uploaded")
    assert not reports[3].of("uploaded")
    first = _finished(homes[1])
    assert first
    store = homes[1].ctx.store
    expected = first
    for epoch, (records, leader) in enumerate(((700, 2), (1100, 3), (1500, 1)), start=1):
        spans = _grow(tmp_path, dirs, records)
        writer.set_leader("orders", 0, leader, epoch, list(BROKERS))
        for b in BROKERS:
            if b != leader:  # a deposed or idle follower uploads nothing
                assert not homes[b].upload(dirs[b]).of("uploaded")
        report = homes[leader].upload(dirs[leader])
        assert report.ok
        uploaded = [s.base_offset for s in report.of("uploaded")]
        done = {b for b, _e in expected}
        assert not done & set(uploaded), f"re-uploaded {done & set(uploaded)}"
        expected = sorted([*expected, *((b, e) for b, e in spans[:-1] if b not in done)])
        # this home now knows every finished copy: those adopted and its own
        assert _finished(homes[leader]) == expected
        assert [e for _b, e in expected] == [e for _b, e in spans[:-1]]
    # one marker per closed segment in the bucket: nothing copied twice
    markers = list(store.list(segment_marker_prefix("orders", 0)))
    assert len(markers) == len(expected)
    # and the last leader reads every record back once
    got = [r.offset for r in homes[1].read("orders", 0, from_offset=0)]
    assert got == list(range(expected[-1][1] + 1))


def test_a_kill_during_adoption_loses_and_duplicates_nothing(
    tmp_path: Path, writer: ClusterWriter
) -> None:
    """The new leader's sidecar (its own SQLite home) is killed -9 after recording an adopted
    copy as started: its next run finishes the copy (its marker is in the bucket) instead of
    cleaning it as a stale attempt of its own, and uploads only what nobody has."""
    from tests.crash.sweep import kill_run

    worker = "tests.kafka_cluster.sidecar_worker"
    dirs = write_brokers(tmp_path / "logs", {("orders", 0): 300}, brokers=BROKERS)
    writer.create_topic("orders", topic_id("orders"), {0: list(BROKERS)}, TIERED)
    store = f"file://{tmp_path / 'bucket'}"

    def args(b: int) -> list[str]:
        return [str(tmp_path / f"home-{b}"), store, "-", writer.url, str(dirs[b])]

    assert kill_run(worker, args(1), None, -1)
    spans = _grow(tmp_path, dirs, 900)
    writer.set_leader("orders", 0, 2, 1, list(BROKERS))
    assert not kill_run(worker, args(2), "kafka.adopt_after_start_copy:2", -1)
    assert kill_run(worker, args(2), None, -1)
    with Offloader.from_settings(tmp_path / "home-2", store) as off:
        tier = off.kafka(SMALL)
        assert _finished(tier) == spans[:-1]
        markers = list(tier.ctx.store.list(segment_marker_prefix("orders", 0)))
        assert len(markers) == len(spans) - 1  # one copy of each closed segment
        got = [r.offset for r in tier.read("orders", 0, from_offset=0)]
        assert got == list(range(spans[-2][1] + 1))
