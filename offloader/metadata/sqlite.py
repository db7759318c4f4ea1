"""SqliteMetadataStore: the embedded MetadataStore, one SQLite file under ``--home``.

This module owns the SQL for namespaces, topics and ledgers; the offload lifecycle, status and
lock live in :mod:`offloader.metadata.sqlite_offload`, rows-to-records in
:mod:`offloader.metadata.sqlite_rows`, the checks and errors shared with PostgreSQL in
:mod:`offloader.metadata.rules`, and the file, schema, pragmas, transactions and error
translation in :mod:`offloader.metadata.sqlite_schema`. These four modules are the only ones that
touch ``sqlite3``. Every change runs in one ``BEGIN IMMEDIATE`` transaction, so the CLI and a
running service (separate processes) can share the file.
"""

from __future__ import annotations

from pathlib import Path

from offloader.metadata import rules
from offloader.metadata import sqlite_rows as rows
from offloader.metadata.base import LedgerRecord, NamespaceRecord, TopicRecord, namespace_of_topic
from offloader.metadata.sqlite_offload import OffloadTables
from offloader.metadata.sqlite_schema import DEFAULT_BUSY_TIMEOUT_S, Database
from offloader.policies import TOPIC_POLICY_FIELDS, NamespacePolicies, TopicPolicies

_POLICY_ASSIGNMENTS = rules.SQLITE.assignments(rows.POLICY_COLUMNS)


class SqliteMetadataStore(OffloadTables):
    """The embedded :class:`~offloader.metadata.base.MetadataStore` (see the module docstring).

    One connection per instance, shared safely by the threads of a process; open one instance
    per process (never share it across ``fork``).
    """

    def __init__(
        self,
        path: str | Path,
        *,
        busy_timeout_s: float = DEFAULT_BUSY_TIMEOUT_S,
        read_only: bool = False,
    ) -> None:
        """``read_only``: see :class:`~offloader.metadata.sqlite_schema.Database`; every change
        then fails with a MetadataError saying the database is read-only."""
        self.path = Path(path)
        self._db = Database(self.path, busy_timeout_s=busy_timeout_s, read_only=read_only)

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> SqliteMetadataStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"SqliteMetadataStore({str(self.path)!r})"

    # --- namespaces -----------------------------------------------------------------------
    def create_namespace(
        self, name: str, now_ms: int, policies: NamespacePolicies | None = None
    ) -> NamespaceRecord:
        policies = policies or NamespacePolicies()
        values = rules.policy_values(policies, rows.POLICY_COLUMNS)
        columns = ", ".join(rows.POLICY_COLUMNS)
        marks = rules.SQLITE.marks(2 + len(rows.POLICY_COLUMNS))
        with self._db.write() as conn:
            if rows.one(conn, "SELECT 1 FROM namespaces WHERE name = ?", (name,)):
                raise rules.already_exists(f"namespace {name}")
            conn.execute(
                f"INSERT INTO namespaces (name, created_ms, {columns}) VALUES ({marks})",
                (name, now_ms, *values),
            )
            return rows.namespace_record(rows.require_namespace(conn, name))

    def get_namespace(self, name: str) -> NamespaceRecord:
        with self._db.read() as conn:
            return rows.namespace_record(rows.require_namespace(conn, name))

    def list_namespaces(self, tenant: str | None = None) -> list[NamespaceRecord]:
        with self._db.read() as conn:
            found = conn.execute("SELECT * FROM namespaces ORDER BY name").fetchall()
        return rules.of_tenant([rows.namespace_record(row) for row in found], tenant)

    def set_policies(self, name: str, policies: NamespacePolicies) -> NamespaceRecord:
        values = rules.policy_values(policies, rows.POLICY_COLUMNS)
        with self._db.write() as conn:
            rows.require_namespace(conn, name)
            conn.execute(
                f"UPDATE namespaces SET {_POLICY_ASSIGNMENTS} WHERE name = ?", (*values, name)
            )
            return rows.namespace_record(rows.require_namespace(conn, name))

    def delete_namespace(self, name: str) -> None:
        with self._db.write() as conn:
            rows.require_namespace(conn, name)
            count = rows.one(conn, "SELECT count(*) FROM topics WHERE namespace = ?", (name,))
            rules.check_namespace_empty(name, count[0] if count is not None else 0)
            conn.execute("DELETE FROM namespaces WHERE name = ?", (name,))

    # --- topics ---------------------------------------------------------------------------
    def create_topic(self, name: str, now_ms: int) -> TopicRecord:
        return self._create_topic(name, now_ms, exist_ok=False)

    def ensure_topic(self, name: str, now_ms: int) -> TopicRecord:
        return self._create_topic(name, now_ms, exist_ok=True)

    def _create_topic(self, name: str, now_ms: int, *, exist_ok: bool) -> TopicRecord:
        namespace = namespace_of_topic(name)
        with self._db.write() as conn:
            existing = rows.one(conn, "SELECT * FROM topics WHERE name = ?", (name,))
            if existing is not None:
                if exist_ok:
                    return rows.topic_record(existing)
                raise rules.already_exists(f"topic {name}")
            rows.require_namespace(conn, namespace)
            conn.execute(
                "INSERT INTO topics (name, namespace, created_ms) VALUES (?, ?, ?)",
                (name, namespace, now_ms),
            )
            return TopicRecord(name, namespace, now_ms)

    def get_topic(self, name: str) -> TopicRecord:
        with self._db.read() as conn:
            return rows.topic_record(rows.require_topic(conn, name))

    def list_topics(self, namespace: str | None = None) -> list[TopicRecord]:
        with self._db.read() as conn:
            if namespace is None:
                found = conn.execute("SELECT * FROM topics ORDER BY name").fetchall()
            else:
                found = conn.execute(
                    "SELECT * FROM topics WHERE namespace = ? ORDER BY name", (namespace,)
                ).fetchall()
        return [rows.topic_record(row) for row in found]

    def delete_topic(self, name: str) -> list[LedgerRecord]:
        with self._db.write() as conn:
            rows.require_topic(conn, name)
            found = conn.execute(
                rows.LEDGER_SELECT + " WHERE l.topic = ? ORDER BY l.ledger_id", (name,)
            ).fetchall()
            # ledgers, status and lock go with the topic (ON DELETE CASCADE)
            conn.execute("DELETE FROM topics WHERE name = ?", (name,))
            return [rows.ledger_record(row) for row in found]

    # --- topic policies -------------------------------------------------------------------
    def get_topic_policies(self, name: str) -> TopicPolicies:
        with self._db.read() as conn:
            rows.require_topic(conn, name)
            row = rows.one(conn, "SELECT * FROM topic_offload_policies WHERE topic = ?", (name,))
        return rows.topic_policies(row)

    def set_topic_policies(self, name: str, policies: TopicPolicies) -> TopicPolicies:
        values = rules.policy_values(policies, TOPIC_POLICY_FIELDS)
        with self._db.write() as conn:
            rows.require_topic(conn, name)
            conn.execute("DELETE FROM topic_offload_policies WHERE topic = ?", (name,))
            if not policies.is_empty:
                conn.execute(
                    f"INSERT INTO topic_offload_policies (topic, {', '.join(TOPIC_POLICY_FIELDS)})"
                    f" VALUES ({rules.SQLITE.marks(1 + len(TOPIC_POLICY_FIELDS))})",
                    (name, *values),
                )
        return policies

    # --- ledgers --------------------------------------------------------------------------
    def allocate_ledger_id(self) -> int:
        with self._db.write() as conn:
            row = rows.one(
                conn,
                "UPDATE counters SET value = value + 1 WHERE name = 'next_ledger_id' "
                "RETURNING value - 1",
            )
            return rules.counter_value(row[0] if row is not None else None)

    def add_ledger(self, topic: str, ledger_id: int, created_ms: int) -> LedgerRecord:
        rules.check_ledger_id(ledger_id)
        with self._db.write() as conn:
            rows.require_topic(conn, topic)
            if rows.one(conn, "SELECT 1 FROM ledgers WHERE ledger_id = ?", (ledger_id,)):
                raise rules.already_exists(f"ledger {ledger_id}")
            newest = rows.one(conn, "SELECT max(ledger_id) FROM ledgers WHERE topic = ?", (topic,))
            rules.check_newer(ledger_id, newest[0] if newest is not None else None, topic)
            conn.execute(
                "INSERT INTO ledgers (ledger_id, topic, created_ms, state) "
                "VALUES (?, ?, ?, 'OPEN')",
                (ledger_id, topic, created_ms),
            )
            # an id chosen by the caller is never allocated again
            conn.execute(
                "UPDATE counters SET value = max(value, ?) WHERE name = 'next_ledger_id'",
                (ledger_id + 1,),
            )
            return rows.get_ledger(conn, ledger_id)

    def update_ledger_stats(self, ledger_id: int, entries: int, size_bytes: int) -> LedgerRecord:
        with self._db.write() as conn:
            rules.require_open(rows.get_ledger(conn, ledger_id))
            conn.execute(
                "UPDATE ledgers SET entries = ?, size_bytes = ? WHERE ledger_id = ?",
                (entries, size_bytes, ledger_id),
            )
            return rows.get_ledger(conn, ledger_id)

    def close_ledger(
        self, ledger_id: int, closed_ms: int, entries: int, size_bytes: int
    ) -> LedgerRecord:
        with self._db.write() as conn:
            ledger = rows.get_ledger(conn, ledger_id)
            final = (closed_ms, entries, size_bytes)
            if rules.is_repeated_close(ledger, final):
                return ledger
            conn.execute(
                "UPDATE ledgers SET state = 'CLOSED', closed_ms = ?, entries = ?, size_bytes = ? "
                "WHERE ledger_id = ?",
                (*final, ledger_id),
            )
            return rows.get_ledger(conn, ledger_id)

    def get_ledger(self, ledger_id: int) -> LedgerRecord:
        with self._db.read() as conn:
            return rows.get_ledger(conn, ledger_id)

    def list_ledgers(self, topic: str, *, include_deleted: bool = False) -> list[LedgerRecord]:
        where = "" if include_deleted else " AND l.state != 'DELETED'"
        with self._db.read() as conn:
            rows.require_topic(conn, topic)
            found = conn.execute(
                rows.LEDGER_SELECT + f" WHERE l.topic = ?{where} ORDER BY l.ledger_id", (topic,)
            ).fetchall()
        return [rows.ledger_record(row) for row in found]

    def mark_ledger_deleted(self, ledger_id: int) -> LedgerRecord:
        with self._db.write() as conn:
            ledger = rows.get_ledger(conn, ledger_id)
            conn.execute("UPDATE ledgers SET state = 'DELETED' WHERE ledger_id = ?", (ledger_id,))
            return ledger
