"""SqliteExportMetadataStore: the ExportMetadataStore in the metadata SQLite file.

Its own connection to ``<home>/metadata.db`` (schema, WAL, busy timeout and error translation
of :mod:`offloader.metadata.sqlite.db`; the table's DDL in
:mod:`offloader.metadata.export_schema`); the methods are the shared ones of
:class:`~offloader.metadata.export.SqlExportMetadataStore`. Each change is one
``BEGIN IMMEDIATE`` transaction.
"""

from __future__ import annotations

from pathlib import Path

from offloader.metadata.export import SqlExportMetadataStore
from offloader.metadata.sqlite.db import DEFAULT_BUSY_TIMEOUT_S, Database


class SqliteExportMetadataStore(SqlExportMetadataStore):
    """The embedded :class:`~offloader.metadata.export_base.ExportMetadataStore`."""

    _db: Database

    def __init__(
        self,
        path: str | Path,
        *,
        busy_timeout_s: float = DEFAULT_BUSY_TIMEOUT_S,
        read_only: bool = False,
    ) -> None:
        self.path = Path(path)
        self._db = Database(self.path, busy_timeout_s=busy_timeout_s, read_only=read_only)
