"""The SQLite table of export watermarks (schema version 6 of the metadata database).

Only DDL: :mod:`offloader.metadata.sqlite.db` appends :data:`EXPORT_TABLES` to its migrations;
the table's statements, shared with PostgreSQL, are in :mod:`offloader.metadata.export`
(:mod:`offloader.metadata.export_base` describes the record).
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
