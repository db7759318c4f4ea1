"""The metadata store: namespaces, topics, ledgers, offload contexts and attempts.

The :class:`~offloader.metadata.base.MetadataStore` Protocol and its records are in
:mod:`offloader.metadata.base`; the embedded SQLite backend is
:class:`~offloader.metadata.sqlite.store.SqliteMetadataStore`, the shared PostgreSQL one
:class:`~offloader.metadata.postgres.store.PgMetadataStore` (which is also the
:class:`~offloader.metadata.cluster_base.ClusterMetadata` of the brokers sharing it).
:func:`open_metadata_store` opens the one a location names: a ``postgresql://`` URL, else the
SQLite file under a home directory (``<home>/metadata.db``).
"""

from __future__ import annotations

import os
from pathlib import Path

from offloader.errors import ConfigError, MetadataError, NotFound
from offloader.metadata.base import MetadataStore
from offloader.metadata.cluster_base import ClusterMetadata
from offloader.metadata.cluster_local import LocalCluster
from offloader.metadata.export_base import ExportMetadataStore
from offloader.metadata.kafka_base import KafkaMetadataStore

METADATA_FILENAME = "metadata.db"

__all__ = [
    "METADATA_FILENAME",
    "ClusterMetadata",
    "ExportMetadataStore",
    "KafkaMetadataStore",
    "MetadataStore",
    "check_home",
    "cluster_of",
    "is_postgres_url",
    "open_export_metadata_store",
    "open_kafka_metadata_store",
    "open_metadata_store",
]


def is_postgres_url(location: object) -> bool:
    """True for ``postgresql://...`` and ``postgres://...`` (what selects the shared store)."""
    return isinstance(location, str) and location.lower().startswith(
        ("postgresql://", "postgres://")
    )


#: the commands that work on a home that cannot be written, for the error that says so
READ_ONLY_COMMANDS = (
    "topics list|info|read|offload-status, objects verify|orphans, namespaces list|get-*"
)


def check_home(home: Path, *, read_only: bool) -> bool:
    """Check a home directory before it is opened; True when it must be opened read-only.

    ``read_only`` (a command that only reads): the home must hold a metadata database already,
    else :class:`NotFound` (a mistyped ``--home`` is not silently a new, empty home); it is
    opened read-only when it cannot be written. Otherwise a home (or its parent, when it does
    not exist yet) that cannot be written is a :class:`MetadataError` that says so. A home
    that is (or lies under) something other than a directory (``/dev/null``) is a
    :class:`ConfigError` naming it, whatever the command."""
    existing = home
    while not os.path.lexists(existing) and existing != existing.parent:
        existing = existing.parent
    if os.path.lexists(existing) and not existing.is_dir():
        where = "" if existing == home else f": {existing}"
        raise ConfigError(f"offloader home {home}{where} is not a directory (check --home)")
    if read_only:
        if not (home / METADATA_FILENAME).is_file():
            raise NotFound(
                f"no offloader home at {home} (there is no {METADATA_FILENAME}): check --home "
                "or $OFFLOADER_HOME; a command that writes (e.g. namespaces create) makes one"
            )
        return not os.access(home, os.W_OK)
    if not os.access(existing, os.W_OK):
        raise MetadataError(
            f"offloader home {home} cannot be written (a read-only filesystem, or no write "
            f"permission): this command changes it; commands that only read ({READ_ONLY_COMMANDS}) "
            "still work there"
        )
    return False


def open_metadata_store(location: str | Path, *, read_only: bool = False) -> MetadataStore:
    """Open (creating and migrating as needed) the store at ``location``: a ``postgresql://``
    URL (the shared store; ``read_only`` does not apply to it), else a home directory and its
    ``<home>/metadata.db``, which with ``read_only`` is opened for reading only (see
    :class:`~offloader.metadata.sqlite.db.Database`)."""
    if is_postgres_url(location):
        from offloader.metadata.postgres.store import PgMetadataStore

        return PgMetadataStore(str(location))
    from offloader.metadata.sqlite.store import SqliteMetadataStore

    home = Path(location)
    if read_only:
        return SqliteMetadataStore(home / METADATA_FILENAME, read_only=True)
    home.mkdir(parents=True, exist_ok=True)
    return SqliteMetadataStore(home / METADATA_FILENAME)


def open_kafka_metadata_store(location: str | Path) -> KafkaMetadataStore:
    """The Kafka tier's metadata in the same store as :func:`open_metadata_store` (a
    ``postgresql://`` URL or ``<home>/metadata.db``), over its own connection."""
    if is_postgres_url(location):
        from offloader.metadata.postgres.kafka import PgKafkaMetadataStore

        return PgKafkaMetadataStore(str(location))
    from offloader.metadata.sqlite.kafka import SqliteKafkaMetadataStore

    home = Path(location)
    home.mkdir(parents=True, exist_ok=True)
    return SqliteKafkaMetadataStore(home / METADATA_FILENAME)


def cluster_of(meta: MetadataStore) -> ClusterMetadata:
    """The brokers, owners and leases of ``meta``: the store itself when it is shared
    (PostgreSQL), else a :class:`~offloader.metadata.cluster_local.LocalCluster` (one broker)."""
    if isinstance(meta, ClusterMetadata):
        return meta
    return LocalCluster()


def open_export_metadata_store(
    location: str | Path, *, read_only: bool = False
) -> ExportMetadataStore:
    """The export watermarks in the same store as :func:`open_metadata_store` (a
    ``postgresql://`` URL, where ``read_only`` does not apply, or ``<home>/metadata.db``), over
    its own connection; ``read_only`` as in :func:`open_metadata_store`."""
    if is_postgres_url(location):
        from offloader.metadata.postgres.export import PgExportMetadataStore

        return PgExportMetadataStore(str(location))
    from offloader.metadata.sqlite.export import SqliteExportMetadataStore

    home = Path(location)
    if not read_only:
        home.mkdir(parents=True, exist_ok=True)
    return SqliteExportMetadataStore(home / METADATA_FILENAME, read_only=read_only)
