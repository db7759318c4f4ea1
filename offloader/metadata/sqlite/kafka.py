"""SqliteKafkaMetadataStore: the KafkaMetadataStore in the metadata SQLite file.

It opens its own connection to ``<home>/metadata.db`` (the schema, WAL, busy timeout and error
translation of :mod:`offloader.metadata.sqlite.db`; its tables in
:mod:`offloader.metadata.kafka_schema`), so it runs beside a
:class:`~offloader.metadata.sqlite.store.SqliteMetadataStore` in the same or another process.
Its methods are the shared ones of :class:`~offloader.metadata.kafka.SqlKafkaMetadataStore`
(every change one ``BEGIN IMMEDIATE`` transaction); what is SQLite's own is a partition's
upload lock: a lock file under ``<home>/locks``.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from offloader.metadata.kafka import SqlKafkaMetadataStore
from offloader.metadata.sqlite.db import DEFAULT_BUSY_TIMEOUT_S, Database


class SqliteKafkaMetadataStore(SqlKafkaMetadataStore):
    """The embedded :class:`~offloader.metadata.kafka_base.KafkaMetadataStore`."""

    _db: Database

    def __init__(self, path: str | Path, *, busy_timeout_s: float = DEFAULT_BUSY_TIMEOUT_S) -> None:
        self.path = Path(path)
        self._db = Database(self.path, busy_timeout_s=busy_timeout_s)

    @contextmanager
    def partition_lock(self, topic: str, partition: int) -> Iterator[bool]:
        """An ``fcntl.flock`` on ``<home>/locks/kafka-upload-<sha256>.lock`` beside the database:
        the kernel releases it when the process dies. Every uploader of this database runs on
        this host (a shared store across hosts is PostgreSQL's)."""
        lock_dir = self.path.parent / "locks"
        lock_dir.mkdir(parents=True, exist_ok=True)
        digest = hashlib.sha256(f"{topic}\0{partition}".encode()).hexdigest()[:32]
        path = lock_dir / f"kafka-upload-{digest}.lock"
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                yield False
                return
            yield True
        finally:
            os.close(fd)


__all__ = ["SqliteKafkaMetadataStore"]
