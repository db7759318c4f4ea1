"""kill -9 of ``kafka upload``, then lose the home (issue 36): the Kafka uploader is killed at
random crash points (each at a random hit) and random moments, its home is deleted (with
PostgreSQL: its schema dropped), ``metadata rebuild`` runs on a new home over the same store,
and then

* the bucket never contradicts itself (no marker without its objects);
* every segment the old home had COPY_SEGMENT_FINISHED is rebuilt with the same segment id and
  offsets (and a copy whose marker was written before the kill, too); every rebuilt segment
  reads back exactly the records of the broker's ``.log``, none twice;
* every segment id of the bucket that is not a rebuilt record (an unfinished attempt) is
  listed by the orphan audit;
* the next run, on the rebuilt home, continues from the rebuilt watermark: no rebuilt segment
  is uploaded again (their objects are untouched and still the records'), and it is itself
  killed, or finishes with every closed segment remote exactly once.

The chain goes on (kill, lose the home, rebuild, resume) until at least :data:`MIN_KILLS`
kills; on the file store and moto with SQLite, on PostgreSQL, and on Ceph RGW where the fixture
finds radosgw.
"""

from __future__ import annotations

import itertools
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from devservers.endpoint import S3Endpoint
from formats.kafka.batch import iter_records
from formats.kafka.errors import KafkaNameError
from formats.kafka.names import parse_remote_key
from offloader.api import Offloader
from offloader.crashpoints import ENV_VAR
from offloader.metadata.kafka_base import COPY_FINISHED
from tests.crash.kafka_worker import METADATA_ENV, PART_SIZE_ENV, SETTINGS
from tests.kafka.logdir import PartitionLayout, write_partition

ROOT = Path(__file__).resolve().parents[2]
SEED = int(os.environ.get("LEDGER_OFFLOADER_CRASH_SEED", "20261128"))
MIN_KILLS = 30
#: the upload's crash points where the bucket and the home can differ; each killed at a
#: random hit of a run
POINTS = (
    "kafka.after_start_copy",
    "kafka.after_log_upload",
    "kafka.after_marker_put",
    "manifest.after_watermark_put",
    "kafka.before_finish_copy",
)


@dataclass
class Stats:
    kills: int = 0
    random_kills: int = 0
    rebuilt: int = 0
    orphans: int = 0
    finished_runs: int = 0


def _worker(
    home: Path, log_dir: Path, store: str, env: dict[str, str], crash_at: str | None
) -> subprocess.Popen[str]:
    full = {k: v for k, v in os.environ.items() if k != ENV_VAR} | env
    if crash_at:
        full[ENV_VAR] = crash_at
    return subprocess.Popen(
        [sys.executable, "-m", "tests.crash.kafka_worker", str(home), str(log_dir), store],
        cwd=ROOT,
        env=full,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )


def _want(layouts: list[PartitionLayout]) -> dict[tuple[str, int], dict[int, bytes | None]]:
    """Every record of every closed segment, by partition and offset (control records out)."""
    out: dict[tuple[str, int], dict[int, bytes | None]] = {}
    for lay in layouts:
        records: dict[int, bytes | None] = {}
        for base, _ in lay.segments[:-1]:
            data = (lay.path / f"{base:020d}.log").read_bytes()
            records.update({r.offset: r.value for h, r in iter_records(data) if not h.is_control})
        out[(lay.topic, lay.partition)] = records
    return out


def _open(home: Path, store: str, metadata: str | None) -> Offloader:
    return Offloader.from_settings(home, store, metadata_url=metadata)


def _finished(off: Offloader) -> dict[str, tuple[str, int, int, int, str]]:
    return {
        s.segment_id: (s.topic, s.partition, s.first_offset, s.end_offset, s.keys["log"])
        for s in off.kafka(SETTINGS).ctx.meta.list_segments(states=[COPY_FINISHED])
    }


def _check_rebuilt(
    off: Offloader,
    old: dict[str, tuple[str, int, int, int, str]],
    want: dict[tuple[str, int], dict[int, bytes | None]],
    name: str,
    stats: Stats,
) -> dict[str, tuple[str, int, int, int, str]]:
    report = off.metadata_rebuild()
    problems = [i for i in report.items if i.action in ("problem", "conflict")]
    assert not problems, (name, problems)
    recorded = [i for i in report.items if i.kind == "kafka-segments" and i.action == "offload"]
    # one GET per recorded copy (its marker body: the span checks), no HEAD
    assert report.gets == len(recorded) and report.heads == 0, name
    rebuilt = _finished(off)
    lost = set(old) - set(rebuilt)
    assert not lost, (name, "finished segments lost", lost)
    stats.rebuilt += len(rebuilt)
    tier = off.kafka(SETTINGS)
    for (topic, partition), records in want.items():
        ranges = sorted((s[2], s[3]) for s in rebuilt.values() if s[:2] == (topic, partition))
        for (_, end), (start, _) in itertools.pairwise(ranges):
            assert end < start, (name, "two copies of an offset", ranges)
        if not ranges:
            continue
        got = [(r.offset, r.value) for r in tier.read(topic, partition, from_offset=0)]
        offsets = [o for o, _ in got]
        assert offsets == sorted(set(offsets)), (name, "records read twice or out of order")
        top = ranges[-1][1]
        assert got == [(o, v) for o, v in sorted(records.items()) if o <= top], name
        part = tier.ctx.meta.get_partition(topic, partition)
        assert part is not None and part.watermark == top, (name, part, top)
    # every segment id in the bucket that is no rebuilt record is an orphan of the audit
    store = off.runtime.store
    ids = set()
    for key in [o.key for o in store.list()] + [u.key for u in store.list_multipart_uploads()]:
        try:
            ids.add(parse_remote_key(key).segment_id)
        except KafkaNameError:  # manifests and other keys
            continue
    audit = off.orphans(min_age_seconds=0)
    listed = {
        parse_remote_key(o.key).segment_id for o in audit.objects if "/segments/" not in o.key
    }
    listed |= {parse_remote_key(u.key).segment_id for u in audit.uploads}
    unfinished = ids - set(rebuilt)
    assert not unfinished - listed, (name, "unfinished attempts not listed", unfinished - listed)
    assert report.count("orphan") + report.count("superseded") >= len(unfinished), name
    stats.orphans += len(unfinished)
    assert not audit.missing, name
    return rebuilt


def run_chain(
    workdir: Path,
    store: str,
    env: dict[str, str],
    new_metadata: Callable[[], tuple[str | None, Callable[[], None]]],
    label: str,
    seed: int = SEED,
) -> Stats:
    """Kill, lose the home, rebuild, resume; a finished run starts a new store prefix (see
    the module)."""
    rng = random.Random(seed)
    stats = Stats()
    round_no = 0
    while stats.kills < MIN_KILLS:
        round_no += 1
        assert round_no <= 12, f"{label}: only {stats.kills} kills in {round_no} rounds"
        log_dir = workdir / f"logs{round_no}"
        layouts = [
            write_partition(log_dir, "orders", 0, records=900, transactions=True),
            write_partition(log_dir, "clicks", 0, records=500, segment_bytes=6 * 1024),
        ]
        want = _want(layouts)
        url = f"{store}/r{round_no}"
        metadata, drop = new_metadata()
        home = workdir / f"r{round_no}-home0"
        previous: dict[str, tuple[str, int, int, int, str]] = {}
        for step in range(1, 100):
            name = f"{label} round {round_no} step {step}"
            if rng.random() < 0.2:
                proc = _worker(home, log_dir, url, env | _meta_env(metadata), None)
                time.sleep(rng.uniform(0.6, 2.0))
                if proc.poll() is None:
                    proc.send_signal(signal.SIGKILL)
                    stats.random_kills += 1
                out, _ = proc.communicate(timeout=120)
            else:
                point = f"{rng.choice(POINTS)}:{rng.randint(1, 3)}"
                name += f" at {point}"
                proc = _worker(home, log_dir, url, env | _meta_env(metadata), point)
                out, _ = proc.communicate(timeout=120)
            with _open(home, url, metadata) as old:
                finished = _finished(old)
            # the resumed run uploaded none of what the rebuild had recorded again
            for segment_id, row in previous.items():
                assert finished.get(segment_id) == row, (name, "a rebuilt segment changed")
            same_base = {(r[0], r[1], r[2]) for r in previous.values()}
            again = [r for s, r in finished.items() if s not in previous and r[:3] in same_base]
            assert not again, (name, "re-uploaded", again)
            if proc.returncode == 0 and "DONE" in out:
                stats.finished_runs += 1
                closed = sorted(
                    (lay.topic, lay.partition, base, end)
                    for lay in layouts
                    for base, end in lay.segments[:-1]
                )
                got = sorted((r[0], r[1], r[2], r[3]) for r in finished.values())
                assert got == closed, (name, got, closed)
                break
            assert proc.returncode == -signal.SIGKILL, (name, proc.returncode)
            stats.kills += 1
            # the disaster: the home (and its metadata) is gone
            shutil.rmtree(home)
            drop()
            metadata, drop = new_metadata()
            home = workdir / f"r{round_no}-home{step}"
            with _open(home, url, metadata) as new:
                previous = _check_rebuilt(new, finished, want, name, stats)
    return stats


def _meta_env(metadata: str | None) -> dict[str, str]:
    return {METADATA_ENV: metadata} if metadata else {}


def _sqlite() -> tuple[str | None, Callable[[], None]]:
    return None, lambda: None


def _summary(label: str, stats: Stats, seconds: float) -> str:
    return (
        f"{label}: {stats.kills} kills of kafka upload ({stats.random_kills} at random moments), "
        f"each followed by the home deleted and rebuilt; segments rebuilt {stats.rebuilt}, "
        f"unfinished attempts listed as orphans {stats.orphans}, finished runs "
        f"{stats.finished_runs}; {seconds:.1f} s"
    )


@pytest.mark.slow
def test_kafka_kill9_then_lose_the_home(tmp_path: Path) -> None:
    started = time.monotonic()
    stats = run_chain(tmp_path, f"file://{tmp_path / 'objects'}", {}, _sqlite, "file")
    summary = _summary("file:// kafka loss", stats, time.monotonic() - started)
    print(f"\n{summary}")
    assert stats.kills >= MIN_KILLS and stats.orphans > 0 and stats.finished_runs > 0, summary


@pytest.mark.s3
@pytest.mark.slow
@pytest.mark.parametrize("server", ["moto", pytest.param("rgw", marks=pytest.mark.rgw)])
def test_kafka_kill9_then_lose_the_home_on_s3(
    tmp_path: Path, server: str, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Over HTTP to moto, and to Ceph RGW (there each test segment is one PUT: RGW's 5 MiB
    minimum applies to every part but the last)."""
    endpoint: S3Endpoint = request.getfixturevalue(f"{server}_endpoint")
    env = endpoint.env()
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    if server == "rgw":
        env = env | {PART_SIZE_ENV: str(8 * 1024 * 1024)}
    started = time.monotonic()
    bucket = endpoint.new_bucket()
    stats = run_chain(tmp_path, f"s3://{bucket}/kafka", env, _sqlite, server)
    summary = _summary(f"{server} kafka loss", stats, time.monotonic() - started)
    print(f"\n{summary}")
    assert stats.kills >= MIN_KILLS and stats.orphans > 0, summary


@pytest.mark.slow
def test_kafka_kill9_then_drop_the_postgresql_metadata(tmp_path: Path, pg_server: Any) -> None:
    """The metadata in PostgreSQL: after each kill its schema is dropped with the home, and the
    rebuild writes into a new, empty one."""
    import psycopg

    def new_metadata() -> tuple[str | None, Callable[[], None]]:
        url = pg_server.new_url()

        def drop() -> None:
            schema = url.rsplit("%3D", 1)[1]
            with psycopg.connect(pg_server.admin_url(), autocommit=True) as conn:
                conn.execute(f"DROP SCHEMA {schema} CASCADE".encode())

        return url, drop

    started = time.monotonic()
    stats = run_chain(tmp_path, f"file://{tmp_path / 'objects'}", {}, new_metadata, "postgresql")
    summary = _summary("postgresql kafka loss", stats, time.monotonic() - started)
    print(f"\n{summary}")
    assert stats.kills >= MIN_KILLS and stats.orphans > 0, summary
