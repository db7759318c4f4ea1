"""``make demo`` end to end: ``python -m examples.demo`` on its own moto server, as a user runs
it (ZooKeeper included: the cluster stage reads a ZooKeeper-described topic in Spark). Every
stage's line is checked (the stages check their own results and exit 1 on a
mismatch), and nothing but those lines is printed: no JVM start-up noise, no warnings."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from examples.demo import PER_KEY, TOPIC

pytestmark = [pytest.mark.spark, pytest.mark.s3, pytest.mark.zookeeper]

ROOT = Path(__file__).resolve().parents[2]
#: what Spark's default logging prints while its JVM starts
NOISE = ("WARN", "INFO", "NativeCodeLoader", "Setting default log level", "log4j", "SLF4J")


def test_the_demo_runs_the_main_job_quietly(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "OFFLOADER_"))}
    proc = subprocess.run(
        [sys.executable, "-m", "examples.demo", "--home", str(tmp_path / "home")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stderr == ""
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    assert lines[0].startswith("ledger-offloader demo on embedded moto server at http://127.0.0.1:")
    stages = [re.match(r"(\d+)\. (\w+) ", line) for line in lines[1:-1]]
    assert [(m.group(1), m.group(2)) for m in stages if m] == [
        ("1", "produce"),
        ("2", "offload"),
        ("3", "read"),
        ("4", "spark"),
        ("5", "cluster"),
        ("6", "iceberg"),
        ("7", "duckdb"),
    ]
    assert len(stages) == len(lines) - 2, "only one line per stage"
    total = sum(PER_KEY.values())
    assert f"{total} Pulsar messages" in lines[1] and TOPIC in lines[1]
    assert " ".join(f"{k}={n}" for k, n in PER_KEY.items()) in lines[4]
    assert "persistent://demo/manual/sensors read by name" in lines[5]
    assert " ".join(f"{k}={n}" for k, n in PER_KEY.items()) in lines[5]
    assert f"{total} messages exported" in lines[6]
    assert re.fullmatch(r"demo finished OK in \d+\.\d+s", lines[-1])
    assert not [line for line in lines if any(word in line for word in NOISE)]
