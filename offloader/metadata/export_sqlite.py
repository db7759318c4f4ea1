"""SqliteExportMetadataStore: the ExportMetadataStore in the metadata SQLite file.

Its own connection to ``<home>/metadata.db`` (schema, WAL, busy timeout and error translation
of :mod:`offloader.metadata.sqlite_schema`; the table's SQL in
:mod:`offloader.metadata.export_schema`). Each change is one ``BEGIN IMMEDIATE`` transaction.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from offloader.errors import InvalidLedgerState, OffloadConflict
from offloader.metadata.export_base import ExportWatermark
from offloader.metadata.export_schema import INSERT, SELECT_ONE, UPDATE
from offloader.metadata.sqlite_schema import DEFAULT_BUSY_TIMEOUT_S, Database


def watermark_record(row: sqlite3.Row | Mapping[str, Any]) -> ExportWatermark:
    """A row of ``export_watermarks`` (SQLite's, or PostgreSQL's as a dict) as its record."""
    return ExportWatermark(
        target=row["target"],
        topic=row["topic"],
        generation=row["generation"],
        ledger_id=row["ledger_id"],
        entry_id=row["entry_id"],
        publish_time_ms=row["publish_time_ms"],
        settings=row["settings"],
        rows=row["rows"],
        files=row["files"],
        invalid_rows=row["invalid_rows"],
        updated_ms=row["updated_ms"],
    )


def watermark_values(w: ExportWatermark) -> tuple[object, ...]:
    """The non-key columns of ``w``, in the order of the INSERT and UPDATE statements."""
    return (
        w.ledger_id,
        w.entry_id,
        w.publish_time_ms,
        w.settings,
        w.rows,
        w.files,
        w.invalid_rows,
        w.updated_ms,
    )


def check_watermark(w: ExportWatermark) -> None:
    """Refuse a generation below 1 and negative positions or totals (InvalidLedgerState)."""
    if w.generation < 1:
        raise InvalidLedgerState(f"export generation {w.generation} is below 1")
    if w.position < (-1, -1) or min(w.rows, w.files, w.invalid_rows) < 0:
        raise InvalidLedgerState(f"export watermark {w.position} / totals are negative")


class SqliteExportMetadataStore:
    """The embedded :class:`~offloader.metadata.export_base.ExportMetadataStore`."""

    def __init__(
        self,
        path: str | Path,
        *,
        busy_timeout_s: float = DEFAULT_BUSY_TIMEOUT_S,
        read_only: bool = False,
    ) -> None:
        self.path = Path(path)
        self._db = Database(self.path, busy_timeout_s=busy_timeout_s, read_only=read_only)

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> SqliteExportMetadataStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def get_watermark(self, target: str, topic: str, generation: int) -> ExportWatermark | None:
        with self._db.read() as conn:
            row = conn.execute(SELECT_ONE, (target, topic, generation)).fetchone()
        return None if row is None else watermark_record(row)

    def list_watermarks(
        self, target: str | None = None, topic: str | None = None
    ) -> list[ExportWatermark]:
        sql = "SELECT * FROM export_watermarks WHERE 1 = 1"
        args: list[object] = []
        if target is not None:
            sql, args = sql + " AND target = ?", [*args, target]
        if topic is not None:
            sql, args = sql + " AND topic = ?", [*args, topic]
        with self._db.read() as conn:
            rows = conn.execute(sql + " ORDER BY target, topic, generation", args).fetchall()
        return [watermark_record(r) for r in rows]

    def advance(self, new: ExportWatermark, expected: tuple[int, int] | None) -> ExportWatermark:
        check_watermark(new)
        key = (new.target, new.topic, new.generation)
        with self._db.write() as conn:
            row = conn.execute(SELECT_ONE, key).fetchone()
            current = None if row is None else (row["ledger_id"], row["entry_id"])
            if current != expected:
                raise OffloadConflict(
                    f"export watermark of {new.topic} at {new.target} (generation "
                    f"{new.generation}) is {current}, not {expected}: another run moved it"
                )
            if current is not None and new.position < current:
                raise InvalidLedgerState(
                    f"export watermark of {new.topic} would move back from {current} to "
                    f"{new.position}; use reset"
                )
            if row is None:
                conn.execute(INSERT, (*key, *watermark_values(new)))
            else:
                conn.execute(UPDATE, (*watermark_values(new), *key))
        return new

    def reset(self, new: ExportWatermark) -> ExportWatermark:
        check_watermark(new)
        key = (new.target, new.topic, new.generation)
        with self._db.write() as conn:
            row = conn.execute(SELECT_ONE, key).fetchone()
            if row is None:
                conn.execute(INSERT, (*key, *watermark_values(new)))
                return new
            current = (row["ledger_id"], row["entry_id"])
            if new.position > current:
                raise InvalidLedgerState(
                    f"export reset of {new.topic} would move the watermark forward from "
                    f"{current} to {new.position}"
                )
            conn.execute(UPDATE, (*watermark_values(new), *key))
        return new
