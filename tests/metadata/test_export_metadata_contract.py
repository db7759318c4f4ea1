"""The ExportMetadataStore contract: every backend (SQLite now, PostgreSQL later) passes it.

Backends plug in through ``EXPORT_BACKENDS`` below (a name and a way to open a fresh store).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from offloader.errors import InvalidLedgerState, OffloadConflict
from offloader.metadata import open_export_metadata_store
from offloader.metadata.export_base import ExportMetadataStore, ExportWatermark
from offloader.metadata.export_sqlite import SqliteExportMetadataStore
from offloader.metadata.sqlite import SqliteMetadataStore
from offloader.metadata.sqlite_schema import MIGRATIONS, SCHEMA_VERSION, Database

EXPORT_BACKENDS: dict[str, Callable[[Path], ExportMetadataStore]] = {
    "sqlite": lambda tmp: SqliteExportMetadataStore(tmp / "metadata.db"),
}
TARGET = "s3://lake/exports"
TOPIC = "persistent://public/default/orders"


@pytest.fixture(params=sorted(EXPORT_BACKENDS))
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ExportMetadataStore]:
    opened = EXPORT_BACKENDS[request.param](tmp_path)
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
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 6
    conn.close()
    with SqliteExportMetadataStore(path) as exports:
        exports.advance(_mark(1, 2), None)
    reader = open_export_metadata_store(tmp_path, read_only=True)
    try:
        assert reader.get_watermark(TARGET, TOPIC, 1) == _mark(1, 2)
    finally:
        reader.close()
