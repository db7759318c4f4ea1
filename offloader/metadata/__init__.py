"""The metadata store: namespaces, topics, ledgers, offload contexts and attempts.

The :class:`~offloader.metadata.base.MetadataStore` Protocol and its records are in
:mod:`offloader.metadata.base`; the embedded SQLite backend is
:class:`~offloader.metadata.sqlite.SqliteMetadataStore`. :func:`open_metadata_store` opens the
one under a home directory (``<home>/metadata.db``).
"""

from __future__ import annotations

import os
from pathlib import Path

from offloader.errors import MetadataError, NotFound
from offloader.metadata.base import MetadataStore
from offloader.metadata.export_base import ExportMetadataStore
from offloader.metadata.kafka_base import KafkaMetadataStore

METADATA_FILENAME = "metadata.db"

__all__ = [
    "METADATA_FILENAME",
    "ExportMetadataStore",
    "KafkaMetadataStore",
    "MetadataStore",
    "check_home",
    "open_export_metadata_store",
    "open_kafka_metadata_store",
    "open_metadata_store",
]

#: the commands that work on a home that cannot be written, for the error that says so
READ_ONLY_COMMANDS = (
    "topics list|info|read|offload-status, objects verify|orphans, namespaces list|get-*"
)


def check_home(home: Path, *, read_only: bool) -> bool:
    """Check a home directory before it is opened; True when it must be opened read-only.

    ``read_only`` (a command that only reads): the home must hold a metadata database already,
    else :class:`NotFound` (a mistyped ``--home`` is not silently a new, empty home); it is
    opened read-only when it cannot be written. Otherwise a home (or its parent, when it does
    not exist yet) that cannot be written is a :class:`MetadataError` that says so."""
    if read_only:
        if not (home / METADATA_FILENAME).is_file():
            raise NotFound(
                f"no offloader home at {home} (there is no {METADATA_FILENAME}): check --home "
                "or $OFFLOADER_HOME; a command that writes (e.g. namespaces create) makes one"
            )
        return not os.access(home, os.W_OK)
    existing = home
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if existing.is_dir() and not os.access(existing, os.W_OK):
        raise MetadataError(
            f"offloader home {home} cannot be written (a read-only filesystem, or no write "
            f"permission): this command changes it; commands that only read ({READ_ONLY_COMMANDS}) "
            "still work there"
        )
    return False


def open_metadata_store(home_dir: str | Path, *, read_only: bool = False) -> MetadataStore:
    """Open (creating and migrating as needed) ``<home_dir>/metadata.db``; with ``read_only``,
    open an existing one for reading only (see
    :class:`~offloader.metadata.sqlite_schema.Database`)."""
    from offloader.metadata.sqlite import SqliteMetadataStore

    home = Path(home_dir)
    if read_only:
        return SqliteMetadataStore(home / METADATA_FILENAME, read_only=True)
    home.mkdir(parents=True, exist_ok=True)
    return SqliteMetadataStore(home / METADATA_FILENAME)


def open_kafka_metadata_store(home_dir: str | Path) -> KafkaMetadataStore:
    """The Kafka tier's metadata in the same ``<home_dir>/metadata.db`` (its own connection)."""
    from offloader.metadata.kafka_sqlite import SqliteKafkaMetadataStore

    home = Path(home_dir)
    home.mkdir(parents=True, exist_ok=True)
    return SqliteKafkaMetadataStore(home / METADATA_FILENAME)


def open_export_metadata_store(
    home_dir: str | Path, *, read_only: bool = False
) -> ExportMetadataStore:
    """The export watermarks in the same ``<home_dir>/metadata.db`` (its own connection);
    ``read_only`` as in :func:`open_metadata_store`."""
    from offloader.metadata.export_sqlite import SqliteExportMetadataStore

    home = Path(home_dir)
    if not read_only:
        home.mkdir(parents=True, exist_ok=True)
    return SqliteExportMetadataStore(home / METADATA_FILENAME, read_only=read_only)
