"""Brokers, topic ownership and leases on PostgreSQL (the ClusterMetadata of the shared store).

This module owns the SQL of :mod:`offloader.metadata.cluster_base` on the tables of schema
version 2 (:mod:`offloader.metadata.pg_schema`). Each decision is one statement that the server
makes atomic: claiming a topic is an ``INSERT ... ON CONFLICT DO UPDATE`` that keeps the present
owner and returns it (so two brokers claiming at once agree on one owner); a lease is an upsert
whose ``WHERE`` accepts only a free, own or expired lease; releasing is a ``DELETE`` that names
the holder. All run at READ COMMITTED. It is a mixin of
:class:`~offloader.metadata.pg_store.PgMetadataStore`.
"""

from __future__ import annotations

from typing import Any

from offloader.errors import NotFound
from offloader.metadata import pg_rows as pg
from offloader.metadata.cluster_base import BrokerRecord, Lease, TopicOwner
from offloader.metadata.pg_db import PgDatabase


def _broker(row: dict[str, Any]) -> BrokerRecord:
    return BrokerRecord(
        row["broker_id"], row["host"], row["home"], row["started_ms"], row["heartbeat_ms"]
    )


def _owner(row: dict[str, Any]) -> TopicOwner:
    return TopicOwner(row["topic"], row["broker_id"], row["since_ms"])


class ClusterTables:
    """The ClusterMetadata methods of the PostgreSQL store (see the module docstring)."""

    _db: PgDatabase
    shared = True

    def register_broker(self, broker_id: str, host: str, home: str, now_ms: int) -> BrokerRecord:
        with self._db.write() as cur:
            row = pg.one(
                cur,
                "INSERT INTO brokers (broker_id, host, home, started_ms, heartbeat_ms) "
                "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (broker_id) DO UPDATE SET "
                "host = excluded.host, home = excluded.home, heartbeat_ms = excluded.heartbeat_ms "
                "RETURNING *",
                (broker_id, host, home, now_ms, now_ms),
            )
            assert row is not None  # an upsert always returns its row
            return _broker(row)

    def broker_heartbeat(self, broker_id: str, now_ms: int) -> None:
        with self._db.write() as cur:
            cur.execute(
                "UPDATE brokers SET heartbeat_ms = greatest(heartbeat_ms, %s) WHERE broker_id = %s",
                (now_ms, broker_id),
            )
            if cur.rowcount != 1:
                raise NotFound(f"broker {broker_id} is not registered")

    def list_brokers(self) -> list[BrokerRecord]:
        with self._db.read() as cur:
            return [
                _broker(r) for r in pg.all_rows(cur, "SELECT * FROM brokers ORDER BY broker_id")
            ]

    def claim_topic(self, topic: str, broker_id: str, now_ms: int) -> TopicOwner:
        with self._db.write() as cur:
            pg.require_topic(cur, topic, lock="FOR KEY SHARE")
            row = pg.one(
                cur,
                "INSERT INTO topic_owners AS o (topic, broker_id, since_ms) VALUES (%s, %s, %s) "
                "ON CONFLICT (topic) DO UPDATE SET broker_id = o.broker_id RETURNING *",
                (topic, broker_id, now_ms),
            )
            assert row is not None  # an upsert always returns its row
            return _owner(row)

    def get_topic_owner(self, topic: str) -> TopicOwner | None:
        with self._db.read() as cur:
            row = pg.one(cur, "SELECT * FROM topic_owners WHERE topic = %s", (topic,))
        return None if row is None else _owner(row)

    def list_topic_owners(self) -> dict[str, TopicOwner]:
        with self._db.read() as cur:
            found = pg.all_rows(cur, "SELECT * FROM topic_owners ORDER BY topic")
        return {row["topic"]: _owner(row) for row in found}

    def release_topic(self, topic: str, broker_id: str) -> bool:
        with self._db.write() as cur:
            cur.execute(
                "DELETE FROM topic_owners WHERE topic = %s AND broker_id = %s", (topic, broker_id)
            )
            return cur.rowcount == 1

    def try_acquire_lease(self, name: str, holder: str, now_ms: int, ttl_ms: int) -> bool:
        with self._db.write() as cur:
            row = pg.one(
                cur,
                "INSERT INTO leases AS l (name, holder, acquired_ms, expires_ms) "
                "VALUES (%s, %s, %s, %s) ON CONFLICT (name) DO UPDATE SET "
                "holder = excluded.holder, expires_ms = excluded.expires_ms, "
                "acquired_ms = CASE WHEN l.holder = excluded.holder THEN l.acquired_ms "
                "ELSE excluded.acquired_ms END "
                "WHERE l.holder = excluded.holder OR l.expires_ms <= %s RETURNING holder",
                (name, holder, now_ms, now_ms + ttl_ms, now_ms),
            )
            return row is not None

    def release_lease(self, name: str, holder: str) -> bool:
        with self._db.write() as cur:
            cur.execute("DELETE FROM leases WHERE name = %s AND holder = %s", (name, holder))
            return cur.rowcount == 1

    def get_lease(self, name: str) -> Lease | None:
        with self._db.read() as cur:
            row = pg.one(cur, "SELECT * FROM leases WHERE name = %s", (name,))
        if row is None:
            return None
        return Lease(row["name"], row["holder"], row["acquired_ms"], row["expires_ms"])
