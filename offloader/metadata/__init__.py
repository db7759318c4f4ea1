"""The metadata store: namespaces, topics, ledgers, offload contexts and attempts.

The :class:`~offloader.metadata.base.MetadataStore` Protocol and its records are in
:mod:`offloader.metadata.base`; the embedded SQLite backend is
:class:`~offloader.metadata.sqlite.SqliteMetadataStore`. :func:`open_metadata_store` opens the
one under a home directory (``<home>/metadata.db``).
"""

from __future__ import annotations

from pathlib import Path

from offloader.metadata.base import MetadataStore
from offloader.metadata.kafka_base import KafkaMetadataStore

METADATA_FILENAME = "metadata.db"

__all__ = [
    "METADATA_FILENAME",
    "KafkaMetadataStore",
    "MetadataStore",
    "open_kafka_metadata_store",
    "open_metadata_store",
]


def open_metadata_store(home_dir: str | Path) -> MetadataStore:
    """Open (creating and migrating as needed) ``<home_dir>/metadata.db``."""
    from offloader.metadata.sqlite import SqliteMetadataStore

    home = Path(home_dir)
    home.mkdir(parents=True, exist_ok=True)
    return SqliteMetadataStore(home / METADATA_FILENAME)


def open_kafka_metadata_store(home_dir: str | Path) -> KafkaMetadataStore:
    """The Kafka tier's metadata in the same ``<home_dir>/metadata.db`` (its own connection)."""
    from offloader.metadata.kafka_sqlite import SqliteKafkaMetadataStore

    home = Path(home_dir)
    home.mkdir(parents=True, exist_ok=True)
    return SqliteKafkaMetadataStore(home / METADATA_FILENAME)
