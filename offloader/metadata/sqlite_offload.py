"""The offload lifecycle, offload status and per-topic offload lock of the SQLite store.

This module owns the SQL of the compare-and-set protocol: ``begin_offload`` records
the attempt and points the ledger at it in one ``BEGIN IMMEDIATE`` transaction;
``complete_offload`` and ``mark_local_deleted`` check the ledger's UUID inside the transaction
that changes it, so exactly one of several racing processes wins. When a compare-and-set loses,
the attempt's new state (SUPERSEDED) is committed first and OffloadConflict raised afterwards.
The checks and the errors they raise are in :mod:`offloader.metadata.rules`, shared with
PostgreSQL; this module runs them inside its transactions. It is a mixin of
:class:`~offloader.metadata.sqlite.SqliteMetadataStore`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from offloader.errors import (
    OffloadConflict,
)
from offloader.metadata import rules
from offloader.metadata import sqlite_rows as rows
from offloader.metadata.base import (
    AttemptState,
    DriverMetadata,
    LedgerRecord,
    OffloadAttempt,
    OffloadContext,
    OffloadLock,
    OffloadStatusValue,
    TopicOffloadStatus,
)
from offloader.metadata.sqlite_schema import Database


class OffloadTables:
    """Offload attempts, contexts, status and locks (see the module docstring)."""

    _db: Database

    # --- offload lifecycle ----------------------------------------------------------------
    def begin_offload(
        self,
        ledger_id: int,
        uuid: str,
        driver: DriverMetadata,
        now_ms: int,
        *,
        data_key: str,
        index_key: str,
    ) -> OffloadContext | None:
        with self._db.write() as conn:
            ledger = rows.get_ledger(conn, ledger_id)
            previous = rules.previous_offload(ledger)
            if rows.one(conn, "SELECT 1 FROM offload_attempts WHERE uuid = ?", (uuid,)):
                raise rules.already_exists(f"offload attempt {uuid}")
            conn.execute(
                "INSERT INTO offload_attempts (uuid, ledger_id, topic, state, started_ms, "
                "driver_name, driver_properties, data_key, index_key) "
                "VALUES (?, ?, ?, 'STARTED', ?, ?, ?, ?, ?)",
                (
                    uuid,
                    ledger_id,
                    ledger.topic,
                    now_ms,
                    driver.name,
                    rows.driver_json(driver),
                    data_key,
                    index_key,
                ),
            )
            if previous is not None:
                conn.execute(
                    "UPDATE offload_attempts SET state = 'SUPERSEDED', finished_ms = ? "
                    "WHERE uuid = ? AND state = 'STARTED'",
                    (now_ms, previous.uuid),
                )
            conn.execute(
                "UPDATE ledgers SET offload_uuid = ?, offload_complete = 0, "
                "offload_local_deleted = 0, offload_timestamp_ms = NULL WHERE ledger_id = ?",
                (uuid, ledger_id),
            )
            return previous

    def complete_offload(
        self,
        ledger_id: int,
        uuid: str,
        now_ms: int,
        *,
        data_size: int,
        index_size: int,
        block_crc32c: Sequence[int] = (),
        index_crc32c: int | None = None,
    ) -> OffloadContext:
        with self._db.write() as conn:
            attempt = rows.get_attempt(conn, uuid)
            rules.check_attempt_of(attempt, ledger_id)
            found = rows.one(conn, rows.LEDGER_SELECT + " WHERE l.ledger_id = ?", (ledger_id,))
            ledger = rows.ledger_record(found) if found is not None else None
            decision = rules.decide_completion(ledger, attempt, uuid, ledger_id)
            if decision.done is not None:
                return decision.done
            if decision.now:
                conn.execute(
                    "UPDATE offload_attempts SET state = 'COMPLETED', finished_ms = ?, "
                    "data_size = ?, index_size = ?, block_crc32c = ?, index_crc32c = ? "
                    "WHERE uuid = ?",
                    (
                        now_ms,
                        data_size,
                        index_size,
                        json.dumps([int(c) for c in block_crc32c]),
                        index_crc32c,
                        uuid,
                    ),
                )
                conn.execute(
                    "UPDATE ledgers SET offload_complete = 1, offload_timestamp_ms = ? "
                    "WHERE ledger_id = ?",
                    (now_ms, ledger_id),
                )
                return rules.completed_context(rows.get_ledger(conn, ledger_id))
            conn.execute(
                "UPDATE offload_attempts SET state = 'SUPERSEDED', finished_ms = ?, error = ? "
                "WHERE uuid = ? AND state = 'STARTED'",
                (now_ms, decision.lost, uuid),
            )
        raise OffloadConflict(decision.lost)

    def fail_offload(self, ledger_id: int, uuid: str, now_ms: int, error: str) -> None:
        with self._db.write() as conn:
            if rules.fails_now(rows.get_attempt(conn, uuid), ledger_id):
                conn.execute(
                    "UPDATE offload_attempts SET state = 'FAILED', finished_ms = ?, error = ? "
                    "WHERE uuid = ?",
                    (now_ms, error, uuid),
                )
            else:
                conn.execute(
                    "UPDATE offload_attempts SET error = coalesce(error, ?) WHERE uuid = ?",
                    (error, uuid),
                )

    def mark_local_deleted(self, ledger_id: int, uuid: str) -> LedgerRecord:
        with self._db.write() as conn:
            rules.check_local_delete(rows.get_ledger(conn, ledger_id), uuid)
            conn.execute(
                "UPDATE ledgers SET offload_local_deleted = 1 WHERE ledger_id = ?", (ledger_id,)
            )
            return rows.get_ledger(conn, ledger_id)

    def get_attempt(self, uuid: str) -> OffloadAttempt:
        with self._db.read() as conn:
            return rows.get_attempt(conn, uuid)

    def list_attempts(
        self,
        *,
        ledger_id: int | None = None,
        topic: str | None = None,
        states: Sequence[AttemptState] | None = None,
    ) -> list[OffloadAttempt]:
        where, args = rules.attempt_filter(
            rules.SQLITE, ledger_id=ledger_id, topic=topic, states=states
        )
        with self._db.read() as conn:
            found = conn.execute(rows.ATTEMPT_SELECT + where + " ORDER BY seq", args).fetchall()
        return [rows.attempt_record(row) for row in found]

    def mark_attempt_cleaned(self, uuid: str, now_ms: int) -> OffloadAttempt:
        with self._db.write() as conn:
            rows.get_attempt(conn, uuid)
            claimed = rows.one(
                conn, "SELECT 1 FROM ledgers WHERE offload_uuid = ? AND state != 'DELETED'", (uuid,)
            )
            rules.check_unclaimed(uuid, claimed is not None)
            conn.execute(
                "UPDATE offload_attempts SET state = 'CLEANED', "
                "finished_ms = coalesce(finished_ms, ?) WHERE uuid = ?",
                (now_ms, uuid),
            )
            return rows.get_attempt(conn, uuid)

    def record_index_rewrite(self, uuid: str, index_size: int, index_crc32c: int) -> None:
        with self._db.write() as conn:
            changed = conn.execute(
                "UPDATE offload_attempts SET index_size = ?, index_crc32c = ? "
                "WHERE uuid = ? AND state = 'COMPLETED'",
                (index_size, index_crc32c, uuid),
            ).rowcount
        rules.check_rewritten(uuid, changed)

    def claimed_offloads(self) -> list[LedgerRecord]:
        with self._db.read() as conn:
            found = conn.execute(
                rows.LEDGER_SELECT + " WHERE l.offload_uuid IS NOT NULL AND l.state != 'DELETED'"
                " ORDER BY l.ledger_id"
            ).fetchall()
        return [rows.ledger_record(row) for row in found]

    def claimed_uuids(self) -> frozenset[str]:
        with self._db.read() as conn:
            found = conn.execute(
                "SELECT offload_uuid FROM ledgers "
                "WHERE offload_uuid IS NOT NULL AND state != 'DELETED'"
            ).fetchall()
        return frozenset(row[0] for row in found)

    # --- offload status and the per-topic lock --------------------------------------------
    def set_offload_status(
        self, topic: str, status: OffloadStatusValue, now_ms: int, error: str | None = None
    ) -> None:
        rules.check_offload_status(status)
        with self._db.write() as conn:
            rows.require_topic(conn, topic)
            conn.execute(
                "INSERT INTO topic_offload_status (topic, status, last_error, updated_ms) "
                "VALUES (?, ?, ?, ?) ON CONFLICT (topic) DO UPDATE SET status = excluded.status, "
                "last_error = excluded.last_error, updated_ms = excluded.updated_ms",
                (topic, status, error, now_ms),
            )

    def get_offload_status(self, topic: str) -> TopicOffloadStatus:
        with self._db.read() as conn:
            rows.require_topic(conn, topic)
            row = rows.one(conn, "SELECT * FROM topic_offload_status WHERE topic = ?", (topic,))
        return rows.offload_status(topic, row)

    def try_acquire_offload_lock(
        self, topic: str, owner: str, now_ms: int, stale_after_ms: int
    ) -> bool:
        with self._db.write() as conn:
            rows.require_topic(conn, topic)
            held = rows.one(conn, "SELECT * FROM offload_locks WHERE topic = ?", (topic,))
            if held is None:
                conn.execute(
                    "INSERT INTO offload_locks (topic, owner, acquired_ms, heartbeat_ms) "
                    "VALUES (?, ?, ?, ?)",
                    (topic, owner, now_ms, now_ms),
                )
                return True
            if held["owner"] == owner:
                conn.execute(
                    "UPDATE offload_locks SET heartbeat_ms = ? WHERE topic = ?", (now_ms, topic)
                )
                return True
            if now_ms - held["heartbeat_ms"] > stale_after_ms:
                conn.execute(
                    "UPDATE offload_locks SET owner = ?, acquired_ms = ?, heartbeat_ms = ? "
                    "WHERE topic = ?",
                    (owner, now_ms, now_ms, topic),
                )
                return True
            return False

    def refresh_offload_lock(self, topic: str, owner: str, now_ms: int) -> bool:
        with self._db.write() as conn:
            cursor = conn.execute(
                "UPDATE offload_locks SET heartbeat_ms = ? WHERE topic = ? AND owner = ?",
                (now_ms, topic, owner),
            )
            return cursor.rowcount == 1

    def release_offload_lock(self, topic: str, owner: str) -> bool:
        with self._db.write() as conn:
            cursor = conn.execute(
                "DELETE FROM offload_locks WHERE topic = ? AND owner = ?", (topic, owner)
            )
            return cursor.rowcount == 1

    def get_offload_lock(self, topic: str) -> OffloadLock | None:
        with self._db.read() as conn:
            row = rows.one(conn, "SELECT * FROM offload_locks WHERE topic = ?", (topic,))
        return rows.offload_lock(row)
