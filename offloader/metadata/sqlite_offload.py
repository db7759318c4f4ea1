"""The offload lifecycle, offload status and per-topic offload lock of the SQLite store.

This module owns the SQL of the compare-and-set protocol: ``begin_offload`` records
the attempt and points the ledger at it in one ``BEGIN IMMEDIATE`` transaction;
``complete_offload`` and ``mark_local_deleted`` check the ledger's UUID inside the transaction
that changes it, so exactly one of several racing processes wins. When a compare-and-set loses,
the attempt's new state (SUPERSEDED) is committed first and OffloadConflict raised afterwards.
It is a mixin of :class:`~offloader.metadata.sqlite.SqliteMetadataStore`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from offloader.errors import (
    AlreadyExists,
    InvalidLedgerState,
    MetadataError,
    NotFound,
    OffloadAlreadyComplete,
    OffloadConflict,
)
from offloader.metadata import sqlite_rows as rows
from offloader.metadata.base import (
    ATTEMPT_STATES,
    OFFLOAD_STATUSES,
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
            if ledger.state == "DELETED":
                raise NotFound(f"ledger {ledger_id} was deleted")
            if ledger.state != "CLOSED":
                raise InvalidLedgerState(
                    f"ledger {ledger_id} is {ledger.state}; only a closed ledger can be offloaded"
                )
            previous = ledger.offload
            if previous is not None and previous.complete:
                raise OffloadAlreadyComplete(
                    f"ledger {ledger_id} is already offloaded (uuid {previous.uuid})"
                )
            if rows.one(conn, "SELECT 1 FROM offload_attempts WHERE uuid = ?", (uuid,)):
                raise AlreadyExists(f"offload attempt {uuid} already exists")
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
            if attempt.ledger_id != ledger_id:
                raise OffloadConflict(
                    f"offload attempt {uuid} belongs to ledger {attempt.ledger_id}, not {ledger_id}"
                )
            found = rows.one(conn, rows.LEDGER_SELECT + " WHERE l.ledger_id = ?", (ledger_id,))
            ledger = rows.ledger_record(found) if found is not None else None
            reason = lost_reason(ledger, uuid, ledger_id)
            if reason is None and ledger is not None and ledger.offload is not None:
                if ledger.offload.complete:
                    return ledger.offload  # a repeated complete: already done
                if attempt.state != "STARTED":
                    raise OffloadConflict(f"offload attempt {uuid} is {attempt.state}")
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
                completed = rows.get_ledger(conn, ledger_id).offload
                if completed is None:  # pragma: no cover - set two statements above
                    raise MetadataError(f"ledger {ledger_id} lost its offload context")
                return completed
            conn.execute(
                "UPDATE offload_attempts SET state = 'SUPERSEDED', finished_ms = ?, error = ? "
                "WHERE uuid = ? AND state = 'STARTED'",
                (now_ms, reason, uuid),
            )
        raise OffloadConflict(reason)

    def fail_offload(self, ledger_id: int, uuid: str, now_ms: int, error: str) -> None:
        with self._db.write() as conn:
            attempt = rows.get_attempt(conn, uuid)
            if attempt.ledger_id != ledger_id:
                raise OffloadConflict(
                    f"offload attempt {uuid} belongs to ledger {attempt.ledger_id}, not {ledger_id}"
                )
            if attempt.state == "COMPLETED":
                raise OffloadConflict(
                    f"offload attempt {uuid} already completed; its objects must stay"
                )
            if attempt.state == "STARTED":
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
            ledger = rows.get_ledger(conn, ledger_id)
            reason = lost_reason(ledger, uuid, ledger_id)
            if reason is not None:
                raise OffloadConflict(reason)
            if not ledger.offload_complete:
                raise InvalidLedgerState(
                    f"offload {uuid} of ledger {ledger_id} is not complete; the local copy stays"
                )
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
        clauses: list[str] = []
        args: list[object] = []
        if ledger_id is not None:
            clauses.append("ledger_id = ?")
            args.append(ledger_id)
        if topic is not None:
            clauses.append("topic = ?")
            args.append(topic)
        if states is not None:
            unknown = set(states) - set(ATTEMPT_STATES)
            if unknown:
                raise MetadataError(f"unknown attempt state(s): {sorted(unknown)}")
            clauses.append(f"state IN ({', '.join('?' * len(states))})")
            args.extend(states)
        where = f" WHERE {' AND '.join(clauses)}" if clauses else ""
        with self._db.read() as conn:
            found = conn.execute(rows.ATTEMPT_SELECT + where + " ORDER BY seq", args).fetchall()
        return [rows.attempt_record(row) for row in found]

    def mark_attempt_cleaned(self, uuid: str, now_ms: int) -> OffloadAttempt:
        with self._db.write() as conn:
            rows.get_attempt(conn, uuid)
            if rows.one(
                conn,
                "SELECT 1 FROM ledgers WHERE offload_uuid = ? AND state != 'DELETED'",
                (uuid,),
            ):
                raise OffloadConflict(
                    f"offload {uuid} is still claimed by its ledger; its objects must stay"
                )
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
        if changed != 1:
            raise NotFound(f"no completed offload attempt {uuid}")

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
        if status not in OFFLOAD_STATUSES:
            raise MetadataError(f"unknown offload status {status!r}")
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
        if row is None:
            return TopicOffloadStatus(topic, "NOT_RUN")
        return TopicOffloadStatus(topic, row["status"], row["last_error"], row["updated_ms"])

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
        if row is None:
            return None
        return OffloadLock(row["topic"], row["owner"], row["acquired_ms"], row["heartbeat_ms"])


def lost_reason(ledger: LedgerRecord | None, uuid: str, ledger_id: int) -> str | None:
    """Why ``uuid`` no longer owns the ledger's offload, or None when it still does."""
    if ledger is None:
        return f"ledger {ledger_id} no longer exists; offload {uuid} is not claimed"
    if ledger.state == "DELETED":
        return f"ledger {ledger_id} was deleted; offload {uuid} is not claimed"
    if ledger.offload is None or ledger.offload.uuid != uuid:
        current = ledger.offload.uuid if ledger.offload is not None else None
        return f"Existing UUID {current} of ledger {ledger_id} does not match {uuid}"
    return None
