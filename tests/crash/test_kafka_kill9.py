"""kill -9 of ``kafka upload`` at every Kafka crash point and at random moments: no record
lost, no watermark ahead of what is remote, leftovers found by the orphan audit, and the next
run completes the copy."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from formats.kafka.batch import iter_records
from offloader.api import Offloader
from offloader.crashpoints import ENV_VAR
from offloader.metadata.kafka_base import COPY_FINISHED
from tests.crash.kafka_worker import SETTINGS
from tests.kafka.logdir import write_partition

ROOT = Path(__file__).resolve().parents[2]
POINTS = (
    "kafka.after_start_copy",
    "kafka.after_log_upload:2",
    "kafka.before_finish_copy:3",
    "kafka.after_start_delete",
)


def _worker(home: Path, log_dir: Path, crash_at: str | None) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if k != ENV_VAR}
    if crash_at:
        env[ENV_VAR] = crash_at
    return subprocess.Popen(
        [sys.executable, "-m", "tests.crash.kafka_worker", str(home), str(log_dir)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )


def _check_invariants(home: Path, scenario: str) -> None:
    """After a kill: the watermark never runs ahead of finished segments whose objects are
    all there; every abandoned attempt is visible to the orphan audit."""
    with Offloader.from_settings(home) as off:
        tier = off.kafka(SETTINGS)
        meta, store = tier.ctx.meta, tier.ctx.store
        for part in meta.list_partitions():
            finished = meta.list_segments(part.topic, part.partition, states=[COPY_FINISHED])
            top = max((s.end_offset for s in finished), default=part.watermark)
            assert part.watermark <= top, scenario
            for seg in finished:
                for kind, key in seg.keys.items():
                    size = store.head(key).size
                    if kind == "log":
                        assert size == seg.size_bytes, scenario
        started = meta.list_segments(states=["COPY_SEGMENT_STARTED", "DELETE_SEGMENT_STARTED"])
        report = off.orphans(min_age_seconds=0)
        flagged = {o.key for o in report.objects} | {u.key for u in report.uploads}
        for seg in started:
            if seg.state == "COPY_SEGMENT_STARTED":
                assert any(k in flagged for k in seg.keys.values()), scenario
        assert report.missing == (), scenario


def _check_complete(home: Path, layouts: list, scenario: str) -> None:  # type: ignore[type-arg]
    with Offloader.from_settings(home) as off:
        tier = off.kafka(SETTINGS)
        for layout in layouts:
            closed = layout.segments[:-1]
            remote = tier.ctx.meta.list_segments(
                layout.topic, layout.partition, states=[COPY_FINISHED]
            )
            assert [(s.base_offset, s.end_offset) for s in remote] == closed, scenario
            want = []
            for base, _ in closed:
                data = (layout.path / f"{base:020d}.log").read_bytes()
                want += [r.offset for h, r in iter_records(data) if not h.is_control]
            got = [r.offset for r in tier.read(layout.topic, layout.partition, from_offset=0)]
            assert got == want, scenario
        off.gc(min_age_seconds=0)
        assert off.orphans(min_age_seconds=0).clean, scenario


_RETENTION = (
    "import sys; from offloader.api import Offloader; "
    "from tests.crash.kafka_worker import SETTINGS; "
    "Offloader.from_settings(sys.argv[1]).kafka(SETTINGS).apply_retention()"
)


def _kill_retention(home: Path, log_dir: Path, point: str) -> None:
    """Remote retention killed between DELETE_SEGMENT_STARTED and the object deletes: the
    next run finishes the deletion and nothing is left behind."""
    out, _ = _worker(home, log_dir, None).communicate(timeout=120)
    assert "DONE" in out
    with Offloader.from_settings(home) as off:
        off.kafka(SETTINGS).set_retention("orders", 0, -1)
    proc = subprocess.Popen(
        [sys.executable, "-c", _RETENTION, str(home)],
        cwd=ROOT,
        env={**os.environ, ENV_VAR: point},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    assert proc.wait(timeout=120) == -signal.SIGKILL, point
    with Offloader.from_settings(home) as off:
        tier = off.kafka(SETTINGS)
        stuck = tier.ctx.meta.list_segments(states=["DELETE_SEGMENT_STARTED"])
        assert len(stuck) == 1, point
        assert all(tier.ctx.store.head(k).size >= 0 for k in stuck[0].keys.values())
        tier.apply_retention()
        assert tier.ctx.meta.get_segment(stuck[0].segment_id).state == "DELETE_SEGMENT_FINISHED"
        assert not tier.ctx.meta.list_segments(states=["DELETE_SEGMENT_STARTED"])
        off.gc(min_age_seconds=0)
        assert off.orphans(min_age_seconds=0).clean, point


@pytest.mark.slow
def test_kafka_upload_survives_kill9(tmp_path: Path) -> None:
    log_dir = tmp_path / "logs"
    layouts = [
        write_partition(log_dir, "orders", 0, records=500, transactions=True),
        write_partition(log_dir, "clicks", 0, records=300),
    ]
    rng = random.Random(11)
    scenarios = [(p, None) for p in POINTS] + [(None, rng.uniform(0.3, 1.5)) for _ in range(2)]
    for i, (point, delay) in enumerate(scenarios):
        home = tmp_path / f"home{i}"
        name = point or f"random kill after {delay:.2f}s"
        if point == "kafka.after_start_delete":
            _kill_retention(home, log_dir, point)
            continue
        proc = _worker(home, log_dir, point)
        if delay is not None:
            time.sleep(delay)
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
            proc.communicate(timeout=120)
        else:
            out, _ = proc.communicate(timeout=120)
            assert proc.returncode == -signal.SIGKILL and "DONE" not in out, name
        _check_invariants(home, name)
        proc = _worker(home, log_dir, None)
        out, _ = proc.communicate(timeout=120)
        assert proc.returncode == 0 and "DONE" in out, name
        _check_complete(home, layouts, name)


#: the upload's crash points, each killed at its 1st, 2nd or 3rd hit of a run
_UPLOAD_POINTS = ("kafka.after_start_copy", "kafka.after_log_upload", "kafka.before_finish_copy")
#: at least this many kill -9s of ``kafka upload`` (the hardening issue's bar)
MIN_KILLS = 30


@pytest.mark.slow
def test_thirty_kills_in_a_row_lose_nothing(tmp_path: Path) -> None:
    """``kafka upload`` killed again and again on one home, each run resuming what the one
    before left (a stale attempt cleaned, the next segment copied, killed at another point):
    after every kill the watermark is behind what is remote and each leftover is an orphan;
    when a home is complete the chain goes on with a new one; at the end every record reads
    back once, nothing is left over, and at least :data:`MIN_KILLS` kills happened."""
    log_dir = tmp_path / "logs"
    layouts = [
        write_partition(log_dir, "orders", 0, records=1500, transactions=True),
        write_partition(log_dir, "clicks", 0, records=900, segment_bytes=8 * 1024),
    ]
    rng = random.Random(34)
    kills = runs = homes = 0
    home = tmp_path / "home0"
    while kills < MIN_KILLS:
        runs += 1
        assert runs <= 4 * MIN_KILLS, f"only {kills} kills in {runs} runs"
        point = f"{rng.choice(_UPLOAD_POINTS)}:{rng.randint(1, 3)}"
        proc = _worker(home, log_dir, point)
        out, _ = proc.communicate(timeout=120)
        if proc.returncode == 0 and "DONE" in out:  # fewer segments left than the count
            _check_complete(home, layouts, f"home{homes} after {point}")
            homes += 1
            home = tmp_path / f"home{homes}"
            continue
        assert proc.returncode == -signal.SIGKILL, (point, proc.returncode)
        kills += 1
        _check_invariants(home, f"kill {kills} at {point}")
    out, _ = _worker(home, log_dir, None).communicate(timeout=120)
    assert "DONE" in out
    _check_complete(home, layouts, "the last home")
    assert kills >= MIN_KILLS
