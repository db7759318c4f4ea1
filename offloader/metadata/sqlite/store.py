"""SqliteMetadataStore: the embedded MetadataStore, one SQLite file under ``--home``.

This module owns only what is SQLite's: the store over one
:class:`~offloader.metadata.sqlite.db.Database` (the file, schema, pragmas, ``BEGIN IMMEDIATE``
transactions and error translation). Every method is the shared one of
:class:`~offloader.metadata.store.SqlMetadataStore`, run in the SQLite dialect. Every change runs
in one ``BEGIN IMMEDIATE`` transaction, so the CLI and a running service (separate processes)
can share the file.
"""

from __future__ import annotations

from pathlib import Path

from offloader.metadata.sqlite.db import DEFAULT_BUSY_TIMEOUT_S, Database
from offloader.metadata.store import SqlMetadataStore


class SqliteMetadataStore(SqlMetadataStore):
    """The embedded :class:`~offloader.metadata.base.MetadataStore` (see the module docstring).

    One connection per instance, shared safely by the threads of a process; open one instance
    per process (never share it across ``fork``).
    """

    _db: Database

    def __init__(
        self,
        path: str | Path,
        *,
        busy_timeout_s: float = DEFAULT_BUSY_TIMEOUT_S,
        read_only: bool = False,
    ) -> None:
        """``read_only``: see :class:`~offloader.metadata.sqlite.db.Database`; every change
        then fails with a MetadataError saying the database is read-only."""
        self.path = Path(path)
        self._db = Database(self.path, busy_timeout_s=busy_timeout_s, read_only=read_only)

    def __repr__(self) -> str:
        return f"SqliteMetadataStore({str(self.path)!r})"
