"""The ExportMetadataStore's watermarks, written once for SQLite and PostgreSQL.

This module owns the statements and the algorithm of
:class:`~offloader.metadata.export_base.ExportMetadataStore` over a backend's transactions
(:class:`~offloader.metadata.statements.Transactions`): the SQLite store
(:mod:`offloader.metadata.sqlite.export`) and the PostgreSQL one
(:mod:`offloader.metadata.postgres.export`) only open their database. Every change is one write
transaction (SQLite ``BEGIN IMMEDIATE``; PostgreSQL READ COMMITTED) whose read-modify-write holds
the watermark row's lock where rows are locked (``SELECT ... FOR UPDATE``). A watermark that
does not exist yet has no row to lock: it is created with ``INSERT ... ON CONFLICT DO NOTHING``,
which (on PostgreSQL) waits for a concurrent insert of the same key and then reports it, so of
two brokers racing for the first commit exactly one wins and the other gets OffloadConflict, as
it does when both advance an existing row.
"""

from __future__ import annotations

from offloader.errors import InvalidLedgerState, OffloadConflict
from offloader.metadata.export_base import ExportWatermark
from offloader.metadata.rules import Row
from offloader.metadata.statements import Executor, SqlStore, Transactions

_KEY = "target = ? AND topic = ? AND generation = ?"
_SELECT_ONE = f"SELECT * FROM export_watermarks WHERE {_KEY}"
_INSERT = (
    "INSERT INTO export_watermarks (target, topic, generation, ledger_id, entry_id, "
    "publish_time_ms, settings, rows, files, invalid_rows, updated_ms) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
    "ON CONFLICT (target, topic, generation) DO NOTHING RETURNING generation"
)
_UPDATE = (
    "UPDATE export_watermarks SET ledger_id = ?, entry_id = ?, publish_time_ms = ?, "
    f"settings = ?, rows = ?, files = ?, invalid_rows = ?, updated_ms = ? WHERE {_KEY}"
)


def watermark_record(row: Row) -> ExportWatermark:
    """A row of ``export_watermarks`` as its record."""
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


def _key(w: ExportWatermark) -> tuple[str, str, int]:
    return (w.target, w.topic, w.generation)


def _locked(ex: Executor, w: ExportWatermark) -> Row | None:
    return ex.one(_SELECT_ONE + ex.dialect.lock("FOR UPDATE"), _key(w))


def _insert(ex: Executor, w: ExportWatermark) -> bool:
    """Create the row; False when it exists (another transaction created it first)."""
    return ex.one(_INSERT, (*_key(w), *watermark_values(w))) is not None


class SqlExportMetadataStore(SqlStore):
    """The :class:`~offloader.metadata.export_base.ExportMetadataStore` methods over ``_db``
    (see the module docstring)."""

    _db: Transactions

    def get_watermark(self, target: str, topic: str, generation: int) -> ExportWatermark | None:
        with self._db.reading() as ex:
            row = ex.one(_SELECT_ONE, (target, topic, generation))
        return None if row is None else watermark_record(row)

    def list_watermarks(
        self, target: str | None = None, topic: str | None = None
    ) -> list[ExportWatermark]:
        sql = "SELECT * FROM export_watermarks WHERE TRUE"
        args: list[object] = []
        if target is not None:
            sql, args = sql + " AND target = ?", [*args, target]
        if topic is not None:
            sql, args = sql + " AND topic = ?", [*args, topic]
        with self._db.reading() as ex:
            found = ex.all(sql + " ORDER BY target, topic, generation", args)
        return [watermark_record(row) for row in found]

    def advance(self, new: ExportWatermark, expected: tuple[int, int] | None) -> ExportWatermark:
        check_watermark(new)
        with self._db.writing() as ex:
            if expected is None and _insert(ex, new):
                return new
            row = _locked(ex, new)
            current = None if row is None else (row["ledger_id"], row["entry_id"])
            if current != expected:
                raise OffloadConflict(
                    f"export watermark of {new.topic} at {new.target} (generation "
                    f"{new.generation}) is {current}, not {expected}: another run moved it"
                )
            assert current is not None  # expected is not None here
            if new.position < current:
                raise InvalidLedgerState(
                    f"export watermark of {new.topic} would move back from {current} to "
                    f"{new.position}; use reset"
                )
            ex.run(_UPDATE, (*watermark_values(new), *_key(new)))
        return new

    def reset(self, new: ExportWatermark) -> ExportWatermark:
        check_watermark(new)
        with self._db.writing() as ex:
            if _insert(ex, new):
                return new
            row = _locked(ex, new)
            if row is None:  # pragma: no cover - rows are never deleted
                raise OffloadConflict(f"export watermark of {new.topic} vanished during reset")
            current = (row["ledger_id"], row["entry_id"])
            if new.position > current:
                raise InvalidLedgerState(
                    f"export reset of {new.topic} would move the watermark forward from "
                    f"{current} to {new.position}"
                )
            ex.run(_UPDATE, (*watermark_values(new), *_key(new)))
        return new
