"""The MetadataStore's namespaces, topics and ledgers, written once for SQLite and PostgreSQL.

This module owns the statements and the algorithm of every namespace, topic and ledger method
of :class:`~offloader.metadata.base.MetadataStore`; the offload lifecycle, status and lock are
in :mod:`offloader.metadata.offload`, the lookups and the executor interface in
:mod:`offloader.metadata.statements`, the checks and errors in :mod:`offloader.metadata.rules`.
Each backend (:class:`offloader.metadata.sqlite.store.SqliteMetadataStore`,
:class:`offloader.metadata.postgres.store.PgMetadataStore`) only supplies its database
(connection, transactions, error translation, migrations).

Every change is one transaction (SQLite ``BEGIN IMMEDIATE``: the database's write lock;
PostgreSQL READ COMMITTED) whose read-modify-write is made atomic, on PostgreSQL, by a row lock
(``FOR UPDATE`` on the topic for ledger appends, on the ledger for state changes; dropped by the
SQLite dialect, which needs none) or by one conditional statement (``INSERT ... ON CONFLICT``,
``UPDATE ... RETURNING``, which SQLite runs too).
"""

from __future__ import annotations

from offloader.metadata import rows, rules
from offloader.metadata import statements as sql
from offloader.metadata.base import LedgerRecord, NamespaceRecord, TopicRecord, namespace_of_topic
from offloader.metadata.offload import OffloadTables
from offloader.metadata.statements import SqlStore, Transactions
from offloader.policies import TOPIC_POLICY_FIELDS, NamespacePolicies, TopicPolicies

_POLICY_ASSIGNMENTS = sql.assignments(rows.POLICY_COLUMNS)


class SqlMetadataStore(SqlStore, OffloadTables):
    """The :class:`~offloader.metadata.base.MetadataStore` methods over ``_db``, the
    backend's :class:`~offloader.metadata.statements.Transactions` (see the module docstring)."""

    _db: Transactions

    # --- namespaces -----------------------------------------------------------------------
    def create_namespace(
        self, name: str, now_ms: int, policies: NamespacePolicies | None = None
    ) -> NamespaceRecord:
        policies = policies or NamespacePolicies()
        values = rules.policy_values(policies, rows.POLICY_COLUMNS)
        columns = ", ".join(rows.POLICY_COLUMNS)
        marks = sql.marks(2 + len(rows.POLICY_COLUMNS))
        with self._db.writing() as ex:
            row = ex.one(
                f"INSERT INTO namespaces (name, created_ms, {columns}) VALUES ({marks}) "
                "ON CONFLICT (name) DO NOTHING RETURNING *",
                (name, now_ms, *values),
            )
            if row is None:
                raise rules.already_exists(f"namespace {name}")
            return rows.namespace_record(row)

    def get_namespace(self, name: str) -> NamespaceRecord:
        with self._db.reading() as ex:
            return rows.namespace_record(sql.require_namespace(ex, name))

    def list_namespaces(self, tenant: str | None = None) -> list[NamespaceRecord]:
        with self._db.reading() as ex:
            found = ex.all("SELECT * FROM namespaces ORDER BY name")
        return rules.of_tenant([rows.namespace_record(row) for row in found], tenant)

    def set_policies(self, name: str, policies: NamespacePolicies) -> NamespaceRecord:
        values = rules.policy_values(policies, rows.POLICY_COLUMNS)
        with self._db.writing() as ex:
            row = ex.one(
                f"UPDATE namespaces SET {_POLICY_ASSIGNMENTS} WHERE name = ? RETURNING *",
                (*values, name),
            )
            return rows.namespace_record(rules.need_namespace(row, name))

    def delete_namespace(self, name: str) -> None:
        with self._db.writing() as ex:
            sql.require_namespace(ex, name, lock="FOR UPDATE")
            count = ex.one("SELECT count(*) AS n FROM topics WHERE namespace = ?", (name,))
            rules.check_namespace_empty(name, count["n"] if count is not None else 0)
            ex.run("DELETE FROM namespaces WHERE name = ?", (name,))

    # --- topics ---------------------------------------------------------------------------
    def create_topic(self, name: str, now_ms: int) -> TopicRecord:
        return self._create_topic(name, now_ms, exist_ok=False)

    def ensure_topic(self, name: str, now_ms: int) -> TopicRecord:
        return self._create_topic(name, now_ms, exist_ok=True)

    def _create_topic(self, name: str, now_ms: int, *, exist_ok: bool) -> TopicRecord:
        namespace = namespace_of_topic(name)
        with self._db.writing() as ex:
            existing = ex.one("SELECT * FROM topics WHERE name = ?", (name,))
            if existing is not None:
                if exist_ok:
                    return rows.topic_record(existing)
                raise rules.already_exists(f"topic {name}")
            sql.require_namespace(ex, namespace, lock="FOR KEY SHARE")
            row = ex.one(
                "INSERT INTO topics (name, namespace, created_ms) VALUES (?, ?, ?) "
                "ON CONFLICT (name) DO NOTHING RETURNING *",
                (name, namespace, now_ms),
            )
            if row is None:  # created by another process since the SELECT above
                if not exist_ok:
                    raise rules.already_exists(f"topic {name}")
                row = sql.require_topic(ex, name)
            return rows.topic_record(row)

    def get_topic(self, name: str) -> TopicRecord:
        with self._db.reading() as ex:
            return rows.topic_record(sql.require_topic(ex, name))

    def list_topics(self, namespace: str | None = None) -> list[TopicRecord]:
        with self._db.reading() as ex:
            if namespace is None:
                found = ex.all("SELECT * FROM topics ORDER BY name")
            else:
                found = ex.all(
                    "SELECT * FROM topics WHERE namespace = ? ORDER BY name", (namespace,)
                )
        return [rows.topic_record(row) for row in found]

    def delete_topic(self, name: str) -> list[LedgerRecord]:
        with self._db.writing() as ex:
            sql.require_topic(ex, name, lock="FOR UPDATE")
            found = ex.all(sql.LEDGER_SELECT + " WHERE l.topic = ? ORDER BY l.ledger_id", (name,))
            # ledgers, status, lock, policies and owner go with the topic (ON DELETE CASCADE)
            ex.run("DELETE FROM topics WHERE name = ?", (name,))
            return [rows.ledger_record(row) for row in found]

    # --- topic policies -------------------------------------------------------------------
    def get_topic_policies(self, name: str) -> TopicPolicies:
        with self._db.reading() as ex:
            sql.require_topic(ex, name)
            row = ex.one("SELECT * FROM topic_offload_policies WHERE topic = ?", (name,))
        return rows.topic_policies(row)

    def set_topic_policies(self, name: str, policies: TopicPolicies) -> TopicPolicies:
        values = rules.policy_values(policies, TOPIC_POLICY_FIELDS)
        with self._db.writing() as ex:
            sql.require_topic(ex, name, lock="FOR UPDATE")
            ex.run("DELETE FROM topic_offload_policies WHERE topic = ?", (name,))
            if not policies.is_empty:
                ex.run(
                    f"INSERT INTO topic_offload_policies (topic, {', '.join(TOPIC_POLICY_FIELDS)})"
                    f" VALUES ({sql.marks(1 + len(TOPIC_POLICY_FIELDS))})",
                    (name, *values),
                )
        return policies

    # --- ledgers --------------------------------------------------------------------------
    def allocate_ledger_id(self) -> int:
        with self._db.writing() as ex:
            row = ex.one(
                "UPDATE counters SET value = value + 1 WHERE name = 'next_ledger_id' "
                "RETURNING value - 1 AS id",
            )
            return rules.counter_value(row["id"] if row is not None else None)

    def add_ledger(self, topic: str, ledger_id: int, created_ms: int) -> LedgerRecord:
        rules.check_ledger_id(ledger_id)
        with self._db.writing() as ex:
            sql.require_topic(ex, topic, lock="FOR UPDATE")  # one append per topic at a time
            if ex.one("SELECT 1 FROM ledgers WHERE ledger_id = ?", (ledger_id,)):
                raise rules.already_exists(f"ledger {ledger_id}")
            newest = ex.one("SELECT max(ledger_id) AS m FROM ledgers WHERE topic = ?", (topic,))
            rules.check_newer(ledger_id, newest["m"] if newest is not None else None, topic)
            ex.run(
                "INSERT INTO ledgers (ledger_id, topic, created_ms, state) "
                "VALUES (?, ?, ?, 'OPEN')",
                (ledger_id, topic, created_ms),
            )
            # an id chosen by the caller is never allocated again
            ex.run(
                f"UPDATE counters SET value = {ex.dialect.greatest}(value, ?) "
                "WHERE name = 'next_ledger_id'",
                (ledger_id + 1,),
            )
            return sql.get_ledger(ex, ledger_id)

    def update_ledger_stats(self, ledger_id: int, entries: int, size_bytes: int) -> LedgerRecord:
        with self._db.writing() as ex:
            rules.require_open(sql.get_ledger(ex, ledger_id, lock=True))
            ex.run(
                "UPDATE ledgers SET entries = ?, size_bytes = ? WHERE ledger_id = ?",
                (entries, size_bytes, ledger_id),
            )
            return sql.get_ledger(ex, ledger_id)

    def close_ledger(
        self, ledger_id: int, closed_ms: int, entries: int, size_bytes: int
    ) -> LedgerRecord:
        with self._db.writing() as ex:
            ledger = sql.get_ledger(ex, ledger_id, lock=True)
            final = (closed_ms, entries, size_bytes)
            if rules.is_repeated_close(ledger, final):
                return ledger
            ex.run(
                "UPDATE ledgers SET state = 'CLOSED', closed_ms = ?, entries = ?, "
                "size_bytes = ? WHERE ledger_id = ?",
                (*final, ledger_id),
            )
            return sql.get_ledger(ex, ledger_id)

    def get_ledger(self, ledger_id: int) -> LedgerRecord:
        with self._db.reading() as ex:
            return sql.get_ledger(ex, ledger_id)

    def list_ledgers(self, topic: str, *, include_deleted: bool = False) -> list[LedgerRecord]:
        where = "" if include_deleted else " AND l.state != 'DELETED'"
        with self._db.reading() as ex:
            sql.require_topic(ex, topic)
            found = ex.all(
                sql.LEDGER_SELECT + f" WHERE l.topic = ?{where} ORDER BY l.ledger_id", (topic,)
            )
        return [rows.ledger_record(row) for row in found]

    def mark_ledger_deleted(self, ledger_id: int) -> LedgerRecord:
        with self._db.writing() as ex:
            ledger = sql.get_ledger(ex, ledger_id, lock=True)
            ex.run("UPDATE ledgers SET state = 'DELETED' WHERE ledger_id = ?", (ledger_id,))
            return ledger
