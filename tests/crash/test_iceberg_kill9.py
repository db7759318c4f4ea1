"""kill -9 of ``export run --to iceberg://...`` at its crash points (the writers', before and
after the Iceberg commit) and at random times, re-run until done, with new ledgers produced
between completed runs; then DuckDB's own Iceberg reader proves every message is in the table
exactly once and equals the source (count, distinct message ids, SHA-256 of the values), with
the warehouse on a local directory and on S3 (moto, and RGW when it runs).

``LEDGER_OFFLOADER_CRASH_SEED`` changes the seed of the random kills.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest

from offloader import crashpoints
from offloader.api import Offloader
from tests.crash.harness import SUMMARIES
from tests.crash.iceberg_worker import TABLE, TOPIC
from tests.iceberg.helpers import digest, table_digest
from tests.servers.endpoint import S3Endpoint
from tests.spark.export_helpers import Clock, new_home, produce_ledger

pytestmark = [pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
SEED = int(os.environ.get("LEDGER_OFFLOADER_CRASH_SEED", "20261126"))
POINTS = (
    "export.before_rename",
    "export.before_put",
    "export.after_file",
    "iceberg.before_commit",
    "iceberg.after_commit",
)
MIN_KILLS = 30


class Source:
    """The topic's home: what it holds, and more ledgers on demand."""

    def __init__(self, home: Path, store: str | None, endpoint: str | None) -> None:
        self.home = home
        self.clock = Clock()
        off = new_home(home, self.clock, store, endpoint)
        self.values: list[bytes] = []
        for n in range(3):
            self.values += produce_ledger(off, self.clock, TOPIC, len(self.values), 50 + 10 * n)
        off.close()

    def grow(self, count: int) -> None:
        with Offloader.from_settings(self.home, clock_ms=self.clock) as off:
            self.values += produce_ledger(off, self.clock, TOPIC, len(self.values), count)


def _kill_run(
    source: Source,
    warehouse: str,
    endpoint: str | None,
    base: dict[str, str],
    point: str | None,
    delay: float,
) -> bool:
    """One worker run, killed at ``point`` or after ``delay`` s; True if it finished."""
    env = dict(base)
    if point:
        env[crashpoints.ENV_VAR] = point
    args = [sys.executable, "-m", "tests.crash.iceberg_worker", str(source.home), warehouse]
    proc = subprocess.Popen(
        args + ([endpoint] if endpoint else []),
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    proc.stdout.readline()  # READY
    if point is None and delay >= 0:
        time.sleep(delay)
        proc.kill()
    out, err = proc.communicate(timeout=120)
    if proc.returncode not in (0, -9):  # a run that failed by itself, not killed: say why
        raise AssertionError(f"the export worker exited {proc.returncode}: {err[-3000:]}")
    return "DONE" in out


def _sweep(source: Source, warehouse: str, endpoint: str | None) -> str:
    """Kill runs until MIN_KILLS kills landed (a run that finished first is followed by a new
    ledger, so there is work again); then run to completion and check the table."""
    rng = random.Random(SEED)
    base = {k: v for k, v in os.environ.items() if k != crashpoints.ENV_VAR}
    skip = "export.before_rename" if endpoint else "export.before_put"  # the other store's
    points = [p for p in POINTS if p != skip]
    plan: list[tuple[str | None, float]] = [(f"{p}:{n}", 0.0) for p in points for n in (1, 3)]
    kills = grown = 0
    for attempt in range(3 * MIN_KILLS):
        if kills >= MIN_KILLS and attempt >= len(plan):
            break
        point, delay = plan[attempt] if attempt < len(plan) else (None, rng.uniform(0.1, 1.2))
        if _kill_run(source, warehouse, endpoint, base, point, delay):
            source.grow(rng.randrange(5, 40))
            grown += 1
        else:
            kills += 1
    assert _kill_run(source, warehouse, endpoint, base, None, -1) or _kill_run(
        source, warehouse, endpoint, base, None, -1
    )
    assert kills >= MIN_KILLS
    return (
        f"iceberg export kill -9: {kills} kills survived ({grown} completed runs followed by a "
        f"new ledger), {len(source.values)} messages exactly once in {TABLE} at {warehouse}"
    )


def _check(source: Source, warehouse: str, endpoint: S3Endpoint | None) -> None:
    with Offloader.from_settings(source.home) as off:
        target = off.iceberg_target(
            TABLE, warehouse=warehouse, endpoint_url=endpoint.url if endpoint else None
        )
        st = off.export_iceberg_status(TOPIC, target)
    assert st.lag_entries == 0 and st.total_records == len(source.values)
    got = table_digest(st.metadata_location, endpoint)
    assert got == (len(source.values), len(source.values), digest(source.values))


def test_iceberg_kill9_local(tmp_path: Path) -> None:
    source = Source(tmp_path / "home", None, None)
    warehouse = str(tmp_path / "wh")
    SUMMARIES.append(_sweep(source, warehouse, None))
    _check(source, warehouse, None)


def test_iceberg_kill9_s3(
    tmp_path: Path, s3_endpoint: S3Endpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key, value in s3_endpoint.env().items():
        monkeypatch.setenv(key, value)
    bucket = s3_endpoint.new_bucket()
    source = Source(tmp_path / "home", None, None)
    warehouse = f"s3://{bucket}/wh"
    SUMMARIES.append(_sweep(source, warehouse, s3_endpoint.url))
    _check(source, warehouse, s3_endpoint)
