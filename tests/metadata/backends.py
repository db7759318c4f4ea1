"""The MetadataStore backends the contract suite runs against, by name.

A backend is a name, a way to pick a fresh location (from the test's request and temporary
directory), and a way to open a store at a location. Locations are strings so worker processes
(spawned, not forked) can open their own store: a file path for SQLite, a URL on a fresh schema
of the session's throwaway server (the ``pg_url`` fixture) for PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from offloader.metadata.base import MetadataStore
from offloader.metadata.export_base import ExportMetadataStore
from offloader.metadata.kafka_base import KafkaMetadataStore
from offloader.metadata.postgres.export import PgExportMetadataStore
from offloader.metadata.postgres.kafka import PgKafkaMetadataStore
from offloader.metadata.postgres.store import PgMetadataStore
from offloader.metadata.sqlite.export import SqliteExportMetadataStore
from offloader.metadata.sqlite.kafka import SqliteKafkaMetadataStore
from offloader.metadata.sqlite.store import SqliteMetadataStore


@dataclass(frozen=True)
class Backend:
    name: str
    new_location: Callable[[pytest.FixtureRequest, Path], str]
    open: Callable[[str], MetadataStore]
    open_kafka: Callable[[str], KafkaMetadataStore]
    open_export: Callable[[str], ExportMetadataStore]


def _sqlite_location(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return str(tmp_path / "metadata.db")


def _pg_location(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    url: str = request.getfixturevalue("pg_url")
    return url


BACKENDS: dict[str, Backend] = {
    "sqlite": Backend(
        "sqlite",
        _sqlite_location,
        SqliteMetadataStore,
        SqliteKafkaMetadataStore,
        SqliteExportMetadataStore,
    ),
    "postgresql": Backend(
        "postgresql", _pg_location, PgMetadataStore, PgKafkaMetadataStore, PgExportMetadataStore
    ),
}


def open_backend(name: str, location: str) -> MetadataStore:
    return BACKENDS[name].open(location)
