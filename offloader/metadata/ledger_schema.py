"""The tables of namespaces, topics, ledgers and the offload lifecycle (SQLite versions 1 to 4).

Only SQL text, written once in SQLite's types: :mod:`offloader.metadata.sqlite.db` applies
these steps as they stand (its migrations 1 to 4), and :mod:`offloader.metadata.postgres.schema`
derives PostgreSQL's from them (``BIGINT`` integers, an identity column for
``AUTOINCREMENT``, ``BOOLEAN`` flags) for its version 1. Shipped steps never change.
"""

from __future__ import annotations

#: SQLite v1: counters, namespaces, topics, offload attempts, ledgers
LEDGER_TABLES: tuple[str, ...] = (
    "CREATE TABLE counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL)",
    "INSERT INTO counters (name, value) VALUES ('next_ledger_id', 0)",
    """CREATE TABLE namespaces (
        name TEXT PRIMARY KEY,
        created_ms INTEGER NOT NULL,
        offload_threshold_bytes INTEGER NOT NULL DEFAULT -1,
        offload_threshold_seconds INTEGER NOT NULL DEFAULT -1,
        offload_deletion_lag_ms INTEGER,
        retention_size_bytes INTEGER NOT NULL DEFAULT 0,
        retention_time_seconds INTEGER NOT NULL DEFAULT 0,
        read_priority TEXT NOT NULL DEFAULT 'tiered-storage-first'
    )""",
    """CREATE TABLE topics (
        name TEXT PRIMARY KEY,
        namespace TEXT NOT NULL REFERENCES namespaces(name),
        created_ms INTEGER NOT NULL
    )""",
    "CREATE INDEX topics_by_namespace ON topics(namespace)",
    """CREATE TABLE offload_attempts (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        uuid TEXT NOT NULL UNIQUE,
        ledger_id INTEGER NOT NULL,
        topic TEXT NOT NULL,
        state TEXT NOT NULL
            CHECK (state IN ('STARTED', 'COMPLETED', 'FAILED', 'SUPERSEDED', 'CLEANED')),
        started_ms INTEGER NOT NULL,
        finished_ms INTEGER,
        error TEXT,
        driver_name TEXT NOT NULL,
        driver_properties TEXT NOT NULL,
        data_key TEXT NOT NULL,
        index_key TEXT NOT NULL,
        data_size INTEGER,
        index_size INTEGER,
        block_crc32c TEXT,
        index_crc32c INTEGER
    )""",
    "CREATE INDEX attempts_by_ledger ON offload_attempts(ledger_id)",
    """CREATE TABLE ledgers (
        ledger_id INTEGER PRIMARY KEY,
        topic TEXT NOT NULL REFERENCES topics(name) ON DELETE CASCADE,
        entries INTEGER NOT NULL DEFAULT 0 CHECK (entries >= 0),
        size_bytes INTEGER NOT NULL DEFAULT 0 CHECK (size_bytes >= 0),
        created_ms INTEGER NOT NULL,
        closed_ms INTEGER,
        state TEXT NOT NULL CHECK (state IN ('OPEN', 'CLOSED', 'DELETED')),
        offload_uuid TEXT REFERENCES offload_attempts(uuid),
        offload_complete INTEGER NOT NULL DEFAULT 0,
        offload_local_deleted INTEGER NOT NULL DEFAULT 0,
        offload_timestamp_ms INTEGER
    )""",
    "CREATE INDEX ledgers_by_topic ON ledgers(topic, ledger_id)",
)

#: SQLite v2: offload status and the per-topic offload lock
STATUS_AND_LOCK_TABLES: tuple[str, ...] = (
    """CREATE TABLE topic_offload_status (
        topic TEXT PRIMARY KEY REFERENCES topics(name) ON DELETE CASCADE,
        status TEXT NOT NULL CHECK (status IN ('NOT_RUN', 'RUNNING', 'SUCCESS', 'ERROR')),
        last_error TEXT,
        updated_ms INTEGER NOT NULL
    )""",
    """CREATE TABLE offload_locks (
        topic TEXT PRIMARY KEY REFERENCES topics(name) ON DELETE CASCADE,
        owner TEXT NOT NULL,
        acquired_ms INTEGER NOT NULL,
        heartbeat_ms INTEGER NOT NULL
    )""",
    "CREATE INDEX attempts_by_state ON offload_attempts(state)",
)

#: SQLite v3: a topic's own offload policies
TOPIC_POLICY_TABLES: tuple[str, ...] = (
    # a topic's own offload policies (NULL: not set on the topic, its namespace's apply)
    """CREATE TABLE topic_offload_policies (
        topic TEXT PRIMARY KEY REFERENCES topics(name) ON DELETE CASCADE,
        offload_threshold_bytes INTEGER,
        offload_threshold_seconds INTEGER,
        offload_deletion_lag_ms INTEGER,
        read_priority TEXT
    )""",
)

#: SQLite v4: the offload transform policy of a namespace (spec/transforms.md)
TRANSFORM_COLUMNS: tuple[str, ...] = (
    "ALTER TABLE namespaces ADD COLUMN transform_compression TEXT NOT NULL DEFAULT 'none'",
    "ALTER TABLE namespaces ADD COLUMN transform_level INTEGER",
    "ALTER TABLE namespaces ADD COLUMN transform_encryption TEXT NOT NULL DEFAULT 'none'",
    "ALTER TABLE namespaces ADD COLUMN transform_key_id TEXT",
)
