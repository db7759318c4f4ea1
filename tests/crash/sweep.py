"""The kill -9 sweep shared by the export harnesses (``test_export_kill9.py``, Parquet, and
``test_iceberg_kill9.py``, Iceberg): start a worker module, kill it at a crash point or after a
random delay, and repeat until :data:`MIN_KILLS` kills landed; then run it to completion.

A harness supplies what differs: its worker's command line, its crash points, the occurrences
and delays to kill at, and what to do after a run that finished before the kill (give it work
again: an export reset, or a new ledger). The checks after the sweep stay in each harness.

``LEDGER_OFFLOADER_CRASH_SEED`` changes the seed of the random kills.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pytest

from devservers.endpoint import S3Endpoint
from offloader import crashpoints
from tests.crash.launcher import spawn

SEED = int(os.environ.get("LEDGER_OFFLOADER_CRASH_SEED", "20261126"))
#: issues 24 and 27: every export harness survives at least this many kills per store
MIN_KILLS = 30
WORKER_TIMEOUT = 120.0


def kill_run(module: str, args: Sequence[str], point: str | None, delay: float) -> bool:
    """Run ``python -m module args`` (forked by :mod:`tests.crash.launcher`), killed at crash
    ``point`` (``name:N``) or ``delay`` s after it printed READY (``delay < 0``: not killed);
    True if it finished (printed DONE).
    A run that fails by itself (neither exit 0 nor SIGKILL) fails the test with its stderr."""
    env = {k: v for k, v in os.environ.items() if k != crashpoints.ENV_VAR}
    if point:
        env[crashpoints.ENV_VAR] = point
    proc = spawn(module, args, env)
    try:
        assert proc.stdout is not None
        proc.stdout.readline()  # READY
        if point is None and delay >= 0:
            time.sleep(delay)
            proc.kill()
        out, err = proc.communicate(timeout=WORKER_TIMEOUT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    if proc.returncode not in (0, -9):
        raise AssertionError(f"{module} exited {proc.returncode}: {err[-3000:]}")
    return "DONE" in out


@dataclass(frozen=True)
class SweepResult:
    #: runs killed (the worker died of SIGKILL before DONE)
    kills: int
    #: runs that finished before the kill, each followed by ``refill``
    refills: int


def sweep(
    run: Callable[[str | None, float], bool],
    points: Sequence[str],
    occurrences: Sequence[int],
    delays: tuple[float, float],
    refill: Callable[[random.Random], None],
) -> SweepResult:
    """Kill ``run(point, delay)`` at every point's ``occurrences``, then after random
    ``delays`` (uniform, seconds) until :data:`MIN_KILLS` kills landed (at most 3x as many
    runs); after a run that finished first, ``refill(rng)`` gives the worker work again, and
    when that run was one of the random ones the upper delay shrinks below its delay (so the
    kills keep landing however fast this machine runs the worker).
    Then a run to completion, with a second try if the first does not print DONE."""
    rng = random.Random(SEED)
    plan: list[tuple[str | None, float]] = [(f"{p}:{n}", 0.0) for p in points for n in occurrences]
    kills = refills = 0
    low, high = delays
    for attempt in range(3 * MIN_KILLS):
        if kills >= MIN_KILLS and attempt >= len(plan):
            break
        point, delay = plan[attempt] if attempt < len(plan) else (None, rng.uniform(low, high))
        if run(point, delay):
            refill(rng)
            refills += 1
            if point is None:
                # the worker finished within ``delay`` on this machine: aim the random kills
                # earlier (an idle machine runs it much faster than a loaded one)
                high = max(low, delay * 0.8)
        else:
            kills += 1
    assert run(None, -1) or run(None, -1), "the worker never ran to completion after the sweep"
    assert kills >= MIN_KILLS, f"only {kills} kills landed in {3 * MIN_KILLS} runs"
    return SweepResult(kills, refills)


def use_endpoint(endpoint: S3Endpoint, monkeypatch: pytest.MonkeyPatch) -> str:
    """The endpoint's credentials in this process's environment (the workers inherit them);
    returns a fresh bucket."""
    for key, value in endpoint.env().items():
        monkeypatch.setenv(key, value)
    return endpoint.new_bucket()
