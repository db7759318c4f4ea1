"""PgKafkaMetadataStore: the KafkaMetadataStore on the shared PostgreSQL database.

The Kafka tier's tables of :mod:`offloader.metadata.postgres.schema`, queried over its own
connection (:class:`~offloader.metadata.postgres.db.PgDatabase`, which translates psycopg's
errors). Its methods are the shared ones of
:class:`~offloader.metadata.kafka.SqlKafkaMetadataStore` (every change one READ COMMITTED
transaction holding the row locks the PostgreSQL dialect takes); what is PostgreSQL's own is a
partition's upload lock: a session advisory lock.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from offloader.metadata.kafka import SqlKafkaMetadataStore
from offloader.metadata.postgres.db import DEFAULT_BUSY_TIMEOUT_S, PgDatabase


class PgKafkaMetadataStore(SqlKafkaMetadataStore):
    """The shared :class:`~offloader.metadata.kafka_base.KafkaMetadataStore`."""

    _db: PgDatabase

    def __init__(self, url: str, *, busy_timeout_s: float = DEFAULT_BUSY_TIMEOUT_S) -> None:
        self.url = url
        self._db = PgDatabase(url, busy_timeout_s=busy_timeout_s)

    @contextmanager
    def partition_lock(self, topic: str, partition: int) -> Iterator[bool]:
        """A session advisory lock on a connection of its own (the server releases it when that
        connection ends): one uploader per partition across every home of the store."""
        with self._db.session_lock(f"kafka-upload\x1f{topic}\x1f{partition}", 0.0) as held:
            yield held


__all__ = ["PgKafkaMetadataStore"]
