"""The export lock: one run at a time per (target, topic, generation), across processes.

An ``fcntl.flock`` on ``<home>/locks/export-<sha256>.lock``: the kernel releases it when the
process dies (kill -9 included), so a crashed run never blocks the next one. Two runs at once
would otherwise delete each other's uncommitted files.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import time
from collections.abc import Iterator
from pathlib import Path

from offloader.errors import ExportBusy

POLL_SECONDS = 0.05


@contextlib.contextmanager
def export_lock(
    home: Path, target: str, topic: str, generation: int, *, timeout: float = 5.0
) -> Iterator[None]:
    lock_dir = home / "locks"
    lock_dir.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256(f"{target}\0{topic}\0{generation}".encode()).hexdigest()[:32]
    fd = os.open(lock_dir / f"export-{digest}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise ExportBusy(
                        f"{topic} is being exported to {target} (generation {generation}) by "
                        "another process; try again when it is done"
                    ) from None
                time.sleep(POLL_SECONDS)
        yield
    finally:
        os.close(fd)
