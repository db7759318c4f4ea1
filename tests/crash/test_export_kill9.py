"""kill -9 of ``export run`` at its crash points and at random times, re-run until done; then
DuckDB reads the Parquet output and proves every message is there exactly once and equals the
source (count, distinct message ids, SHA-256 of the values), on a local directory and on S3
(moto, and RGW when it runs).

``LEDGER_OFFLOADER_CRASH_SEED`` changes the seed of the random kills.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from offloader import crashpoints
from offloader.api import Offloader
from tests.crash.export_worker import TOPIC
from tests.crash.harness import SUMMARIES
from tests.servers.endpoint import S3Endpoint
from tests.spark.export_helpers import Clock, digest, duck_digest, new_home, produce_ledger

pytestmark = [pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
SEED = int(os.environ.get("LEDGER_OFFLOADER_CRASH_SEED", "20261126"))
POINTS = (
    "export.after_cleanup",
    "export.before_rename",
    "export.before_put",
    "export.after_file",
    "export.before_advance",
    "export.after_advance",
    "export.after_marker",
)
MIN_KILLS = 30


def _ts(i: int, now: int) -> Any:
    return None if i % 23 == 5 else now - (i % 7) * 3_000_000  # some late, some invalid


def _home(root: Path, store: str | None = None, endpoint: str | None = None) -> list[bytes]:
    clock = Clock()
    off = new_home(root, clock, store, endpoint)
    values: list[bytes] = []
    for n in range(4):
        values += produce_ledger(off, clock, TOPIC, len(values), 60 + 10 * n, ts=_ts, batch=3)
    off.close()
    return values


def _worker(
    home: Path, target: str, endpoint: str | None, env: dict[str, str]
) -> subprocess.Popen[str]:
    args = [sys.executable, "-m", "tests.crash.export_worker", str(home), target]
    return subprocess.Popen(
        args + ([endpoint] if endpoint else []),
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )


def _kill_run(
    home: Path,
    target: str,
    endpoint: str | None,
    base: dict[str, str],
    point: str | None,
    delay: float,
) -> bool:
    """One worker run, killed at ``point`` or after ``delay`` s; True if it finished."""
    env = dict(base)
    if point:
        env[crashpoints.ENV_VAR] = point
    proc = _worker(home, target, endpoint, env)
    assert proc.stdout is not None
    proc.stdout.readline()  # READY
    if point is None and delay >= 0:
        time.sleep(delay)
        proc.kill()
    out, _ = proc.communicate(timeout=120)
    return "DONE" in out


def _sweep(
    home: Path,
    target: str,
    endpoint: str | None,
    values: list[bytes],
    local: Path,
    mirror: Any = None,
) -> str:
    """Kill runs until MIN_KILLS kills landed; a run that finished first is followed by a
    reset to a random point (so there is work again); then run to completion and check."""
    rng = random.Random(SEED)
    base = {k: v for k, v in os.environ.items() if k != crashpoints.ENV_VAR}
    points = [
        p
        for p in POINTS
        if (p != "export.before_put") == (endpoint is None)
        or p not in ("export.before_put", "export.before_rename")
    ]
    plan: list[tuple[str | None, float]] = [(f"{p}:{n}", 0.0) for p in points for n in (1, 4)]
    kills = resets = 0
    with Offloader.from_settings(home) as off:
        ledgers = [r for r in off.topic_info(TOPIC).ledgers if r.entries]
    for attempt in range(3 * MIN_KILLS):
        if kills >= MIN_KILLS and attempt >= len(plan):
            break
        point, delay = plan[attempt] if attempt < len(plan) else (None, rng.uniform(0.02, 0.7))
        if _kill_run(home, target, endpoint, base, point, delay):
            ledger = rng.choice(ledgers)
            with Offloader.from_settings(home) as off:
                off.export_reset(
                    TOPIC,
                    target,
                    f"{ledger.ledger_id}:{rng.randrange(ledger.entries)}",
                    endpoint_url=endpoint,
                )
            resets += 1
        else:
            kills += 1
    assert _kill_run(home, target, endpoint, base, None, -1) or _kill_run(
        home, target, endpoint, base, None, -1
    )
    assert kills >= MIN_KILLS
    if mirror is not None:
        mirror()
    got = duck_digest(str(local))
    assert got == (len(values), len(values), digest(values)[1])
    return (
        f"export kill -9: {kills} kills survived ({resets} resets between completed runs), "
        f"{len(values)} messages exactly once in {target}"
    )


def test_export_kill9_local(tmp_path: Path) -> None:
    home = tmp_path / "home"
    values = _home(home)
    out = tmp_path / "lake"
    SUMMARIES.append(_sweep(home, str(out), None, values, out))
    with Offloader.from_settings(home) as off:
        st = off.export_status(TOPIC, str(out))
    assert st.rows == len(values) and st.uncommitted_files == 0 and st.lag_entries == 0
    assert not [p for p in out.rglob(".*")]  # no temporary file left


def test_export_kill9_s3(
    tmp_path: Path, s3_endpoint: S3Endpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key, value in s3_endpoint.env().items():
        monkeypatch.setenv(key, value)
    bucket = s3_endpoint.new_bucket()
    home = tmp_path / "home"
    values = _home(home)
    local = tmp_path / "mirror"

    def mirror() -> None:
        from tests.spark.test_export_s3 import mirror as copy

        copy(s3_endpoint, bucket, "lake", local)

    SUMMARIES.append(_sweep(home, f"s3://{bucket}/lake", s3_endpoint.url, values, local, mirror))
    client = s3_endpoint.client()
    assert not client.list_multipart_uploads(Bucket=bucket).get("Uploads")
