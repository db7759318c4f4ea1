"""The export lock: one run at a time per (target, topic, generation), across processes.

An ``fcntl.flock`` on ``<home>/locks/export-<sha256>.lock``: the kernel releases it when the
process dies (kill -9 included), so a crashed run never blocks the next one. Two runs at once
would otherwise delete each other's uncommitted files.

The homes of several brokers sharing one metadata store (PostgreSQL) do not share their lock
files: there the store's own lock (:class:`~offloader.metadata.export_base.SharedExportLocks`)
is taken too, after the file lock.
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
from offloader.metadata.export_base import SharedExportLocks

POLL_SECONDS = 0.05


@contextlib.contextmanager
def export_lock(
    home: Path,
    target: str,
    topic: str,
    generation: int,
    *,
    timeout: float = 5.0,
    shared: object = None,
) -> Iterator[None]:
    """Hold the export's lock file under ``home`` and, when ``shared`` (the export metadata
    store) is one several homes share, its lock in that store; ExportBusy after ``timeout``."""
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
        if isinstance(shared, SharedExportLocks):
            with shared.export_lock(target, topic, generation, timeout=timeout):
                yield
        else:
            yield
    finally:
        os.close(fd)
