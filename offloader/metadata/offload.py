"""The offload lifecycle, offload status and per-topic offload lock, for both backends.

This module owns the statements of the compare-and-set protocol, written once. Several brokers
and processes change the same rows, so every check-then-change runs in one write transaction
and, on PostgreSQL, holds the row's lock: the ledger's row (``SELECT ... FOR UPDATE``) in
``begin_offload``, ``complete_offload``, ``mark_local_deleted`` (then the attempt's row: always
ledger before attempt, so two of them never deadlock), the attempt's row in ``fail_offload``
and ``mark_attempt_cleaned`` (SQLite's ``BEGIN IMMEDIATE`` holds the whole database instead).
At READ COMMITTED a statement run after the lock is granted sees the newest committed row, so
exactly one of several racing processes wins a compare-and-set. The offload lock is one upsert
whose ``WHERE`` decides (free, ours, or stale) atomically. A lost compare-and-set commits the
attempt's new state (SUPERSEDED) and raises OffloadConflict afterwards. The checks and the
errors they raise are in :mod:`offloader.metadata.rules`. It is a mixin of
:class:`~offloader.metadata.store.SqlMetadataStore`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from offloader.errors import OffloadConflict
from offloader.metadata import rows, rules
from offloader.metadata import statements as sql
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
from offloader.metadata.statements import Transactions


class OffloadTables:
    """Offload attempts, contexts, status and locks (see the module docstring)."""

    _db: Transactions

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
        with self._db.writing() as ex:
            ledger = sql.get_ledger(ex, ledger_id, lock=True)
            previous = rules.previous_offload(ledger)
            inserted = ex.one(
                "INSERT INTO offload_attempts (uuid, ledger_id, topic, state, started_ms, "
                "driver_name, driver_properties, data_key, index_key) "
                "VALUES (?, ?, ?, 'STARTED', ?, ?, ?, ?, ?) "
                "ON CONFLICT (uuid) DO NOTHING RETURNING seq",
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
            if inserted is None:
                raise rules.already_exists(f"offload attempt {uuid}")
            if previous is not None:
                ex.run(
                    "UPDATE offload_attempts SET state = 'SUPERSEDED', finished_ms = ? "
                    "WHERE uuid = ? AND state = 'STARTED'",
                    (now_ms, previous.uuid),
                )
            ex.run(
                "UPDATE ledgers SET offload_uuid = ?, offload_complete = FALSE, "
                "offload_local_deleted = FALSE, offload_timestamp_ms = NULL WHERE ledger_id = ?",
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
        with self._db.writing() as ex:
            sql.lock_ledger(ex, ledger_id)  # ledger before attempt; absent: the CAS is lost
            attempt = sql.get_attempt(ex, uuid, lock=True)
            rules.check_attempt_of(attempt, ledger_id)
            ledger = sql.find_ledger(ex, ledger_id)
            decision = rules.decide_completion(ledger, attempt, uuid, ledger_id)
            if decision.done is not None:
                return decision.done
            if decision.now:
                ex.run(
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
                ex.run(
                    "UPDATE ledgers SET offload_complete = TRUE, offload_timestamp_ms = ? "
                    "WHERE ledger_id = ?",
                    (now_ms, ledger_id),
                )
                return rules.completed_context(sql.get_ledger(ex, ledger_id))
            ex.run(
                "UPDATE offload_attempts SET state = 'SUPERSEDED', finished_ms = ?, error = ? "
                "WHERE uuid = ? AND state = 'STARTED'",
                (now_ms, decision.lost, uuid),
            )
        raise OffloadConflict(decision.lost)

    def fail_offload(self, ledger_id: int, uuid: str, now_ms: int, error: str) -> None:
        with self._db.writing() as ex:
            if rules.fails_now(sql.get_attempt(ex, uuid, lock=True), ledger_id):
                ex.run(
                    "UPDATE offload_attempts SET state = 'FAILED', finished_ms = ?, error = ? "
                    "WHERE uuid = ?",
                    (now_ms, error, uuid),
                )
            else:
                ex.run(
                    "UPDATE offload_attempts SET error = coalesce(error, ?) WHERE uuid = ?",
                    (error, uuid),
                )

    def mark_local_deleted(self, ledger_id: int, uuid: str) -> LedgerRecord:
        with self._db.writing() as ex:
            rules.check_local_delete(sql.get_ledger(ex, ledger_id, lock=True), uuid)
            ex.run(
                "UPDATE ledgers SET offload_local_deleted = TRUE WHERE ledger_id = ?",
                (ledger_id,),
            )
            return sql.get_ledger(ex, ledger_id)

    def get_attempt(self, uuid: str) -> OffloadAttempt:
        with self._db.reading() as ex:
            return sql.get_attempt(ex, uuid)

    def list_attempts(
        self,
        *,
        ledger_id: int | None = None,
        topic: str | None = None,
        states: Sequence[AttemptState] | None = None,
    ) -> list[OffloadAttempt]:
        with self._db.reading() as ex:
            where, args = rules.attempt_filter(
                ex.dialect, ledger_id=ledger_id, topic=topic, states=states
            )
            found = ex.all(sql.ATTEMPT_SELECT + where + " ORDER BY seq", args)
        return [rows.attempt_record(row) for row in found]

    def mark_attempt_cleaned(self, uuid: str, now_ms: int) -> OffloadAttempt:
        with self._db.writing() as ex:
            sql.get_attempt(ex, uuid, lock=True)
            claimed = ex.one(
                "SELECT 1 FROM ledgers WHERE offload_uuid = ? AND state != 'DELETED'", (uuid,)
            )
            rules.check_unclaimed(uuid, claimed is not None)
            ex.run(
                "UPDATE offload_attempts SET state = 'CLEANED', "
                "finished_ms = coalesce(finished_ms, ?) WHERE uuid = ?",
                (now_ms, uuid),
            )
            return sql.get_attempt(ex, uuid)

    def record_index_rewrite(self, uuid: str, index_size: int, index_crc32c: int) -> None:
        with self._db.writing() as ex:
            changed = ex.run(
                "UPDATE offload_attempts SET index_size = ?, index_crc32c = ? "
                "WHERE uuid = ? AND state = 'COMPLETED'",
                (index_size, index_crc32c, uuid),
            )
        rules.check_rewritten(uuid, changed)

    def claimed_offloads(self) -> list[LedgerRecord]:
        with self._db.reading() as ex:
            found = ex.all(
                sql.LEDGER_SELECT + " WHERE l.offload_uuid IS NOT NULL AND l.state != 'DELETED'"
                " ORDER BY l.ledger_id",
            )
        return [rows.ledger_record(row) for row in found]

    def claimed_uuids(self) -> frozenset[str]:
        with self._db.reading() as ex:
            found = ex.all(
                "SELECT offload_uuid FROM ledgers "
                "WHERE offload_uuid IS NOT NULL AND state != 'DELETED'",
            )
        return frozenset(row["offload_uuid"] for row in found)

    # --- offload status and the per-topic lock --------------------------------------------
    def set_offload_status(
        self, topic: str, status: OffloadStatusValue, now_ms: int, error: str | None = None
    ) -> None:
        rules.check_offload_status(status)
        with self._db.writing() as ex:
            sql.require_topic(ex, topic, lock="FOR KEY SHARE")
            ex.run(
                "INSERT INTO topic_offload_status (topic, status, last_error, updated_ms) "
                "VALUES (?, ?, ?, ?) ON CONFLICT (topic) DO UPDATE SET "
                "status = excluded.status, last_error = excluded.last_error, "
                "updated_ms = excluded.updated_ms",
                (topic, status, error, now_ms),
            )

    def get_offload_status(self, topic: str) -> TopicOffloadStatus:
        with self._db.reading() as ex:
            sql.require_topic(ex, topic)
            row = ex.one("SELECT * FROM topic_offload_status WHERE topic = ?", (topic,))
        return rows.offload_status(topic, row)

    def try_acquire_offload_lock(
        self, topic: str, owner: str, now_ms: int, stale_after_ms: int
    ) -> bool:
        with self._db.writing() as ex:
            sql.require_topic(ex, topic, lock="FOR KEY SHARE")
            # free: inserted; ours: heartbeat refreshed; stale: taken over; else no row back
            row = ex.one(
                "INSERT INTO offload_locks AS held (topic, owner, acquired_ms, heartbeat_ms) "
                "VALUES (?, ?, ?, ?) ON CONFLICT (topic) DO UPDATE SET "
                "owner = excluded.owner, heartbeat_ms = excluded.heartbeat_ms, "
                "acquired_ms = CASE WHEN held.owner = excluded.owner THEN held.acquired_ms "
                "ELSE excluded.acquired_ms END "
                "WHERE held.owner = excluded.owner OR ? - held.heartbeat_ms > ? "
                "RETURNING owner",
                (topic, owner, now_ms, now_ms, now_ms, stale_after_ms),
            )
            return row is not None

    def refresh_offload_lock(self, topic: str, owner: str, now_ms: int) -> bool:
        with self._db.writing() as ex:
            changed = ex.run(
                "UPDATE offload_locks SET heartbeat_ms = ? WHERE topic = ? AND owner = ?",
                (now_ms, topic, owner),
            )
            return changed == 1

    def release_offload_lock(self, topic: str, owner: str) -> bool:
        with self._db.writing() as ex:
            changed = ex.run(
                "DELETE FROM offload_locks WHERE topic = ? AND owner = ?", (topic, owner)
            )
            return changed == 1

    def get_offload_lock(self, topic: str) -> OffloadLock | None:
        with self._db.reading() as ex:
            row = ex.one("SELECT * FROM offload_locks WHERE topic = ?", (topic,))
        return rows.offload_lock(row)
