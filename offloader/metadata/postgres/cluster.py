"""Brokers, topic ownership and leases on PostgreSQL (the ClusterMetadata of the shared store).

This module owns the SQL of :mod:`offloader.metadata.cluster_base` on the tables of schema
version 2 (:mod:`offloader.metadata.postgres.schema`). Each decision is one statement that the
server makes atomic: claiming a topic is an ``INSERT ... ON CONFLICT DO UPDATE`` that keeps
the present owner and returns it (so two brokers claiming at once agree on one owner); a lease
is an upsert whose ``WHERE`` accepts only a free, own or expired lease; releasing is a
``DELETE`` that names the holder. All run at READ COMMITTED. It is a mixin of
:class:`~offloader.metadata.postgres.store.PgMetadataStore`.
"""

from __future__ import annotations

from offloader.errors import NotFound
from offloader.metadata import statements as sql
from offloader.metadata.cluster_base import BrokerRecord, Lease, TopicOwner
from offloader.metadata.rules import Row
from offloader.metadata.statements import Transactions


def _broker(row: Row) -> BrokerRecord:
    return BrokerRecord(
        row["broker_id"], row["host"], row["home"], row["started_ms"], row["heartbeat_ms"]
    )


def _owner(row: Row) -> TopicOwner:
    return TopicOwner(row["topic"], row["broker_id"], row["since_ms"])


class ClusterTables:
    """The ClusterMetadata methods of the PostgreSQL store (see the module docstring)."""

    _db: Transactions
    shared = True

    def register_broker(self, broker_id: str, host: str, home: str, now_ms: int) -> BrokerRecord:
        with self._db.writing() as ex:
            row = ex.one(
                "INSERT INTO brokers (broker_id, host, home, started_ms, heartbeat_ms) "
                "VALUES (?, ?, ?, ?, ?) ON CONFLICT (broker_id) DO UPDATE SET "
                "host = excluded.host, home = excluded.home, heartbeat_ms = excluded.heartbeat_ms "
                "RETURNING *",
                (broker_id, host, home, now_ms, now_ms),
            )
            assert row is not None  # an upsert always returns its row
            return _broker(row)

    def broker_heartbeat(self, broker_id: str, now_ms: int) -> None:
        with self._db.writing() as ex:
            changed = ex.run(
                "UPDATE brokers SET heartbeat_ms = greatest(heartbeat_ms, ?) WHERE broker_id = ?",
                (now_ms, broker_id),
            )
            if changed != 1:
                raise NotFound(f"broker {broker_id} is not registered")

    def list_brokers(self) -> list[BrokerRecord]:
        with self._db.reading() as ex:
            return [_broker(r) for r in ex.all("SELECT * FROM brokers ORDER BY broker_id")]

    def claim_topic(self, topic: str, broker_id: str, now_ms: int) -> TopicOwner:
        with self._db.writing() as ex:
            sql.require_topic(ex, topic, lock="FOR KEY SHARE")
            row = ex.one(
                "INSERT INTO topic_owners AS o (topic, broker_id, since_ms) VALUES (?, ?, ?) "
                "ON CONFLICT (topic) DO UPDATE SET broker_id = o.broker_id RETURNING *",
                (topic, broker_id, now_ms),
            )
            assert row is not None  # an upsert always returns its row
            return _owner(row)

    def get_topic_owner(self, topic: str) -> TopicOwner | None:
        with self._db.reading() as ex:
            row = ex.one("SELECT * FROM topic_owners WHERE topic = ?", (topic,))
        return None if row is None else _owner(row)

    def list_topic_owners(self) -> dict[str, TopicOwner]:
        with self._db.reading() as ex:
            found = ex.all("SELECT * FROM topic_owners ORDER BY topic")
        return {row["topic"]: _owner(row) for row in found}

    def release_topic(self, topic: str, broker_id: str) -> bool:
        with self._db.writing() as ex:
            changed = ex.run(
                "DELETE FROM topic_owners WHERE topic = ? AND broker_id = ?", (topic, broker_id)
            )
            return changed == 1

    def try_acquire_lease(self, name: str, holder: str, now_ms: int, ttl_ms: int) -> bool:
        with self._db.writing() as ex:
            row = ex.one(
                "INSERT INTO leases AS l (name, holder, acquired_ms, expires_ms) "
                "VALUES (?, ?, ?, ?) ON CONFLICT (name) DO UPDATE SET "
                "holder = excluded.holder, expires_ms = excluded.expires_ms, "
                "acquired_ms = CASE WHEN l.holder = excluded.holder THEN l.acquired_ms "
                "ELSE excluded.acquired_ms END "
                "WHERE l.holder = excluded.holder OR l.expires_ms <= ? RETURNING holder",
                (name, holder, now_ms, now_ms + ttl_ms, now_ms),
            )
            return row is not None

    def release_lease(self, name: str, holder: str) -> bool:
        with self._db.writing() as ex:
            changed = ex.run("DELETE FROM leases WHERE name = ? AND holder = ?", (name, holder))
            return changed == 1

    def get_lease(self, name: str) -> Lease | None:
        with self._db.reading() as ex:
            row = ex.one("SELECT * FROM leases WHERE name = ?", (name,))
        if row is None:
            return None
        return Lease(row["name"], row["holder"], row["acquired_ms"], row["expires_ms"])
