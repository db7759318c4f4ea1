"""kill -9 of ``export run --to iceberg://...`` at its crash points (the writers', before and
after the Iceberg commit) and at random times, re-run until done, with new ledgers produced
between completed runs; then DuckDB's own Iceberg reader proves every message is in the table
exactly once and equals the source (count, distinct message ids, SHA-256 of the values), with
the warehouse on a local directory and on S3 (moto, and RGW when it runs).

``LEDGER_OFFLOADER_CRASH_SEED`` changes the seed of the random kills (:mod:`tests.crash.sweep`).
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from devservers.endpoint import S3Endpoint
from offloader.api import Offloader
from tests.crash.harness import SUMMARIES
from tests.crash.iceberg_worker import TABLE, TOPIC
from tests.crash.sweep import kill_run, sweep, use_endpoint
from tests.iceberg.helpers import digest, table_digest
from tests.spark.export_helpers import Clock, new_home, produce_ledger

pytestmark = [pytest.mark.slow]

POINTS = (
    "export.before_rename",
    "export.before_put",
    "export.after_file",
    "iceberg.before_commit",
    "iceberg.after_commit",
)


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


def _sweep(source: Source, warehouse: str, endpoint: str | None) -> str:
    """Kill runs until MIN_KILLS kills landed (a run that finished first is followed by a new
    ledger, so there is work again); then run to completion and check the table."""
    args = [str(source.home), warehouse] + ([endpoint] if endpoint else [])
    skip = "export.before_rename" if endpoint else "export.before_put"  # the other store's
    points = [p for p in POINTS if p != skip]

    def run(point: str | None, delay: float) -> bool:
        return kill_run("tests.crash.iceberg_worker", args, point, delay)

    def grow(rng: random.Random) -> None:
        source.grow(rng.randrange(5, 40))

    result = sweep(run, points, (1, 3), (0.1, 1.2), grow)
    return (
        f"iceberg export kill -9: {result.kills} kills survived ({result.refills} completed "
        f"runs followed by a new ledger), {len(source.values)} messages exactly once in "
        f"{TABLE} at {warehouse}"
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
    bucket = use_endpoint(s3_endpoint, monkeypatch)
    source = Source(tmp_path / "home", None, None)
    warehouse = f"s3://{bucket}/wh"
    SUMMARIES.append(_sweep(source, warehouse, s3_endpoint.url))
    _check(source, warehouse, s3_endpoint)
