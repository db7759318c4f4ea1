"""PgExportMetadataStore: the ExportMetadataStore on the shared PostgreSQL database.

The ``export_watermarks`` table of :mod:`offloader.metadata.postgres.schema` (version 3), over
its own connection (:class:`~offloader.metadata.postgres.db.PgDatabase`); the watermark methods
are the shared ones of :class:`~offloader.metadata.export.SqlExportMetadataStore` (reads at
REPEATABLE READ, READ ONLY; each change one READ COMMITTED transaction holding the row's lock).

Runs from several homes on one store are serialized per ``(target, topic, generation)`` by
:meth:`PgExportMetadataStore.export_lock`, a session-level advisory lock on a connection of its
own (:meth:`~offloader.metadata.postgres.db.PgDatabase.session_lock`), which the export flow
holds beside the home's file lock: this lock is what only PostgreSQL has.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from offloader.errors import ExportBusy
from offloader.metadata.export import SqlExportMetadataStore
from offloader.metadata.postgres.db import DEFAULT_BUSY_TIMEOUT_S, PgDatabase


class PgExportMetadataStore(SqlExportMetadataStore):
    """The shared :class:`~offloader.metadata.export_base.ExportMetadataStore`."""

    _db: PgDatabase

    def __init__(self, url: str, *, busy_timeout_s: float = DEFAULT_BUSY_TIMEOUT_S) -> None:
        self.url = url
        self._db = PgDatabase(url, busy_timeout_s=busy_timeout_s)

    @contextmanager
    def export_lock(
        self, target: str, topic: str, generation: int, *, timeout: float
    ) -> Iterator[None]:
        """The cluster-wide lock of one export (see the module docstring)."""
        with self._db.session_lock(
            f"export\x1f{target}\x1f{topic}\x1f{generation}", timeout
        ) as held:
            if not held:
                raise ExportBusy(
                    f"{topic} is being exported to {target} (generation {generation}) by "
                    "another broker on the shared metadata store; try again when it is done"
                )
            yield
