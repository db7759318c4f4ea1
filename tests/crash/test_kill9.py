"""kill -9 at crash points and at random times through produce, rollover, offload, complete,
the deletion lag and gc; :mod:`tests.crash.harness` says what is checked after every kill.

``LEDGER_OFFLOADER_CRASH_SEED`` changes the seed of the payloads and random kills;
``LEDGER_OFFLOADER_CRASH_PER_POINT`` how many occurrences of each crash point the sweep kills at.
"""

from __future__ import annotations

import os
import random
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from devservers.endpoint import S3Endpoint
from offloader import crashpoints
from tests.crash.harness import (
    SUMMARIES,
    Kill,
    ScenarioResult,
    count_crash_points,
    crash_point_kills,
    random_kills,
    run_scenario,
)

SEED = int(os.environ.get("LEDGER_OFFLOADER_CRASH_SEED", "20261123"))
PER_POINT = int(os.environ.get("LEDGER_OFFLOADER_CRASH_PER_POINT", "4"))
MIN_KILL_POINTS = 50
#: every crash point the workload must reach (a renamed or lost insertion fails the sweep)
EXPECTED_POINTS = frozenset(
    {
        "produce.after_append",
        "produce.after_stats",
        "rollover.after_add_ledger",
        "rollover.after_file_close",
        "rollover.after_meta_close",
        "offload.before_begin",
        "offload.after_begin",
        "writer.after_create_upload",
        "writer.after_part",
        "writer.before_complete_upload",
        "writer.after_complete_upload",
        "writer.after_index_put",
        "offload.before_complete",
        "offload.after_complete",
        "deletion.before_mark",
        "deletion.after_mark",
        "deletion.after_unlink",
        "gc.after_object_delete",
        "gc.after_upload_abort",
    }
)
#: kills in sequence on one home: the later ones land in what only a restart runs (the retry
#: of an interrupted offload and its cleanup, recovery of a torn tail, the leftover sweep)
CHAINS: list[tuple[str, list[Kill]]] = [
    (
        "retry cleans a crashed upload",
        [Kill("writer.after_part", 2), Kill("cleanup.between_deletes", 1)],
    ),
    (
        "retry cleans a crashed index",
        [Kill("writer.after_index_put", 1), Kill("cleanup.between_deletes", 1)],
    ),
    (
        "retry after a lost complete",
        [
            Kill("offload.before_complete", 2),
            Kill("offload.after_begin", 1),
            Kill("offload.after_complete", 1),
        ],
    ),
    (
        "crashes in recovery of the tail",
        [
            Kill("produce.after_append", 3),
            Kill("produce.after_append", 1),
            Kill("rollover.after_file_close", 1),
            Kill("rollover.after_add_ledger", 1),
        ],
    ),
    (
        "crashes around a deleted copy",
        [
            Kill("deletion.after_mark", 1),
            Kill("deletion.before_mark", 1),
            Kill("deletion.after_unlink", 1),
        ],
    ),
    (
        "crashes in gc, twice",
        [
            Kill("gc.after_object_delete", 1),
            Kill("gc.after_object_delete", 1),
            Kill("gc.after_upload_abort", 1),
        ],
    ),
]


def test_crash_point_parsing() -> None:
    assert crashpoints._parse(None) is None
    assert crashpoints._parse("") is None
    assert crashpoints._parse("a.b") == ("a.b", 1)
    assert crashpoints._parse("a.b:3") == ("a.b", 3)
    assert crashpoints._parse("a.b:0") == ("a.b", 1)
    assert crashpoints._parse("a:b") == ("a:b", 1)


@pytest.mark.slow  # the crash harness: one worker killed per phase
def test_one_kill_per_phase(tmp_path: Path) -> None:
    """A quick sample (one kill in each phase) outside the slow sweep."""
    kills = [
        Kill("produce.after_append", 4),
        Kill("writer.after_part", 1),
        Kill("offload.before_complete", 1),
        Kill("deletion.after_mark", 1),
        Kill("gc.after_object_delete", 1),
    ]
    results = [
        run_scenario(tmp_path / str(i), None, SEED + i, [kill], str(kill))
        for i, kill in enumerate(kills)
    ]
    assert all(r.kills for r in results), [r.missed for r in results]


def summarize(results: list[ScenarioResult], seconds: float) -> str:
    kills = sum(len(r.kills) for r in results)
    checked = sum(r.entries_checked for r in results)
    acked = sum(r.acked for r in results)
    missed = sum(len(r.missed) for r in results)
    leftovers = sum(len(r.store_tmp_leftovers) for r in results)
    return (
        f"kill points survived: {kills} in {len(results)} scenarios; acknowledged entries "
        f"checked: {checked} ({acked} distinct); kills not reached (the worker finished "
        f"first): {missed}; local-store .tmp leftovers: {leftovers}; {seconds:.1f} s"
    )


@pytest.mark.slow
def test_kill9_sweep(tmp_path: Path) -> None:
    started = time.monotonic()
    hits, run_seconds = count_crash_points(tmp_path / "calibration", SEED)
    missing = EXPECTED_POINTS - set(hits)
    assert not missing, f"crash points not reached: {sorted(missing)}"
    rng = random.Random(SEED)
    scenarios = [(str(kill), [kill]) for kill in crash_point_kills(hits, PER_POINT)]
    scenarios += CHAINS
    # the worker runs a little slower than in process (two at a time): cover its whole run
    max_delay = 1.5 * run_seconds
    scenarios += [(str(kill), [kill]) for kill in random_kills(rng, 16, max_delay)]
    scenarios += [("random x3", random_kills(rng, 3, max_delay)) for _ in range(4)]

    def one(i: int) -> ScenarioResult:
        name, kills = scenarios[i]
        # the crash-point scenarios replay the calibrated run (same payloads, same counts)
        seed = SEED if all(k.point for k in kills) else SEED + i
        return run_scenario(tmp_path / f"s{i}", None, seed, kills, name)

    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(one, range(len(scenarios))))
    summary = summarize(results, time.monotonic() - started)
    print(f"\n{summary}")
    SUMMARIES.append(f"file:// sweep: {summary}")
    for result in results:
        if result.store_tmp_leftovers:
            print(f"  {result.name}: left {result.store_tmp_leftovers}")
        if result.missed:
            print(f"  {result.name}: not reached {result.missed}")
    assert sum(len(r.kills) for r in results) >= MIN_KILL_POINTS, summary
    for name, kills in CHAINS:
        chain = next(r for r in results if r.name == name)
        assert len(chain.kills) == len(kills), (name, chain.missed)


@pytest.mark.s3
@pytest.mark.slow
def test_kill9_on_moto(
    tmp_path: Path, moto_endpoint: S3Endpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A few kills with the offloads going to an S3 server over HTTP (moto)."""
    env = moto_endpoint.env()
    for name, value in env.items():
        monkeypatch.setenv(name, value)  # the harness's own restarts talk to moto too
    kills = [
        Kill("writer.after_create_upload", 2),
        Kill("writer.after_complete_upload", 1),
        Kill("offload.after_complete", 3),
        Kill("deletion.after_mark", 2),
        Kill("gc.after_upload_abort", 1),
    ]
    started = time.monotonic()
    results = []
    for i, kill in enumerate(kills):
        bucket = moto_endpoint.new_bucket()
        results.append(
            run_scenario(
                tmp_path / f"s{i}",
                f"s3://{bucket}/crash",
                SEED + i,
                [kill],
                f"moto {kill}",
                env=env,
            )
        )
    summary = summarize(results, time.monotonic() - started)
    print(f"\nmoto: {summary}")
    SUMMARIES.append(f"moto: {summary}")
    assert all(r.kills for r in results), [r.missed for r in results]
