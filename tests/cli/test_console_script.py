"""The installed ``offloader`` console script in a subprocess, against a real S3 server over HTTP
(moto's server, and Ceph RGW when it can run): the whole operator flow, logs, signals, errors."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from cli.topics.produce import synthetic_payloads
from devservers.endpoint import S3Endpoint

pytestmark = pytest.mark.s3

NS = "tenant/ns"
TOPIC = "persistent://tenant/ns/events"
PREFIX = "tiered"


def offloader_command() -> list[str]:
    """``.venv/bin/offloader`` when installed next to this interpreter, else ``-m cli.main``."""
    script = Path(sys.executable).parent / "offloader"
    return [str(script)] if script.exists() else [sys.executable, "-m", "cli.main"]


@pytest.fixture()
def env(s3_endpoint: S3Endpoint, s3_bucket: str, tmp_path: Path) -> dict[str, str]:
    return {
        **os.environ,
        **s3_endpoint.env(),
        "OFFLOADER_HOME": str(tmp_path / "home"),
        "OFFLOADER_STORE": f"s3://{s3_bucket}/{PREFIX}",
    }


def offloader(env: dict[str, str], *args: str, code: int = 0) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [*offloader_command(), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == code, (args, proc.stdout, proc.stderr)
    return proc


def records(proc: subprocess.CompletedProcess[str]) -> list[dict[str, Any]]:
    return [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]


def test_operator_flow_on_s3(env: dict[str, str], s3_endpoint: S3Endpoint, s3_bucket: str) -> None:
    small = ("--max-entries-per-ledger", "100", "--min-rollover-time", "0")
    offloader(env, "namespaces", "create", NS)
    produced = offloader(
        env, "--json", "topics", "produce", TOPIC, "--synthetic", "400", "--size", "1K", *small
    )
    assert records(produced)[0]["entries"] == 400
    out = offloader(env, "topics", "offload-prefix", TOPIC, "--size-threshold", "150K").stdout
    assert out.startswith(f"Offload triggered for {TOPIC} for messages before ")
    assert offloader(env, "topics", "offload-status", TOPIC).stdout == "Offload was a success\n"

    info = records(offloader(env, "--json", "topics", "info", TOPIC))[0]
    offloaded = [ledger for ledger in info["ledgers"] if ledger["offloaded"]]
    assert len(offloaded) >= 2
    keys = {o["Key"] for o in s3_endpoint.client().list_objects_v2(Bucket=s3_bucket)["Contents"]}
    for ledger in offloaded:
        stem = f"{PREFIX}/{ledger['uuid']}-ledger-{ledger['ledger_id']}"
        assert {stem, f"{stem}-index"} <= keys

    entries = records(offloader(env, "--json", "topics", "read", TOPIC))
    expected = [hashlib.sha256(p).hexdigest() for p in synthetic_payloads(400, 1024)]
    assert [e["sha256"] for e in entries] == expected
    assert {e["tier"] for e in entries} == {"offloaded", "local"}
    verified = records(offloader(env, "--json", "objects", "verify", "--verify-checksums"))
    assert len(verified) == len(offloaded) and all(r["ok"] for r in verified)

    offloader(env, "namespaces", "set-offload-deletion-lag", NS, "--lag", "0")
    # -v: info logs on stderr, which must never carry credentials
    tick = offloader(env, "-v", "--json", "service", "run", "--once")
    assert records(tick)[0]["local_deleted"] == [ledger["ledger_id"] for ledger in offloaded]
    assert s3_endpoint.secret_key not in tick.stderr + tick.stdout
    again = records(offloader(env, "--json", "topics", "read", TOPIC))
    assert [e["sha256"] for e in again] == expected

    report = records(offloader(env, "--json", "objects", "orphans", "--min-age", "0"))[0]
    assert report["clean"], report
    offloader(env, "topics", "delete", TOPIC)
    assert "Contents" not in s3_endpoint.client().list_objects_v2(Bucket=s3_bucket)


def test_service_stops_cleanly_on_sigterm(env: dict[str, str]) -> None:
    offloader(env, "namespaces", "create", NS)
    proc = subprocess.Popen(
        [*offloader_command(), "-v", "--log-format", "json", "service", "run", "--interval", "1s"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    started = threading.Event()
    lines: list[str] = []

    def read_stderr() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append(line)
            if '"service.start"' in line:
                started.set()

    reader = threading.Thread(target=read_stderr, daemon=True)
    reader.start()
    try:
        assert started.wait(30), lines
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15) == 0, lines
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    reader.join(5)
    events = [json.loads(line)["event"] for line in lines if line.startswith("{")]
    assert "service.start" in events and "service.stopped" in events


def test_unreachable_store_exits_1_quickly(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "OFFLOADER_HOME": str(tmp_path / "home"),
        "AWS_ACCESS_KEY_ID": "x",
        "AWS_SECRET_ACCESS_KEY": "y",
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    env.pop("AWS_ENDPOINT_URL", None)
    started = time.monotonic()
    proc = offloader(
        env, "--store", "s3://bkt", "--endpoint-url", "http://127.0.0.1:1",
        "objects", "orphans", code=1,
    )  # fmt: skip
    assert time.monotonic() - started < 30
    assert proc.stderr.startswith("error: ") and len(proc.stderr.splitlines()) == 1
    assert "Traceback" not in proc.stderr


def test_bad_size_exits_2(tmp_path: Path) -> None:
    env = {**os.environ, "OFFLOADER_HOME": str(tmp_path / "home")}
    proc = offloader(env, "topics", "offload-prefix", TOPIC, "--size-threshold", "10MB", code=2)
    assert "invalid size '10MB'" in proc.stderr
