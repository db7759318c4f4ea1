"""kill -9, then lose the home (issue 36): the worker of :mod:`tests.crash.worker` is killed at
a crash point or a random time, its home is deleted, ``metadata rebuild`` runs on a new home
over the same store, and then

* the bucket never contradicts itself (no marker without its objects);
* every ledger the old home had as a complete offload is rebuilt, with its entry count, and
  every entry of every rebuilt ledger reads back byte-exact as the old home read it (no
  rebuilt ledger the old home did not have, none twice);
* every rebuilt offload verifies with its checksums;
* every attempt of the bucket that is not the rebuilt copy of its ledger is listed by the
  orphan audit (the workload's planted foreign objects aside);
* a resumed offload on the new home continues after the rebuilt ledgers without re-uploading
  any of them, and gc then leaves nothing of ours but orphans of ledgers the home lost.
"""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from devservers.endpoint import S3Endpoint
from formats.keys import parse_key
from formats.manifest import LEDGER_MARKERS
from offloader.api import Offloader, Position
from offloader.errors import AlreadyExists, InvalidKeyError, NotFound
from tests.crash.harness import (
    FOREIGN_REASONS,
    SUMMARIES,
    CrashCheckFailed,
    Kill,
    count_crash_points,
    crash_point_kills,
    random_kills,
    run_worker,
)
from tests.crash.worker import METADATA_ENV, NS, TOPIC, open_offloader, payload

SEED = int(os.environ.get("LEDGER_OFFLOADER_CRASH_SEED", "20261127"))
MIN_KILLS = 30
#: the crash points where the bucket's view and the home's can differ
POINT_PREFIXES = ("offload.", "writer.", "manifest.", "cleanup.", "gc.", "deletion.")


@dataclass
class LossResult:
    name: str
    killed: bool
    rebuilt: int = 0
    superseded: int = 0
    unfinished: int = 0
    orphans: int = 0
    entries: int = 0
    notes: list[str] = field(default_factory=list)


def _fail(name: str, message: str) -> CrashCheckFailed:
    return CrashCheckFailed(f"[{name}] {message}")


def _uuid_of(key: str) -> str | None:
    try:
        return parse_key(key).uuid
    except InvalidKeyError:
        return None


def _planted(key: str) -> bool:
    return key.endswith(("-ledger-9999", "-ledger-9998")) or key.startswith("junk/")


def _snapshot(off: Offloader) -> tuple[dict[int, int], dict[int, int], dict[Position, bytes]]:
    """The old home's view: complete offloads (ledger -> entries), every ledger's entry count,
    and every entry it reads, by position."""
    try:
        ledgers = off.topic_info(TOPIC).ledgers
    except NotFound:
        return {}, {}, {}
    complete = {r.ledger_id: r.entries for r in ledgers if r.offload_complete}
    counts = {r.ledger_id: r.entries for r in ledgers}
    entries = {Position(e.ledger_id, e.entry_id): e.payload for e in off.read(TOPIC)}
    return complete, counts, entries


def run_loss_scenario(
    workdir: Path,
    store_url: str | None,
    seed: int,
    kill: Kill,
    name: str,
    env: dict[str, str],
    *,
    metadata: tuple[str, Callable[[], None], str] | None = None,
) -> LossResult:
    """``metadata``: (the old PostgreSQL URL, what drops it, the new one); else SQLite."""
    home, new_home = workdir / "home", workdir / "new-home"
    url = store_url or f"file://{workdir / 'objects'}"
    old_url, drop, new_url = metadata if metadata is not None else (None, None, None)
    if old_url is not None:
        env = {**env, METADATA_ENV: old_url}
    killed, _, _ = run_worker(home, url, seed, kill, env)
    result = LossResult(name, killed)
    with open_offloader(str(home), url, old_url) as old:
        complete, counts, old_entries = _snapshot(old)
    shutil.rmtree(home)  # the disaster
    if drop is not None:
        drop()

    with open_offloader(str(new_home), url, new_url) as new:
        report = new.metadata_rebuild()
        problems = [i for i in report.items if i.action == "problem"]
        if problems:
            raise _fail(name, f"the bucket contradicts itself: {problems}")
        result.superseded = report.count("superseded")
        result.unfinished = report.count("unfinished")
        result.orphans = report.count("orphan")
        try:
            rebuilt = {r.ledger_id: r for r in new.topic_info(TOPIC).ledgers}
        except NotFound:
            rebuilt = {}
        result.rebuilt = len(rebuilt)
        if set(complete) - set(rebuilt):
            raise _fail(name, f"complete offloads lost: {sorted(set(complete) - set(rebuilt))}")
        for ledger_id, record in rebuilt.items():
            if ledger_id not in counts or counts[ledger_id] != record.entries:
                raise _fail(
                    name,
                    f"rebuilt ledger {ledger_id} ({record.entries} entries) "
                    f"differs from the old home's ({counts.get(ledger_id)})",
                )
            if not (record.offload_complete and record.local_deleted):
                raise _fail(name, f"rebuilt ledger {ledger_id} is not an offloaded ledger")
        read = (
            [(Position(e.ledger_id, e.entry_id), e.payload) for e in new.read(TOPIC)]
            if rebuilt
            else []
        )
        positions = [p for p, _ in read]
        if len(set(positions)) != len(positions) or positions != sorted(positions):
            raise _fail(name, "entries read twice or out of order after the rebuild")
        for position, data in read:
            if old_entries.get(position) != data:
                raise _fail(name, f"entry {position} differs from the old home's read")
        expected = sum(rebuilt[i].entries for i in rebuilt)
        if len(read) != expected:
            raise _fail(name, f"{len(read)} entries read, the rebuilt ledgers hold {expected}")
        result.entries = len(read)
        bad = [r for r in new.verify(checksums=True) if not r.ok] if rebuilt else []
        if bad:
            raise _fail(name, f"rebuilt offloads fail verification: {bad}")

        # every attempt in the bucket but the rebuilt copies is listed as an orphan
        claimed = {r.offload.uuid for r in rebuilt.values() if r.offload is not None}
        store = new.runtime.store
        bucket = {
            u
            for key in [o.key for o in store.list()]
            + [m.key for m in store.list_multipart_uploads()]
            if not _planted(key) and (u := _uuid_of(key)) is not None
        }
        audit = new.orphans(min_age_seconds=0)
        listed = {_uuid_of(o.key) for o in audit.objects} | {_uuid_of(u.key) for u in audit.uploads}
        if bucket - claimed - listed:
            raise _fail(
                name, f"attempts not listed as orphans: {sorted(bucket - claimed - listed)}"
            )
        if audit.missing:
            raise _fail(name, f"claimed objects missing: {audit.missing}")

        # resume: new ledgers offloaded after the rebuilt ones, none of those uploaded again
        def data_keys() -> set[str]:
            return {
                o.key
                for o in store.list()
                if not o.key.startswith("_") and not o.key.endswith("-index") and _uuid_of(o.key)
            }

        before = data_keys()
        with contextlib.suppress(AlreadyExists):  # nothing offloaded yet: nothing rebuilt
            new.create_namespace(NS)
        new.produce(TOPIC, [payload(seed, 10_000 + i) for i in range(7)])
        new.roll_over(TOPIC)
        new.offload_prefix(TOPIC, size_threshold=0)
        added = data_keys() - before
        top = max(rebuilt, default=-1)
        if not added or any(parse_key(k).ledger_id <= top for k in added):
            raise _fail(name, f"the resumed offload uploaded {sorted(added)} (rebuilt up to {top})")
        new.gc(min_age_seconds=0)
        after = new.orphans(min_age_seconds=0)
        ours = [
            o
            for o in (*after.objects, *after.uploads)
            if o.deletable or o.reason not in FOREIGN_REASONS
        ]
        if ours:
            raise _fail(name, f"gc left orphans of ours: {ours}")
        if any(k.startswith(LEDGER_MARKERS) for k in (o.key for o in after.objects)):
            raise _fail(name, "a marker is left as an orphan after gc")
    return result


def _kills(workdir: Path, rng: random.Random, per_point: int, randoms: int) -> list[Kill]:
    hits, seconds = count_crash_points(workdir, SEED)
    for point in (
        "offload.before_marker",
        "manifest.after_marker_put",
        "manifest.after_watermark_put",
    ):
        assert point in hits, f"crash point {point} not reached"
    chosen = [
        k
        for k in crash_point_kills(hits, per_point)
        if k.point and k.point.startswith(POINT_PREFIXES)
    ]
    return chosen + random_kills(rng, randoms, 1.5 * seconds)


def _summary(label: str, results: list[LossResult], seconds: float) -> str:
    kills = sum(r.killed for r in results)
    return (
        f"{label}: {kills} kills then the home deleted and rebuilt, {len(results)} scenarios; "
        f"ledgers rebuilt {sum(r.rebuilt for r in results)}, entries read back "
        f"{sum(r.entries for r in results)}, superseded {sum(r.superseded for r in results)}, "
        f"unfinished {sum(r.unfinished for r in results)}, orphan attempts "
        f"{sum(r.orphans for r in results)}; {seconds:.1f} s"
    )


@pytest.mark.slow
def test_kill9_then_lose_the_home(tmp_path: Path) -> None:
    started = time.monotonic()
    kills = _kills(tmp_path / "calibration", random.Random(SEED), 2, 10)

    def one(i: int) -> LossResult:
        kill = kills[i]
        seed = SEED if kill.point else SEED + i
        return run_loss_scenario(tmp_path / f"s{i}", None, seed, kill, str(kill), {})

    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(one, range(len(kills))))
    summary = _summary("file:// loss", results, time.monotonic() - started)
    print(f"\n{summary}")
    SUMMARIES.append(summary)
    assert sum(r.killed for r in results) >= MIN_KILLS, summary
    assert sum(r.unfinished + r.orphans for r in results) > 0, summary


@pytest.mark.s3
@pytest.mark.slow
@pytest.mark.parametrize("server", ["moto", pytest.param("rgw", marks=pytest.mark.rgw)])
def test_kill9_then_lose_the_home_on_s3(
    tmp_path: Path, server: str, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Over HTTP to moto, and to Ceph RGW (each ledger one 4 KiB part: RGW's 5 MiB minimum
    applies to every part but the last)."""
    endpoint: S3Endpoint = request.getfixturevalue(f"{server}_endpoint")
    env = endpoint.env()
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    kills = [
        Kill("writer.after_part", 2),
        Kill("writer.after_index_put", 1),
        Kill("offload.before_marker", 2),
        Kill("manifest.after_marker_put", 1),
        Kill("manifest.after_watermark_put", 3),
        Kill("offload.before_complete", 2),
        Kill("manifest.after_marker_delete", 1),
        Kill("gc.after_object_delete", 1),
    ]
    started = time.monotonic()
    results = [
        run_loss_scenario(
            tmp_path / f"s{i}",
            f"s3://{endpoint.new_bucket()}/crash",
            SEED,
            kill,
            f"{server} {kill}",
            env,
        )
        for i, kill in enumerate(kills)
    ]
    summary = _summary(f"{server} loss", results, time.monotonic() - started)
    print(f"\n{summary}")
    SUMMARIES.append(summary)
    assert all(r.killed for r in results), [r.name for r in results if not r.killed]


@pytest.mark.slow
def test_kill9_then_drop_the_postgresql_metadata(tmp_path: Path, pg_server: Any) -> None:
    """The metadata in PostgreSQL: after the kill its schema is dropped with the home, and
    the rebuild writes into a new, empty one."""
    import psycopg

    def dropper(url: str) -> Callable[[], None]:
        def drop() -> None:
            schema = url.rsplit("%3D", 1)[1]
            with psycopg.connect(pg_server.admin_url(), autocommit=True) as conn:
                conn.execute(f"DROP SCHEMA {schema} CASCADE".encode())

        return drop

    kills = [
        Kill("writer.after_part", 3),
        Kill("offload.before_marker", 4),
        Kill("manifest.after_marker_put", 2),
        Kill("manifest.after_watermark_put", 5),
        Kill("offload.before_complete", 3),
        Kill("gc.after_object_delete", 1),
    ]
    started = time.monotonic()
    results = []
    for i, kill in enumerate(kills):
        old = pg_server.new_url()
        results.append(
            run_loss_scenario(
                tmp_path / f"s{i}",
                None,
                SEED,
                kill,
                f"postgresql {kill}",
                {},
                metadata=(old, dropper(old), pg_server.new_url()),
            )
        )
    summary = _summary("postgresql loss", results, time.monotonic() - started)
    print(f"\n{summary}")
    SUMMARIES.append(summary)
    assert all(r.killed for r in results), [r.name for r in results if not r.killed]
