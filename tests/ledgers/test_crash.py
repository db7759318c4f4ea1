"""kill -9 of a process appending with fsync "always": every acknowledged entry survives."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
from pathlib import Path

from offloader.ledgers import LedgerStore
from tests.ledgers._appender import TOPIC, payload

REPO = Path(__file__).resolve().parents[2]


def run_and_kill(home: Path, seed: int, acks_wanted: int) -> tuple[int, int]:
    """Start the appender, kill -9 it after ``acks_wanted`` acks; (start count, last acked id)."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.ledgers._appender", str(home), str(seed)],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline().split()
        assert first[0] == "start", first
        last_acked = int(first[1]) - 1
        for _ in range(acks_wanted):
            line = proc.stdout.readline()
            assert line, "appender died"
            last_acked = int(line)
        os.kill(proc.pid, signal.SIGKILL)
        # acks printed between our last readline and the kill count too
        for line in proc.stdout:
            last_acked = int(line)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    return int(first[1]), last_acked


def test_kill_minus_nine_keeps_every_acked_entry(tmp_path: Path) -> None:
    rng = random.Random(7)
    store = LedgerStore(tmp_path)
    total_dropped = 0
    last_acked = -1
    for round_ in range(5):
        start, last_acked = run_and_kill(tmp_path, round_, rng.randint(20, 150))
        assert start >= 0
        writer = store.open_for_append(TOPIC, 1)  # recovery, as the next child would do
        try:
            assert writer.recovery is not None
            total_dropped += writer.recovery.dropped_bytes
            assert writer.last_entry_id >= last_acked
            ids = range(writer.last_entry_id + 1)
            assert writer.read(0, writer.last_entry_id) == [payload(i) for i in ids]
        finally:
            writer.abandon()
    report = store.recover(TOPIC, 1)
    assert report.entry_count - 1 >= last_acked
    with store.open_reader(TOPIC, 1) as reader:
        assert reader.read(0, reader.last_entry_id) == [
            payload(i) for i in range(reader.last_entry_id + 1)
        ]
