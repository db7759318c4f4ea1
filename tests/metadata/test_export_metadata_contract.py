"""The ExportMetadataStore contract: every backend (SQLite, PostgreSQL) passes it.

Backends plug in through ``tests/metadata/backends.py`` (a name, a fresh location, an opener).
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import psycopg
import pytest

from offloader.errors import InvalidLedgerState, OffloadConflict
from offloader.metadata import open_export_metadata_store
from offloader.metadata.export_base import ExportMetadataStore, ExportWatermark
from offloader.metadata.postgres.db import PgDatabase
from offloader.metadata.postgres.export import PgExportMetadataStore
from offloader.metadata.postgres.schema import PG_MIGRATIONS, PG_SCHEMA_VERSION
from offloader.metadata.postgres.store import PgMetadataStore
from offloader.metadata.sqlite.db import MIGRATIONS, SCHEMA_VERSION, Database
from offloader.metadata.sqlite.export import SqliteExportMetadataStore
from offloader.metadata.sqlite.store import SqliteMetadataStore
from tests.metadata.backends import BACKENDS, Backend

TARGET = "s3://lake/exports"
TOPIC = "persistent://public/default/orders"


@pytest.fixture(params=sorted(BACKENDS))
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[Backend, str]:
    """A backend and a fresh location on it (a file path, or a URL on a new schema)."""
    chosen = BACKENDS[request.param]
    return chosen, chosen.new_location(request, tmp_path)


@pytest.fixture()
def store(backend: tuple[Backend, str]) -> Iterator[ExportMetadataStore]:
    opened = backend[0].open_export(backend[1])
    yield opened
    opened.close()


def _mark(ledger: int, entry: int, **changes: object) -> ExportWatermark:
    base = ExportWatermark(TARGET, TOPIC, 1, ledger, entry, 1000 + entry, '{"a":1}', 10, 2, 1, 5)
    return replace(base, **changes)  # type: ignore[arg-type]


def test_is_the_protocol(store: ExportMetadataStore) -> None:
    assert isinstance(store, ExportMetadataStore)
    assert store.get_watermark(TARGET, TOPIC, 1) is None
    assert store.list_watermarks() == []


def test_advance_is_a_compare_and_set_that_never_goes_back(store: ExportMetadataStore) -> None:
    first = store.advance(_mark(3, 99), None)
    assert store.get_watermark(TARGET, TOPIC, 1) == first
    with pytest.raises(OffloadConflict):
        store.advance(_mark(4, 9), None)  # the caller read "no row": someone else committed
    with pytest.raises(OffloadConflict):
        store.advance(_mark(4, 9), (2, 0))
    with pytest.raises(InvalidLedgerState):
        store.advance(_mark(3, 50), (3, 99))
    second = store.advance(_mark(5, -1, rows=20, files=4), (3, 99))
    assert store.get_watermark(TARGET, TOPIC, 1) == second
    assert store.advance(_mark(5, -1, updated_ms=9), (5, -1)).updated_ms == 9  # same position


def test_keys_are_target_topic_generation(store: ExportMetadataStore) -> None:
    store.advance(_mark(3, 1), None)
    store.advance(_mark(1, 1, generation=2), None)
    store.advance(_mark(7, 7, target="/data/out"), None)
    store.advance(_mark(2, 2, topic="persistent://public/default/b"), None)
    assert [(w.target, w.topic, w.generation) for w in store.list_watermarks(TARGET)] == [
        (TARGET, "persistent://public/default/b", 1),
        (TARGET, TOPIC, 1),
        (TARGET, TOPIC, 2),
    ]
    assert [w.position for w in store.list_watermarks(topic=TOPIC)] == [(7, 7), (3, 1), (1, 1)]
    assert store.get_watermark(TARGET, TOPIC, 2) == _mark(1, 1, generation=2)


def test_reset_moves_back_only(store: ExportMetadataStore) -> None:
    store.advance(_mark(9, 10), None)
    with pytest.raises(InvalidLedgerState):
        store.reset(_mark(9, 11))
    back = store.reset(_mark(4, -1, rows=3, publish_time_ms=None))
    assert store.get_watermark(TARGET, TOPIC, 1) == back
    store.advance(_mark(9, 10), (4, -1))
    fresh = store.reset(_mark(-1, -1, topic="persistent://public/default/new"))
    assert store.get_watermark(TARGET, "persistent://public/default/new", 1) == fresh


def test_bad_values_are_refused(store: ExportMetadataStore) -> None:
    with pytest.raises(InvalidLedgerState):
        store.advance(_mark(1, 1, generation=0), None)
    with pytest.raises(InvalidLedgerState):
        store.advance(_mark(1, 1, rows=-1), None)
    assert store.list_watermarks() == []


def test_sqlite_migrates_a_version_5_database(tmp_path: Path) -> None:
    path = tmp_path / "metadata.db"
    Database(path, migrations=MIGRATIONS[:5]).close()
    with SqliteMetadataStore(path) as meta:
        meta.create_namespace("t/ns", 1)
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == len(MIGRATIONS)
    conn.close()
    with SqliteExportMetadataStore(path) as exports:
        exports.advance(_mark(1, 2), None)
    reader = open_export_metadata_store(tmp_path, read_only=True)
    try:
        assert reader.get_watermark(TARGET, TOPIC, 1) == _mark(1, 2)
    finally:
        reader.close()


def test_two_connections_racing_the_first_commit_one_wins(backend: tuple[Backend, str]) -> None:
    """Two stores on one location (two brokers) both read "no watermark" and commit: exactly
    one advance lands, the other is an OffloadConflict, and both then see the winner's."""
    opened = [backend[0].open_export(backend[1]) for _ in range(2)]
    barrier = threading.Barrier(2)
    outcomes: dict[int, object] = {}

    def commit(i: int) -> None:
        barrier.wait()
        try:
            outcomes[i] = opened[i].advance(_mark(10 + i, 5, rows=i), None)
        except OffloadConflict as exc:
            outcomes[i] = exc

    try:
        threads = [threading.Thread(target=commit, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=30)
        won = [v for v in outcomes.values() if isinstance(v, ExportWatermark)]
        lost = [v for v in outcomes.values() if isinstance(v, OffloadConflict)]
        assert len(won) == 1 and len(lost) == 1, outcomes
        assert opened[0].get_watermark(TARGET, TOPIC, 1) == won[0]
        assert opened[1].list_watermarks() == won
    finally:
        for s in opened:
            s.close()


@pytest.mark.postgres
def test_postgresql_migrates_a_version_2_schema(pg_url: str) -> None:
    PgDatabase(pg_url, migrations=PG_MIGRATIONS[:2]).close()
    with PgMetadataStore(pg_url) as meta:  # the metadata store migrates it too
        meta.create_namespace("t/ns", 1)
    with psycopg.connect(pg_url) as conn:
        row = conn.execute("SELECT version FROM offloader_schema").fetchone()
    assert row is not None and row[0] == PG_SCHEMA_VERSION == len(PG_MIGRATIONS)
    exports = open_export_metadata_store(pg_url, read_only=True)  # not read-only: shared
    try:
        assert isinstance(exports, PgExportMetadataStore)
        exports.advance(_mark(1, 2), None)
        assert exports.get_watermark(TARGET, TOPIC, 1) == _mark(1, 2)
    finally:
        exports.close()
