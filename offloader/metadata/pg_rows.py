"""The lookups every PostgreSQL metadata transaction uses (rows to records are shared with
SQLite in :mod:`offloader.metadata.sqlite_rows`).

Each takes a cursor inside an open transaction and raises NotFound
(:func:`offloader.metadata.rules.need`, as SQLite's lookups do); ``lock=True`` takes the
row's lock (``FOR UPDATE``) so the caller's read-modify-write is atomic at READ COMMITTED.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from offloader.metadata import sqlite_rows as rows
from offloader.metadata.base import LedgerRecord, OffloadAttempt
from offloader.metadata.pg_db import Cursor
from offloader.metadata.rules import need, need_namespace

LEDGER_SELECT = rows.LEDGER_SELECT
ATTEMPT_SELECT = rows.ATTEMPT_SELECT


def one(cur: Cursor, sql: str, args: Sequence[object] = ()) -> dict[str, Any] | None:
    cur.execute(sql.encode(), tuple(args))
    return cur.fetchone()


def all_rows(cur: Cursor, sql: str, args: Sequence[object] = ()) -> list[dict[str, Any]]:
    cur.execute(sql.encode(), tuple(args))
    return cur.fetchall()


def lock_ledger(cur: Cursor, ledger_id: int) -> bool:
    """Lock the ledger's row (FOR UPDATE); False if it does not exist."""
    return (
        one(cur, "SELECT 1 FROM ledgers WHERE ledger_id = %s FOR UPDATE", (ledger_id,)) is not None
    )


def find_ledger(cur: Cursor, ledger_id: int) -> LedgerRecord | None:
    row = one(cur, LEDGER_SELECT + " WHERE l.ledger_id = %s", (ledger_id,))
    return None if row is None else rows.ledger_record(row)


def get_ledger(cur: Cursor, ledger_id: int, *, lock: bool = False) -> LedgerRecord:
    locked = lock_ledger(cur, ledger_id) if lock else True
    return need(find_ledger(cur, ledger_id) if locked else None, f"ledger {ledger_id}")


def get_attempt(cur: Cursor, uuid: str, *, lock: bool = False) -> OffloadAttempt:
    suffix = " FOR UPDATE" if lock else ""
    row = one(cur, ATTEMPT_SELECT + " WHERE uuid = %s" + suffix, (uuid,))
    return rows.attempt_record(need(row, f"offload attempt {uuid}"))


def require_topic(cur: Cursor, topic: str, *, lock: str = "") -> dict[str, Any]:
    """The topic's row; ``lock`` is "" or a locking clause (``FOR SHARE``, ``FOR UPDATE``)."""
    row = one(cur, f"SELECT * FROM topics WHERE name = %s {lock}", (topic,))
    return need(row, f"topic {topic}")


def require_namespace(cur: Cursor, name: str, *, lock: str = "") -> dict[str, Any]:
    row = one(cur, f"SELECT * FROM namespaces WHERE name = %s {lock}", (name,))
    return need_namespace(row, name)
