"""kill -9 of ``export run`` at its crash points and at random times, re-run until done; then
DuckDB reads the Parquet output and proves every message is there exactly once and equals the
source (count, distinct message ids, SHA-256 of the values), on a local directory and on S3
(moto, and RGW when it runs).

``LEDGER_OFFLOADER_CRASH_SEED`` changes the seed of the random kills (:mod:`tests.crash.sweep`).
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from devservers.endpoint import S3Endpoint
from offloader.api import Offloader
from tests.crash.export_worker import TOPIC
from tests.crash.harness import SUMMARIES
from tests.crash.sweep import kill_run, sweep, use_endpoint
from tests.spark.export_helpers import Clock, digest, duck_digest, new_home, produce_ledger

pytestmark = [pytest.mark.slow]

POINTS = (
    "export.after_cleanup",
    "export.before_rename",
    "export.before_put",
    "export.after_file",
    "export.before_advance",
    "export.after_advance",
    "export.after_marker",
)


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
    args = [str(home), target] + ([endpoint] if endpoint else [])
    points = [
        p
        for p in POINTS
        if (p != "export.before_put") == (endpoint is None)
        or p not in ("export.before_put", "export.before_rename")
    ]
    with Offloader.from_settings(home) as off:
        ledgers = [r for r in off.topic_info(TOPIC).ledgers if r.entries]

    def run(point: str | None, delay: float) -> bool:
        return kill_run("tests.crash.export_worker", args, point, delay)

    def reset(rng: random.Random) -> None:
        ledger = rng.choice(ledgers)
        with Offloader.from_settings(home) as off:
            off.export_reset(
                TOPIC,
                target,
                f"{ledger.ledger_id}:{rng.randrange(ledger.entries)}",
                endpoint_url=endpoint,
            )

    result = sweep(run, points, (1, 4), (0.02, 0.7), reset)
    if mirror is not None:
        mirror()
    got = duck_digest(str(local))
    assert got == (len(values), len(values), digest(values)[1])
    return (
        f"export kill -9: {result.kills} kills survived ({result.refills} resets between "
        f"completed runs), {len(values)} messages exactly once in {target}"
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
    bucket = use_endpoint(s3_endpoint, monkeypatch)
    home = tmp_path / "home"
    values = _home(home)
    local = tmp_path / "mirror"

    def mirror() -> None:
        from tests.spark.test_export_s3 import mirror as copy

        copy(s3_endpoint, bucket, "lake", local)

    SUMMARIES.append(_sweep(home, f"s3://{bucket}/lake", s3_endpoint.url, values, local, mirror))
    client = s3_endpoint.client()
    assert not client.list_multipart_uploads(Bucket=bucket).get("Uploads")
