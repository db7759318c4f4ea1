"""PgExportMetadataStore: the ExportMetadataStore on the shared PostgreSQL database.

The ``export_watermarks`` table of :mod:`offloader.metadata.pg_schema` (version 3), over its own
connection (:class:`~offloader.metadata.pg_db.PgDatabase`); rows become records through the
SQLite backend's mapping and values are checked by the same rules
(:mod:`offloader.metadata.export_sqlite`). Reads run at REPEATABLE READ, READ ONLY; every change
is one READ COMMITTED transaction whose read-modify-write holds the watermark row's lock
(``SELECT ... FOR UPDATE``). A watermark that does not exist yet has no row to lock: it is
created with ``INSERT ... ON CONFLICT DO NOTHING``, which waits for a concurrent insert of the
same key and then reports it, so of two brokers racing for the first commit exactly one wins
and the other gets OffloadConflict, as it does when both advance an existing row.

Runs from several homes on one store are serialized per ``(target, topic, generation)`` by
:meth:`PgExportMetadataStore.export_lock`, a session-level advisory lock on a connection of its
own (:meth:`~offloader.metadata.pg_db.PgDatabase.session_lock`), which the export flow holds
beside the home's file lock.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from offloader.errors import ExportBusy, InvalidLedgerState, OffloadConflict
from offloader.metadata import pg_rows as pg
from offloader.metadata.export_base import ExportWatermark
from offloader.metadata.export_sqlite import check_watermark, watermark_record, watermark_values
from offloader.metadata.pg_db import DEFAULT_BUSY_TIMEOUT_S, Cursor, PgDatabase

_KEY = "target = %s AND topic = %s AND generation = %s"
_SELECT_ONE = f"SELECT * FROM export_watermarks WHERE {_KEY}"
_INSERT = (
    "INSERT INTO export_watermarks (target, topic, generation, ledger_id, entry_id, "
    "publish_time_ms, settings, rows, files, invalid_rows, updated_ms) "
    "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) "
    "ON CONFLICT (target, topic, generation) DO NOTHING RETURNING generation"
)
_UPDATE = (
    "UPDATE export_watermarks SET ledger_id = %s, entry_id = %s, publish_time_ms = %s, "
    f"settings = %s, rows = %s, files = %s, invalid_rows = %s, updated_ms = %s WHERE {_KEY}"
)


def _key(w: ExportWatermark) -> tuple[str, str, int]:
    return (w.target, w.topic, w.generation)


def _locked(cur: Cursor, w: ExportWatermark) -> dict[str, Any] | None:
    return pg.one(cur, _SELECT_ONE + " FOR UPDATE", _key(w))


def _insert(cur: Cursor, w: ExportWatermark) -> bool:
    """Create the row; False when another transaction created it first."""
    return pg.one(cur, _INSERT, (*_key(w), *watermark_values(w))) is not None


class PgExportMetadataStore:
    """The shared :class:`~offloader.metadata.export_base.ExportMetadataStore`."""

    def __init__(self, url: str, *, busy_timeout_s: float = DEFAULT_BUSY_TIMEOUT_S) -> None:
        self.url = url
        self._db = PgDatabase(url, busy_timeout_s=busy_timeout_s)

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> PgExportMetadataStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @contextmanager
    def export_lock(
        self, target: str, topic: str, generation: int, *, timeout: float
    ) -> Iterator[None]:
        """The cluster-wide lock of one export (see the module docstring)."""
        with self._db.session_lock(
            f"export\x1f{target}\x1f{topic}\x1f{generation}", timeout
        ) as held:
            if not held:
                raise ExportBusy(
                    f"{topic} is being exported to {target} (generation {generation}) by "
                    "another broker on the shared metadata store; try again when it is done"
                )
            yield

    def get_watermark(self, target: str, topic: str, generation: int) -> ExportWatermark | None:
        with self._db.read() as cur:
            row = pg.one(cur, _SELECT_ONE, (target, topic, generation))
        return None if row is None else watermark_record(row)

    def list_watermarks(
        self, target: str | None = None, topic: str | None = None
    ) -> list[ExportWatermark]:
        sql = "SELECT * FROM export_watermarks WHERE TRUE"
        args: list[object] = []
        if target is not None:
            sql, args = sql + " AND target = %s", [*args, target]
        if topic is not None:
            sql, args = sql + " AND topic = %s", [*args, topic]
        with self._db.read() as cur:
            found = pg.all_rows(cur, sql + " ORDER BY target, topic, generation", args)
        return [watermark_record(row) for row in found]

    def advance(self, new: ExportWatermark, expected: tuple[int, int] | None) -> ExportWatermark:
        check_watermark(new)
        with self._db.write() as cur:
            if expected is None and _insert(cur, new):
                return new
            row = _locked(cur, new)
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
            cur.execute(_UPDATE.encode(), (*watermark_values(new), *_key(new)))
        return new

    def reset(self, new: ExportWatermark) -> ExportWatermark:
        check_watermark(new)
        with self._db.write() as cur:
            if _insert(cur, new):
                return new
            row = _locked(cur, new)
            if row is None:  # pragma: no cover - rows are never deleted
                raise OffloadConflict(f"export watermark of {new.topic} vanished during reset")
            current = (row["ledger_id"], row["entry_id"])
            if new.position > current:
                raise InvalidLedgerState(
                    f"export reset of {new.topic} would move the watermark forward from "
                    f"{current} to {new.position}"
                )
            cur.execute(_UPDATE.encode(), (*watermark_values(new), *_key(new)))
        return new
