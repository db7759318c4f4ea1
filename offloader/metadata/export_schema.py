"""The SQLite table of export watermarks (schema version 6 of the metadata database).

Only SQL text, kept apart so other backends can port it: :mod:`offloader.metadata.sqlite_schema`
appends :data:`EXPORT_TABLES` to its migrations and :mod:`offloader.metadata.export_sqlite`
queries the table (:mod:`offloader.metadata.export_base` describes the record).
"""

from __future__ import annotations

EXPORT_TABLES: tuple[str, ...] = (
    """CREATE TABLE export_watermarks (
        target TEXT NOT NULL,
        topic TEXT NOT NULL,
        generation INTEGER NOT NULL CHECK (generation >= 1),
        ledger_id INTEGER NOT NULL DEFAULT -1,
        entry_id INTEGER NOT NULL DEFAULT -1,
        publish_time_ms INTEGER,
        settings TEXT NOT NULL DEFAULT '',
        rows INTEGER NOT NULL DEFAULT 0 CHECK (rows >= 0),
        files INTEGER NOT NULL DEFAULT 0 CHECK (files >= 0),
        invalid_rows INTEGER NOT NULL DEFAULT 0 CHECK (invalid_rows >= 0),
        updated_ms INTEGER NOT NULL,
        PRIMARY KEY (target, topic, generation)
    )""",
)

SELECT_ONE = "SELECT * FROM export_watermarks WHERE target = ? AND topic = ? AND generation = ?"
INSERT = (
    "INSERT INTO export_watermarks (target, topic, generation, ledger_id, entry_id, "
    "publish_time_ms, settings, rows, files, invalid_rows, updated_ms) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
UPDATE = (
    "UPDATE export_watermarks SET ledger_id = ?, entry_id = ?, publish_time_ms = ?, "
    "settings = ?, rows = ?, files = ?, invalid_rows = ?, updated_ms = ? "
    "WHERE target = ? AND topic = ? AND generation = ?"
)
