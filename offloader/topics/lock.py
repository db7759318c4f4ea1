"""A per-topic writer lock across processes: who may touch the topic's current ledger.

Producing, rolling over, recovering the open ledger and deleting a topic change the tail of
the ledger list (close the file, record the close, add the next ledger); two processes doing
that at once could leave two open ledgers. They therefore hold the topic's writer lock, an
``fcntl.flock`` on ``<home>/locks/<sha256 of the topic>.lock``. The kernel releases it when the
process dies, so a crash never leaves it held. (Offloads use the metadata store's offload lock
instead: it is visible to ``offload-status`` and survives as a record.)
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import time
from collections.abc import Iterator
from pathlib import Path

from offloader.errors import TopicBusy

POLL_SECONDS = 0.05


def _lock_path(lock_dir: Path, topic: str) -> Path:
    digest = hashlib.sha256(topic.encode("utf-8")).hexdigest()[:32]
    return lock_dir / f"{digest}.lock"


@contextlib.contextmanager
def topic_write_lock(lock_dir: Path, topic: str, *, timeout: float = 10.0) -> Iterator[None]:
    """Hold the topic's writer lock; wait up to ``timeout`` seconds (0 = try once), then raise
    :class:`TopicBusy`."""
    lock_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(_lock_path(lock_dir, topic), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise TopicBusy(
                        f"topic {topic} is being written by another process; try again"
                    ) from None
                time.sleep(POLL_SECONDS)
        yield
    finally:
        os.close(fd)  # releases the flock
