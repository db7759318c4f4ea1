"""PgMetadataStore: the MetadataStore on a shared PostgreSQL database (several brokers).

This module owns the PostgreSQL SQL for namespaces, topics and ledgers; the offload lifecycle,
status and lock are in :mod:`offloader.metadata.pg_offload`, brokers, topic ownership and leases
in :mod:`offloader.metadata.pg_cluster`, the connection, transactions and error translation in
:mod:`offloader.metadata.pg_db`, the tables in :mod:`offloader.metadata.pg_schema`. Rows become
records through the functions SQLite uses (:mod:`offloader.metadata.sqlite_rows`), and the state
checks, validation and error messages are SQLite's too (:mod:`offloader.metadata.rules`).

Every change is one READ COMMITTED transaction whose read-modify-write is made atomic by a row
lock (``FOR UPDATE`` on the topic for ledger appends, on the ledger for state changes) or by one
conditional statement (``INSERT ... ON CONFLICT``, ``UPDATE ... RETURNING``).
"""

from __future__ import annotations

from offloader.metadata import pg_rows as pg
from offloader.metadata import rules
from offloader.metadata import sqlite_rows as rows
from offloader.metadata.base import LedgerRecord, NamespaceRecord, TopicRecord, namespace_of_topic
from offloader.metadata.pg_cluster import ClusterTables
from offloader.metadata.pg_db import DEFAULT_BUSY_TIMEOUT_S, PgDatabase
from offloader.metadata.pg_offload import PgOffloadTables
from offloader.policies import TOPIC_POLICY_FIELDS, NamespacePolicies, TopicPolicies

_POLICY_ASSIGNMENTS = rules.POSTGRES.assignments(rows.POLICY_COLUMNS)


class PgMetadataStore(PgOffloadTables, ClusterTables):
    """The shared :class:`~offloader.metadata.base.MetadataStore` (see the module docstring),
    also the :class:`~offloader.metadata.cluster_base.ClusterMetadata` of the brokers on it.

    One connection per instance, shared safely by the threads of a process; open one instance
    per process."""

    def __init__(self, url: str, *, busy_timeout_s: float = DEFAULT_BUSY_TIMEOUT_S) -> None:
        self.url = url
        self._db = PgDatabase(url, busy_timeout_s=busy_timeout_s)

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> PgMetadataStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"PgMetadataStore({self._db.where!r})"

    # --- namespaces -----------------------------------------------------------------------
    def create_namespace(
        self, name: str, now_ms: int, policies: NamespacePolicies | None = None
    ) -> NamespaceRecord:
        policies = policies or NamespacePolicies()
        values = rules.policy_values(policies, rows.POLICY_COLUMNS)
        columns = ", ".join(rows.POLICY_COLUMNS)
        marks = rules.POSTGRES.marks(2 + len(rows.POLICY_COLUMNS))
        with self._db.write() as cur:
            row = pg.one(
                cur,
                f"INSERT INTO namespaces (name, created_ms, {columns}) VALUES ({marks}) "
                "ON CONFLICT (name) DO NOTHING RETURNING *",
                (name, now_ms, *values),
            )
            if row is None:
                raise rules.already_exists(f"namespace {name}")
            return rows.namespace_record(row)

    def get_namespace(self, name: str) -> NamespaceRecord:
        with self._db.read() as cur:
            return rows.namespace_record(pg.require_namespace(cur, name))

    def list_namespaces(self, tenant: str | None = None) -> list[NamespaceRecord]:
        with self._db.read() as cur:
            found = pg.all_rows(cur, "SELECT * FROM namespaces ORDER BY name")
        return rules.of_tenant([rows.namespace_record(row) for row in found], tenant)

    def set_policies(self, name: str, policies: NamespacePolicies) -> NamespaceRecord:
        values = rules.policy_values(policies, rows.POLICY_COLUMNS)
        with self._db.write() as cur:
            row = pg.one(
                cur,
                f"UPDATE namespaces SET {_POLICY_ASSIGNMENTS} WHERE name = %s RETURNING *",
                (*values, name),
            )
            return rows.namespace_record(rules.need_namespace(row, name))

    def delete_namespace(self, name: str) -> None:
        with self._db.write() as cur:
            pg.require_namespace(cur, name, lock="FOR UPDATE")
            count = pg.one(cur, "SELECT count(*) AS n FROM topics WHERE namespace = %s", (name,))
            rules.check_namespace_empty(name, count["n"] if count is not None else 0)
            cur.execute("DELETE FROM namespaces WHERE name = %s", (name,))

    # --- topics ---------------------------------------------------------------------------
    def create_topic(self, name: str, now_ms: int) -> TopicRecord:
        return self._create_topic(name, now_ms, exist_ok=False)

    def ensure_topic(self, name: str, now_ms: int) -> TopicRecord:
        return self._create_topic(name, now_ms, exist_ok=True)

    def _create_topic(self, name: str, now_ms: int, *, exist_ok: bool) -> TopicRecord:
        namespace = namespace_of_topic(name)
        with self._db.write() as cur:
            existing = pg.one(cur, "SELECT * FROM topics WHERE name = %s", (name,))
            if existing is not None:
                if exist_ok:
                    return rows.topic_record(existing)
                raise rules.already_exists(f"topic {name}")
            pg.require_namespace(cur, namespace, lock="FOR KEY SHARE")
            row = pg.one(
                cur,
                "INSERT INTO topics (name, namespace, created_ms) VALUES (%s, %s, %s) "
                "ON CONFLICT (name) DO NOTHING RETURNING *",
                (name, namespace, now_ms),
            )
            if row is None:  # created by another process since the SELECT above
                if not exist_ok:
                    raise rules.already_exists(f"topic {name}")
                row = pg.require_topic(cur, name)
            return rows.topic_record(row)

    def get_topic(self, name: str) -> TopicRecord:
        with self._db.read() as cur:
            return rows.topic_record(pg.require_topic(cur, name))

    def list_topics(self, namespace: str | None = None) -> list[TopicRecord]:
        with self._db.read() as cur:
            if namespace is None:
                found = pg.all_rows(cur, "SELECT * FROM topics ORDER BY name")
            else:
                found = pg.all_rows(
                    cur, "SELECT * FROM topics WHERE namespace = %s ORDER BY name", (namespace,)
                )
        return [rows.topic_record(row) for row in found]

    def delete_topic(self, name: str) -> list[LedgerRecord]:
        with self._db.write() as cur:
            pg.require_topic(cur, name, lock="FOR UPDATE")
            found = pg.all_rows(
                cur, pg.LEDGER_SELECT + " WHERE l.topic = %s ORDER BY l.ledger_id", (name,)
            )
            # ledgers, status, lock, policies and owner go with the topic (ON DELETE CASCADE)
            cur.execute("DELETE FROM topics WHERE name = %s", (name,))
            return [rows.ledger_record(row) for row in found]

    # --- topic policies -------------------------------------------------------------------
    def get_topic_policies(self, name: str) -> TopicPolicies:
        with self._db.read() as cur:
            pg.require_topic(cur, name)
            row = pg.one(cur, "SELECT * FROM topic_offload_policies WHERE topic = %s", (name,))
        return rows.topic_policies(row)

    def set_topic_policies(self, name: str, policies: TopicPolicies) -> TopicPolicies:
        values = rules.policy_values(policies, TOPIC_POLICY_FIELDS)
        with self._db.write() as cur:
            pg.require_topic(cur, name, lock="FOR UPDATE")
            cur.execute("DELETE FROM topic_offload_policies WHERE topic = %s", (name,))
            if not policies.is_empty:
                cur.execute(
                    f"INSERT INTO topic_offload_policies (topic, {', '.join(TOPIC_POLICY_FIELDS)})"
                    f" VALUES ({rules.POSTGRES.marks(1 + len(TOPIC_POLICY_FIELDS))})".encode(),
                    (name, *values),
                )
        return policies

    # --- ledgers --------------------------------------------------------------------------
    def allocate_ledger_id(self) -> int:
        with self._db.write() as cur:
            row = pg.one(
                cur,
                "UPDATE counters SET value = value + 1 WHERE name = 'next_ledger_id' "
                "RETURNING value - 1 AS id",
            )
            return rules.counter_value(row["id"] if row is not None else None)

    def add_ledger(self, topic: str, ledger_id: int, created_ms: int) -> LedgerRecord:
        rules.check_ledger_id(ledger_id)
        with self._db.write() as cur:
            pg.require_topic(cur, topic, lock="FOR UPDATE")  # one append per topic at a time
            if pg.one(cur, "SELECT 1 FROM ledgers WHERE ledger_id = %s", (ledger_id,)):
                raise rules.already_exists(f"ledger {ledger_id}")
            newest = pg.one(
                cur, "SELECT max(ledger_id) AS m FROM ledgers WHERE topic = %s", (topic,)
            )
            rules.check_newer(ledger_id, newest["m"] if newest is not None else None, topic)
            cur.execute(
                "INSERT INTO ledgers (ledger_id, topic, created_ms, state) "
                "VALUES (%s, %s, %s, 'OPEN')",
                (ledger_id, topic, created_ms),
            )
            # an id chosen by the caller is never allocated again
            cur.execute(
                "UPDATE counters SET value = greatest(value, %s) WHERE name = 'next_ledger_id'",
                (ledger_id + 1,),
            )
            return pg.get_ledger(cur, ledger_id)

    def update_ledger_stats(self, ledger_id: int, entries: int, size_bytes: int) -> LedgerRecord:
        with self._db.write() as cur:
            rules.require_open(pg.get_ledger(cur, ledger_id, lock=True))
            cur.execute(
                "UPDATE ledgers SET entries = %s, size_bytes = %s WHERE ledger_id = %s",
                (entries, size_bytes, ledger_id),
            )
            return pg.get_ledger(cur, ledger_id)

    def close_ledger(
        self, ledger_id: int, closed_ms: int, entries: int, size_bytes: int
    ) -> LedgerRecord:
        with self._db.write() as cur:
            ledger = pg.get_ledger(cur, ledger_id, lock=True)
            final = (closed_ms, entries, size_bytes)
            if rules.is_repeated_close(ledger, final):
                return ledger
            cur.execute(
                "UPDATE ledgers SET state = 'CLOSED', closed_ms = %s, entries = %s, "
                "size_bytes = %s WHERE ledger_id = %s",
                (*final, ledger_id),
            )
            return pg.get_ledger(cur, ledger_id)

    def get_ledger(self, ledger_id: int) -> LedgerRecord:
        with self._db.read() as cur:
            return pg.get_ledger(cur, ledger_id)

    def list_ledgers(self, topic: str, *, include_deleted: bool = False) -> list[LedgerRecord]:
        where = "" if include_deleted else " AND l.state != 'DELETED'"
        with self._db.read() as cur:
            pg.require_topic(cur, topic)
            found = pg.all_rows(
                cur, pg.LEDGER_SELECT + f" WHERE l.topic = %s{where} ORDER BY l.ledger_id", (topic,)
            )
        return [rows.ledger_record(row) for row in found]

    def mark_ledger_deleted(self, ledger_id: int) -> LedgerRecord:
        with self._db.write() as cur:
            ledger = pg.get_ledger(cur, ledger_id, lock=True)
            cur.execute("UPDATE ledgers SET state = 'DELETED' WHERE ledger_id = %s", (ledger_id,))
            return ledger
