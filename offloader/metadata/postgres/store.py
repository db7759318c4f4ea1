"""PgMetadataStore: the MetadataStore on a shared PostgreSQL database (several brokers).

This module owns only what is PostgreSQL's: the store over one
:class:`~offloader.metadata.postgres.db.PgDatabase` (connection, READ COMMITTED transactions,
error translation, migrations) and its brokers, topic ownership and leases
(:mod:`offloader.metadata.postgres.cluster`). Every MetadataStore method is the shared one of
:class:`~offloader.metadata.store.SqlMetadataStore`, run in the PostgreSQL dialect, which takes
the row locks (``FOR UPDATE``) that make each read-modify-write atomic.
"""

from __future__ import annotations

from offloader.metadata.postgres.cluster import ClusterTables
from offloader.metadata.postgres.db import DEFAULT_BUSY_TIMEOUT_S, PgDatabase
from offloader.metadata.store import SqlMetadataStore


class PgMetadataStore(SqlMetadataStore, ClusterTables):
    """The shared :class:`~offloader.metadata.base.MetadataStore` (see the module docstring),
    also the :class:`~offloader.metadata.cluster_base.ClusterMetadata` of the brokers on it.

    One connection per instance, shared safely by the threads of a process; open one instance
    per process."""

    _db: PgDatabase

    def __init__(self, url: str, *, busy_timeout_s: float = DEFAULT_BUSY_TIMEOUT_S) -> None:
        self.url = url
        self._db = PgDatabase(url, busy_timeout_s=busy_timeout_s)

    def __repr__(self) -> str:
        return f"PgMetadataStore({self._db.where!r})"
