"""What is specific to the SQLite backend: pragmas, migrations, refusals, error translation."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from offloader.errors import AlreadyExists, MetadataBusy, MetadataError, SchemaVersionError
from offloader.metadata import METADATA_FILENAME, open_metadata_store
from offloader.metadata.sqlite.db import (
    APPLICATION_ID,
    MIGRATIONS,
    SCHEMA_VERSION,
    Database,
    translate_error,
)
from offloader.metadata.sqlite.store import SqliteMetadataStore
from offloader.policies import NamespacePolicies
from tests.metadata import mp_workers

NS = "public/default"
TOPIC = "persistent://public/default/t"


def _pragma(path: Path, name: str) -> object:
    conn = sqlite3.connect(path)
    try:
        return conn.execute(f"PRAGMA {name}").fetchone()[0]
    finally:
        conn.close()


def test_open_metadata_store_creates_home(tmp_path: Path) -> None:
    home = tmp_path / "home" / ".offloader"
    store = open_metadata_store(home)
    try:
        assert isinstance(store, SqliteMetadataStore)
        assert (home / METADATA_FILENAME).exists()
        store.create_namespace(NS, 1)
    finally:
        store.close()


def test_pragmas(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    with SqliteMetadataStore(path) as store:
        conn = store._db.conn
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
        assert conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
        assert conn.execute("PRAGMA busy_timeout").fetchone()[0] == 10_000
    assert _pragma(path, "user_version") == SCHEMA_VERSION
    assert _pragma(path, "application_id") == APPLICATION_ID


def test_a_version_1_database_is_migrated(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    Database(path, migrations=MIGRATIONS[:1]).close()
    assert _pragma(path, "user_version") == 1
    conn = sqlite3.connect(path)
    with conn:  # data written by a version-1 ledger-offloader
        conn.execute("INSERT INTO namespaces (name, created_ms) VALUES (?, 1)", (NS,))
        conn.execute(
            "INSERT INTO topics (name, namespace, created_ms) VALUES (?, ?, 2)", (TOPIC, NS)
        )
        conn.execute(
            "INSERT INTO ledgers (ledger_id, topic, created_ms, closed_ms, entries, size_bytes, "
            "state) VALUES (7, ?, 3, 4, 10, 100, 'CLOSED')",
            (TOPIC,),
        )
        conn.execute("UPDATE counters SET value = 8")
    conn.close()

    with SqliteMetadataStore(path) as store:
        assert _pragma(path, "user_version") == SCHEMA_VERSION
        ledger = store.get_ledger(7)
        assert (ledger.topic, ledger.entries, ledger.size_bytes, ledger.state) == (
            TOPIC,
            10,
            100,
            "CLOSED",
        )
        assert store.allocate_ledger_id() == 8
        # tables added by version 2 work
        assert store.get_offload_status(TOPIC).status == "NOT_RUN"
        assert store.try_acquire_offload_lock(TOPIC, "me", 1, 1)


def test_reopening_a_current_database_changes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    with SqliteMetadataStore(path) as store:
        store.create_namespace(NS, 1)
    with SqliteMetadataStore(path) as store:
        assert [n.name for n in store.list_namespaces()] == [NS]


def test_a_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    SqliteMetadataStore(path).close()
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()
    with pytest.raises(SchemaVersionError, match="newer") as info:
        SqliteMetadataStore(path)
    assert f"schema version {SCHEMA_VERSION + 1}" in str(info.value)
    assert _pragma(path, "user_version") == SCHEMA_VERSION + 1  # left untouched


def test_a_foreign_sqlite_database_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE something (x)")
    conn.close()
    with pytest.raises(SchemaVersionError, match="not a ledger-offloader"):
        SqliteMetadataStore(path)
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA user_version = 1")
    conn.close()
    with pytest.raises(SchemaVersionError, match="application id"):
        SqliteMetadataStore(path)


def test_a_file_that_is_not_a_database_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    path.write_bytes(b"this is not sqlite, just some text long enough to fill a header" * 20)
    with pytest.raises(MetadataError, match=str(path)):
        SqliteMetadataStore(path)


def test_a_database_locked_too_long_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    with SqliteMetadataStore(path, busy_timeout_s=0.2) as store:
        store.create_namespace(NS, 1)
        holder = sqlite3.connect(path, isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")
        try:
            with pytest.raises(MetadataBusy, match="locked by another process"):
                store.create_namespace("public/other", 2)
            # reads still work in WAL mode while a writer holds the lock
            assert [n.name for n in store.list_namespaces()] == [NS]
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        store.create_namespace("public/other", 2)


def test_sqlite_errors_are_translated() -> None:
    path = Path("/x/m.db")
    duplicate = translate_error(sqlite3.IntegrityError("UNIQUE constraint failed: t.x"), path, 1)
    assert isinstance(duplicate, AlreadyExists)
    busy = translate_error(sqlite3.OperationalError("database is locked"), path, 10)
    assert isinstance(busy, MetadataBusy) and "10 s" in str(busy)
    other = translate_error(sqlite3.DatabaseError("disk I/O error"), path, 1)
    assert type(other) is MetadataError and "/x/m.db" in str(other)


def test_integers_beyond_64_bits_are_a_metadata_error(tmp_path: Path) -> None:
    """sqlite3 raises OverflowError for them: translated, and the transaction rolled back."""
    with SqliteMetadataStore(tmp_path / "m.db") as store:
        store.create_namespace(NS, 1)
        policies = NamespacePolicies(offload_threshold_bytes=10)
        object.__setattr__(policies, "offload_threshold_bytes", 2**64)  # past the validation
        with pytest.raises(MetadataError, match="too large to store"):
            store.set_policies(NS, policies)
        assert store.get_namespace(NS).policies.offload_threshold_bytes == -1
        store.create_topic(TOPIC, 1)
        ledger = store.add_ledger(TOPIC, store.allocate_ledger_id(), 1)
        with pytest.raises(MetadataError, match="signed 64-bit"):
            store.update_ledger_stats(ledger.ledger_id, 2**63, 1)
        assert store.get_ledger(ledger.ledger_id).entries == 0


def test_stored_local_first_reads_back_as_bookkeeper_first(tmp_path: Path) -> None:
    """Databases written before the rename hold 'local-first'."""
    path = tmp_path / "m.db"
    with SqliteMetadataStore(path) as store:
        store.create_namespace(NS, 1)
    conn = sqlite3.connect(path)
    try:
        conn.execute("UPDATE namespaces SET read_priority = 'local-first'")
        conn.commit()
    finally:
        conn.close()
    with SqliteMetadataStore(path) as store:
        policies = store.get_namespace(NS).policies
    assert policies.read_priority == "bookkeeper-first" and policies.prefers_local


def test_processes_opening_a_fresh_database_at_once(tmp_path: Path) -> None:
    """Several processes create and migrate the same new file concurrently."""
    location = str(tmp_path / "fresh.db")
    batches = mp_workers.run_workers(mp_workers.allocate_ids, [("sqlite", location, 5)] * 4)
    assert sorted(i for batch in batches for i in batch) == list(range(20))
    assert _pragma(Path(location), "user_version") == SCHEMA_VERSION
