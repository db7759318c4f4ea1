"""Several ``service run`` processes on one PostgreSQL metadata store: races and kill -9.

Real processes of the CLI (``python -m cli.main``). Two services on the same home race for the
same ledgers (the per-topic offload lock and the UUID compare-and-set decide), a third on
another home owns other topics; one of two looping services is killed with SIGKILL at a random
moment and the survivor finishes the work and takes the cluster lease over.
"""

from __future__ import annotations

import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from offloader.api import Offloader
from offloader.metadata.cluster_base import LEASE_ORPHANS
from tests.cluster.conftest import NS, settings

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
TOPICS_A = [f"persistent://public/default/a{i}" for i in range(3)]
TOPIC_B = "persistent://public/default/b0"
ENTRIES = 23  # 4 closed ledgers of 5 entries and an open one of 3, per topic


def _payload(topic: str, i: int) -> bytes:
    return f"{topic}#{i}".encode()


def _service(
    home: Path, shared: tuple[str, str], *args: str, json_out: bool = True
) -> subprocess.Popen[str]:
    metadata, store = shared
    command = [sys.executable, "-m", "cli.main", "--home", str(home), "--store", store]
    command += ["--metadata", metadata] + (["--json"] if json_out else [])
    return subprocess.Popen(
        [*command, "service", "run", *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _setup(tmp_path: Path, shared: tuple[str, str], lease: str = "60s") -> None:
    metadata, store = shared
    for name in ("a", "b"):
        home = tmp_path / name
        home.mkdir()
        (home / "offloader.toml").write_text(f'[broker]\ncluster_lease = "{lease}"\n')
    with (
        Offloader.from_settings(
            tmp_path / "a", store, metadata_url=metadata, broker=settings()
        ) as a,
        Offloader.from_settings(
            tmp_path / "b", store, metadata_url=metadata, broker=settings()
        ) as b,
    ):
        a.create_namespace(NS)
        for topic in TOPICS_A:
            a.produce(topic, [_payload(topic, i) for i in range(ENTRIES)])
        b.produce(TOPIC_B, [_payload(TOPIC_B, i) for i in range(ENTRIES)])
        a.set_offload_threshold(NS, 0)  # from now on the services offload every closed ledger


def _check_offloaded_once(tmp_path: Path, shared: tuple[str, str]) -> None:
    """Every closed ledger offloaded, each by exactly one completed attempt, no entry lost."""
    metadata, store = shared
    with Offloader.from_settings(tmp_path / "a", store, metadata_url=metadata) as a:
        meta = a.runtime.meta
        completed = Counter(at.ledger_id for at in meta.list_attempts(states=["COMPLETED"]))
        assert completed and max(completed.values()) == 1, completed
        for topic in [*TOPICS_A, TOPIC_B]:
            closed = [r for r in meta.list_ledgers(topic) if r.state == "CLOSED"]
            assert len(closed) == 4
            assert all(r.offload_complete and completed[r.ledger_id] == 1 for r in closed)
        for topic in TOPICS_A:  # a's home reads every entry (offloaded, then its open ledger)
            assert [e.payload for e in a.read(topic)] == [
                _payload(topic, i) for i in range(ENTRIES)
            ]
        assert a.orphans(min_age_seconds=0).clean


def test_racing_service_runs_never_offload_a_ledger_twice(
    tmp_path: Path, shared: tuple[str, str]
) -> None:
    _setup(tmp_path, shared)
    procs = [
        _service(tmp_path / "a", shared, "--once"),
        _service(tmp_path / "a", shared, "--once"),
        _service(tmp_path / "b", shared, "--once"),
    ]
    outputs = [p.communicate(timeout=180) for p in procs]
    for proc, (_out, err) in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, err[-2000:]
    reports = [json.loads(out.strip().splitlines()[-1]) for out, _ in outputs]
    # the two services of home a split a's ledgers between them: none twice
    offloaded_a = [lid for r in reports[:2] for lid in r["offloaded"]]
    assert len(offloaded_a) == len(set(offloaded_a)) == 12
    # home b's service offloaded only b's topic
    assert len(reports[2]["offloaded"]) == 4
    assert not set(reports[2]["offloaded"]) & set(offloaded_a)
    _check_offloaded_once(tmp_path, shared)


def _holder_pid(tmp_path: Path, shared: tuple[str, str]) -> int | None:
    metadata, store = shared
    with Offloader.from_settings(tmp_path / "a", store, metadata_url=metadata) as a:
        lease = a.runtime.cluster.get_lease(LEASE_ORPHANS)
    if lease is None:
        return None
    host, pid, _ = lease.holder.split(":")
    assert host == socket.gethostname()
    return int(pid)


def test_kill9_of_one_of_two_services(tmp_path: Path, shared: tuple[str, str]) -> None:
    """The service holding the cluster lease is killed at a random moment: the other one (or
    broker b's) takes the lease over once it expires, every ledger is offloaded exactly once
    and no entry is lost."""
    lease_s = 2
    _setup(tmp_path, shared, lease=f"{lease_s}s")
    services = [_service(tmp_path / "a", shared, "--interval", "1s", json_out=False)]
    services.append(_service(tmp_path / "a", shared, "--interval", "1s", json_out=False))
    try:
        deadline = time.monotonic() + 60
        holder = None
        while holder is None and time.monotonic() < deadline:
            holder = _holder_pid(tmp_path, shared)
            time.sleep(0.1)
        victim = next(p for p in services if p.pid == holder)
        time.sleep(random.uniform(0.0, 1.5))  # startup, mid-offload or between passes
        victim.send_signal(signal.SIGKILL)
        assert victim.wait(timeout=30) == -signal.SIGKILL
        killed_at = time.monotonic()
        services.append(_service(tmp_path / "b", shared, "--interval", "1s", json_out=False))
        live = {p.pid for p in services if p is not victim}
        while time.monotonic() < killed_at + 60 and _holder_pid(tmp_path, shared) not in live:
            time.sleep(0.1)
        took = time.monotonic() - killed_at
        assert _holder_pid(tmp_path, shared) in live
        assert took < lease_s + 8  # the lease time plus a pass or two (a loaded machine)
        # the survivors finish the offloads
        metadata, store = shared
        with Offloader.from_settings(tmp_path / "a", store, metadata_url=metadata) as a:
            topics = [*TOPICS_A, TOPIC_B]
            while time.monotonic() < killed_at + 120:
                ledgers = [r for t in topics for r in a.runtime.meta.list_ledgers(t)]
                if all(r.offload_complete for r in ledgers if r.state == "CLOSED"):
                    break
                time.sleep(0.2)
    finally:
        for proc in services:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in services:
            try:
                proc.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                os.kill(proc.pid, signal.SIGKILL)
                proc.communicate()
    _check_offloaded_once(tmp_path, shared)
