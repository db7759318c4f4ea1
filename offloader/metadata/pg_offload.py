"""The offload lifecycle, offload status and per-topic offload lock of the PostgreSQL store.

This module owns the PostgreSQL SQL of the compare-and-set protocol. Several brokers and
processes change the same rows, so every check-then-change holds the row's lock: the ledger's
row (``SELECT ... FOR UPDATE``) in ``begin_offload``, ``complete_offload``,
``mark_local_deleted`` (then the attempt's row: always ledger before attempt, so two of them
never deadlock), the attempt's row in ``fail_offload`` and ``mark_attempt_cleaned``. At READ
COMMITTED a statement run after the lock is granted sees the newest committed row, so exactly one
of several racing processes wins a compare-and-set. The offload lock is one upsert whose
``WHERE`` decides (free, ours, or stale) atomically. As in SQLite, a lost compare-and-set
commits the attempt's new state (SUPERSEDED) and raises OffloadConflict afterwards. The checks
and the errors they raise are in :mod:`offloader.metadata.rules`, shared with SQLite; this
module runs them under its row locks. It is a mixin of
:class:`~offloader.metadata.pg_store.PgMetadataStore`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from offloader.errors import (
    OffloadConflict,
)
from offloader.metadata import pg_rows as pg
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
from offloader.metadata.pg_db import PgDatabase


class PgOffloadTables:
    """Offload attempts, contexts, status and locks (see the module docstring)."""

    _db: PgDatabase

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
        with self._db.write() as cur:
            ledger = pg.get_ledger(cur, ledger_id, lock=True)
            previous = rules.previous_offload(ledger)
            inserted = pg.one(
                cur,
                "INSERT INTO offload_attempts (uuid, ledger_id, topic, state, started_ms, "
                "driver_name, driver_properties, data_key, index_key) "
                "VALUES (%s, %s, %s, 'STARTED', %s, %s, %s, %s, %s) "
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
                cur.execute(
                    "UPDATE offload_attempts SET state = 'SUPERSEDED', finished_ms = %s "
                    "WHERE uuid = %s AND state = 'STARTED'",
                    (now_ms, previous.uuid),
                )
            cur.execute(
                "UPDATE ledgers SET offload_uuid = %s, offload_complete = FALSE, "
                "offload_local_deleted = FALSE, offload_timestamp_ms = NULL WHERE ledger_id = %s",
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
        with self._db.write() as cur:
            pg.lock_ledger(cur, ledger_id)  # ledger before attempt; absent: the CAS is lost
            attempt = pg.get_attempt(cur, uuid, lock=True)
            rules.check_attempt_of(attempt, ledger_id)
            ledger = pg.find_ledger(cur, ledger_id)
            decision = rules.decide_completion(ledger, attempt, uuid, ledger_id)
            if decision.done is not None:
                return decision.done
            if decision.now:
                cur.execute(
                    "UPDATE offload_attempts SET state = 'COMPLETED', finished_ms = %s, "
                    "data_size = %s, index_size = %s, block_crc32c = %s, index_crc32c = %s "
                    "WHERE uuid = %s",
                    (
                        now_ms,
                        data_size,
                        index_size,
                        json.dumps([int(c) for c in block_crc32c]),
                        index_crc32c,
                        uuid,
                    ),
                )
                cur.execute(
                    "UPDATE ledgers SET offload_complete = TRUE, offload_timestamp_ms = %s "
                    "WHERE ledger_id = %s",
                    (now_ms, ledger_id),
                )
                return rules.completed_context(pg.get_ledger(cur, ledger_id))
            cur.execute(
                "UPDATE offload_attempts SET state = 'SUPERSEDED', finished_ms = %s, error = %s "
                "WHERE uuid = %s AND state = 'STARTED'",
                (now_ms, decision.lost, uuid),
            )
        raise OffloadConflict(decision.lost)

    def fail_offload(self, ledger_id: int, uuid: str, now_ms: int, error: str) -> None:
        with self._db.write() as cur:
            if rules.fails_now(pg.get_attempt(cur, uuid, lock=True), ledger_id):
                cur.execute(
                    "UPDATE offload_attempts SET state = 'FAILED', finished_ms = %s, error = %s "
                    "WHERE uuid = %s",
                    (now_ms, error, uuid),
                )
            else:
                cur.execute(
                    "UPDATE offload_attempts SET error = coalesce(error, %s) WHERE uuid = %s",
                    (error, uuid),
                )

    def mark_local_deleted(self, ledger_id: int, uuid: str) -> LedgerRecord:
        with self._db.write() as cur:
            rules.check_local_delete(pg.get_ledger(cur, ledger_id, lock=True), uuid)
            cur.execute(
                "UPDATE ledgers SET offload_local_deleted = TRUE WHERE ledger_id = %s",
                (ledger_id,),
            )
            return pg.get_ledger(cur, ledger_id)

    def get_attempt(self, uuid: str) -> OffloadAttempt:
        with self._db.read() as cur:
            return pg.get_attempt(cur, uuid)

    def list_attempts(
        self,
        *,
        ledger_id: int | None = None,
        topic: str | None = None,
        states: Sequence[AttemptState] | None = None,
    ) -> list[OffloadAttempt]:
        where, args = rules.attempt_filter(
            rules.POSTGRES, ledger_id=ledger_id, topic=topic, states=states
        )
        with self._db.read() as cur:
            found = pg.all_rows(cur, pg.ATTEMPT_SELECT + where + " ORDER BY seq", args)
        return [rows.attempt_record(row) for row in found]

    def mark_attempt_cleaned(self, uuid: str, now_ms: int) -> OffloadAttempt:
        with self._db.write() as cur:
            pg.get_attempt(cur, uuid, lock=True)
            claimed = pg.one(
                cur, "SELECT 1 FROM ledgers WHERE offload_uuid = %s AND state != 'DELETED'", (uuid,)
            )
            rules.check_unclaimed(uuid, claimed is not None)
            cur.execute(
                "UPDATE offload_attempts SET state = 'CLEANED', "
                "finished_ms = coalesce(finished_ms, %s) WHERE uuid = %s",
                (now_ms, uuid),
            )
            return pg.get_attempt(cur, uuid)

    def record_index_rewrite(self, uuid: str, index_size: int, index_crc32c: int) -> None:
        with self._db.write() as cur:
            cur.execute(
                "UPDATE offload_attempts SET index_size = %s, index_crc32c = %s "
                "WHERE uuid = %s AND state = 'COMPLETED'",
                (index_size, index_crc32c, uuid),
            )
            changed = cur.rowcount
        rules.check_rewritten(uuid, changed)

    def claimed_offloads(self) -> list[LedgerRecord]:
        with self._db.read() as cur:
            found = pg.all_rows(
                cur,
                pg.LEDGER_SELECT + " WHERE l.offload_uuid IS NOT NULL AND l.state != 'DELETED'"
                " ORDER BY l.ledger_id",
            )
        return [rows.ledger_record(row) for row in found]

    def claimed_uuids(self) -> frozenset[str]:
        with self._db.read() as cur:
            found = pg.all_rows(
                cur,
                "SELECT offload_uuid FROM ledgers "
                "WHERE offload_uuid IS NOT NULL AND state != 'DELETED'",
            )
        return frozenset(row["offload_uuid"] for row in found)

    # --- offload status and the per-topic lock --------------------------------------------
    def set_offload_status(
        self, topic: str, status: OffloadStatusValue, now_ms: int, error: str | None = None
    ) -> None:
        rules.check_offload_status(status)
        with self._db.write() as cur:
            pg.require_topic(cur, topic, lock="FOR KEY SHARE")
            cur.execute(
                "INSERT INTO topic_offload_status (topic, status, last_error, updated_ms) "
                "VALUES (%s, %s, %s, %s) ON CONFLICT (topic) DO UPDATE SET "
                "status = excluded.status, last_error = excluded.last_error, "
                "updated_ms = excluded.updated_ms",
                (topic, status, error, now_ms),
            )

    def get_offload_status(self, topic: str) -> TopicOffloadStatus:
        with self._db.read() as cur:
            pg.require_topic(cur, topic)
            row = pg.one(cur, "SELECT * FROM topic_offload_status WHERE topic = %s", (topic,))
        return rows.offload_status(topic, row)

    def try_acquire_offload_lock(
        self, topic: str, owner: str, now_ms: int, stale_after_ms: int
    ) -> bool:
        with self._db.write() as cur:
            pg.require_topic(cur, topic, lock="FOR KEY SHARE")
            # free: inserted; ours: heartbeat refreshed; stale: taken over; else no row back
            row = pg.one(
                cur,
                "INSERT INTO offload_locks AS held (topic, owner, acquired_ms, heartbeat_ms) "
                "VALUES (%s, %s, %s, %s) ON CONFLICT (topic) DO UPDATE SET "
                "owner = excluded.owner, heartbeat_ms = excluded.heartbeat_ms, "
                "acquired_ms = CASE WHEN held.owner = excluded.owner THEN held.acquired_ms "
                "ELSE excluded.acquired_ms END "
                "WHERE held.owner = excluded.owner OR %s - held.heartbeat_ms > %s "
                "RETURNING owner",
                (topic, owner, now_ms, now_ms, now_ms, stale_after_ms),
            )
            return row is not None

    def refresh_offload_lock(self, topic: str, owner: str, now_ms: int) -> bool:
        with self._db.write() as cur:
            cur.execute(
                "UPDATE offload_locks SET heartbeat_ms = %s WHERE topic = %s AND owner = %s",
                (now_ms, topic, owner),
            )
            return cur.rowcount == 1

    def release_offload_lock(self, topic: str, owner: str) -> bool:
        with self._db.write() as cur:
            cur.execute("DELETE FROM offload_locks WHERE topic = %s AND owner = %s", (topic, owner))
            return cur.rowcount == 1

    def get_offload_lock(self, topic: str) -> OffloadLock | None:
        with self._db.read() as cur:
            row = pg.one(cur, "SELECT * FROM offload_locks WHERE topic = %s", (topic,))
        return rows.offload_lock(row)
