"""Three sidecars, one per broker, on the same partitions (RF 3), one bucket and one shared
PostgreSQL store, gated by the cluster's metadata (ZooKeeper, and KRaft's metadata log): the
leader's sidecar is killed (kill -9) at the Kafka crash points and at random moments (>= 30
kills, :mod:`tests.crash.sweep`), the logs grow and the leadership moves between runs, and once
the leadership moves while its sidecar is in the middle of an upload with the new leader's
sidecar running at once. In the end every closed segment is remote exactly once (one copy per
offset, contiguous from offset 0, nothing re-uploaded), every record reads back once, and the
bucket holds nothing else."""

from __future__ import annotations

import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from formats.kafka.batch import iter_records
from offloader.api import Offloader
from offloader.metadata.kafka_base import COPY_FINISHED
from tests.crash.launcher import REPO
from tests.crash.sweep import kill_run, sweep
from tests.kafka.logdir import PartitionLayout, write_partition
from tests.kafka_cluster.brokers import topic_id, write_meta_properties
from tests.kafka_cluster.sidecar_worker import settings
from tests.kafka_cluster.writers import ClusterWriter

pytestmark = pytest.mark.slow

TOPIC = "orders"
PARTITIONS = (0, 1)
BROKERS = (1, 2, 3)
WORKER = "tests.kafka_cluster.sidecar_worker"
POINTS = ("kafka.after_start_copy", "kafka.after_log_upload", "kafka.before_finish_copy")


class Cluster:
    """Three brokers' log dirs, their homes, the bucket, the store and the cluster's metadata."""

    def __init__(self, root: Path, pg_url: str, zk: ClusterWriter) -> None:
        self.root = root
        self.pg_url = pg_url
        self.zk = zk
        self.store = f"file://{root / 'bucket'}"
        self.records = 300
        self.epoch = 0
        self.leader = 1
        self.layouts: dict[int, PartitionLayout] = {}
        for b in BROKERS:
            write_meta_properties(self.log_dir(b), b)
        self.grow(0)
        zk.create_topic(
            TOPIC,
            topic_id(TOPIC),
            {p: list(BROKERS) for p in PARTITIONS},
            {"remote.storage.enable": "true"},
        )

    def log_dir(self, broker: int) -> Path:
        return self.root / f"broker-{broker}"

    def home(self, broker: int) -> Path:
        return self.root / f"home-{broker}"

    def args(self, broker: int) -> list[str]:
        return [
            str(self.home(broker)),
            self.store,
            self.pg_url,
            self.zk.url,
            str(self.log_dir(broker)),
        ]

    def grow(self, more: int) -> None:
        """The partitions' logs grow by ``more`` records on every replica alike (the active
        segment grows, then rolls), as replication keeps them."""
        self.records += more
        scratch = self.root / "scratch"
        shutil.rmtree(scratch, ignore_errors=True)
        for p in PARTITIONS:
            self.layouts[p] = write_partition(
                scratch, TOPIC, p, records=self.records, codecs=(0,), per_batch=7
            )
        for b in BROKERS:
            for p in PARTITIONS:
                target = self.log_dir(b) / f"{TOPIC}-{p}"
                target.mkdir(parents=True, exist_ok=True)
                for f in self.layouts[p].path.iterdir():
                    (target / f.name).write_bytes(f.read_bytes())

    def move_leader(self, to: int | None = None) -> None:
        self.leader = to or BROKERS[(BROKERS.index(self.leader) + 1) % len(BROKERS)]
        self.epoch += 1
        for p in PARTITIONS:
            self.zk.set_leader(TOPIC, p, self.leader, self.epoch, list(BROKERS))

    def open(self) -> Offloader:
        """An offloader on the shared store and metadata (broker 1's home)."""
        return Offloader.from_settings(self.home(1), self.store, metadata_url=self.pg_url)

    def run(self, broker: int, point: str | None, delay: float) -> bool:
        return kill_run(WORKER, self.args(broker), point, delay)


def _check(cluster: Cluster, scenario: str) -> None:
    """Exactly one copy of each closed segment, contiguous from 0; every record once."""
    with Offloader.from_settings(
        cluster.home(1), cluster.store, metadata_url=cluster.pg_url
    ) as off:
        tier = off.kafka(settings(cluster.zk.url))
        for p in PARTITIONS:
            layout = cluster.layouts[p]
            remote = tier.ctx.meta.list_segments(TOPIC, p, states=[COPY_FINISHED])
            spans = sorted((s.first_offset, s.end_offset) for s in remote)
            closed = layout.segments[:-1]
            assert spans == closed, f"{scenario}: partition {p}: {spans} != {closed}"
            bases = [s.base_offset for s in remote]
            assert len(bases) == len(set(bases)), f"{scenario}: a segment copied twice"
            want: list[int] = []
            for base, _ in closed:
                data = (layout.path / f"{base:020d}.log").read_bytes()
                want += [r.offset for h, r in iter_records(data) if not h.is_control]
            got = [r.offset for r in tier.read(TOPIC, p, from_offset=0)]
            assert got == want, f"{scenario}: partition {p}: records lost or duplicated"
        off.gc(min_age_seconds=0)
        report = off.orphans(min_age_seconds=0)
        assert report.clean, f"{scenario}: {report}"


def _finished_count(cluster: Cluster) -> int:
    with Offloader.from_settings(
        cluster.home(1), cluster.store, metadata_url=cluster.pg_url
    ) as off:
        return len(
            off.kafka(settings(cluster.zk.url)).ctx.meta.list_segments(states=[COPY_FINISHED])
        )


def _finish(cluster: Cluster) -> None:
    """Every sidecar runs once more (the followers skip, the leader finishes)."""
    for b in BROKERS:
        assert cluster.run(b, None, -1), f"broker {b}'s sidecar did not finish"


def test_three_sidecars_one_copy_across_kills_and_leader_moves(
    tmp_path: Path, pg_url: str, writer: ClusterWriter
) -> None:
    cluster = Cluster(tmp_path, pg_url, writer)
    started = time.monotonic()
    leader_moves = 0

    def run(point: str | None, delay: float) -> bool:
        # a follower's sidecar now and then: it never uploads (the gate), killed or not
        if point is None and delay > 0.6:
            cluster.run(BROKERS[(BROKERS.index(cluster.leader) + 1) % 3], None, delay / 3)
        return cluster.run(cluster.leader, point, delay)

    def refill(rng: random.Random) -> None:
        nonlocal leader_moves
        cluster.grow(rng.randint(80, 200))
        cluster.move_leader()
        leader_moves += 1

    result = sweep(run, POINTS, (1, 2, 3), (0.05, 1.5), refill)
    assert result.kills >= 20
    _finish(cluster)
    _check(cluster, "after the sweep")

    # the leadership moves while the leader's sidecar is in the middle of an upload, and the
    # new leader's sidecar runs at the same time
    cluster.grow(3000)
    old = cluster.leader
    before = _finished_count(cluster)
    proc = subprocess.Popen(
        [sys.executable, "-m", WORKER, *cluster.args(old)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    proc.stdout.readline()  # READY
    deadline = time.monotonic() + 60
    while _finished_count(cluster) == before and time.monotonic() < deadline:
        time.sleep(0.02)  # until the old leader's sidecar has copied its first new segment
    cluster.move_leader()
    new = cluster.run(cluster.leader, None, -1)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err[-3000:]
    assert new
    # the old leader's sidecar saw the move between two segments and stopped there
    counts = out.split("UPLOADED ", 1)[1].split()
    old_uploaded, old_skipped = int(counts[0]), int(counts[2])
    assert old_uploaded >= 1 and old_skipped >= 1, out
    _finish(cluster)
    _check(cluster, "after a leader change mid-upload")
    print(
        f"three sidecars: {result.kills} kills, {result.refills} refills, {leader_moves} "
        f"leader moves, {time.monotonic() - started:.1f}s"
    )
