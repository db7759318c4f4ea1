"""``make tour`` end to end: ``python -m examples.tour`` on its own moto server runs every
capability (and with it every other example: the Spark jobs, the Kafka part, the two brokers
on PostgreSQL); each step checks its own result and the tour exits 1 on the first failure."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.s3, pytest.mark.postgres, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]


def test_the_tour_runs_every_step(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "OFFLOADER_"))}
    proc = subprocess.run(
        [sys.executable, "-m", "examples.tour", "--home", str(tmp_path / "home")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    steps = [line for line in proc.stdout.splitlines() if line.startswith("=== ")]
    assert len(steps) >= 20
    skipped = [line for line in proc.stdout.splitlines() if line.lstrip().startswith("skipped:")]
    assert not skipped, f"every part runs in the test suite: {skipped}"
    assert "tour finished OK" in proc.stdout
    assert "Setting default log level" not in proc.stdout + proc.stderr
