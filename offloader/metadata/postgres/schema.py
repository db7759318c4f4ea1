"""The PostgreSQL schema of the metadata store: every table, as an append-only migration list.

Only SQL text. :data:`PG_MIGRATIONS` is the schema history of a PostgreSQL metadata database
(its version is recorded in the one-row table ``offloader_schema``), applied by
:class:`~offloader.metadata.postgres.db.PgDatabase`. It is numbered on its own, apart from the
SQLite ``PRAGMA user_version``: PostgreSQL version 1 is the port of SQLite versions 1 to 5
(ledgers and offload contexts, offload status and locks, topic policies, transforms, the Kafka
tier) in one step, version 2 adds the cluster tables (brokers, topic ownership, leases),
version 3 the export watermarks (SQLite version 6,
:mod:`offloader.metadata.sqlite.export_schema`), version 4 a Kafka topic's transform policy
(SQLite version 7, :mod:`offloader.metadata.kafka_schema`), version 5 one copy per Kafka offset
range and the Kafka key scheme (SQLite version 8). A new table is one more tuple appended to
:data:`PG_MIGRATIONS`; never edit a step that has shipped.

Types: every integer is ``BIGINT`` (SQLite's integers are signed 64-bit too), flags are
``BOOLEAN``, JSON payloads stay ``TEXT`` (the row mapping is shared with SQLite).
"""

from __future__ import annotations

from offloader.metadata.kafka_schema import KAFKA_ONE_COPY_TABLES, KAFKA_TRANSFORM_TABLES

#: the application name recorded in ``offloader_schema`` (to tell our schema from others)
APPLICATION = "ledger-offloader"

#: the table holding the schema version (created before the first step runs)
VERSION_TABLE = """CREATE TABLE IF NOT EXISTS offloader_schema (
    singleton BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (singleton),
    application TEXT NOT NULL,
    version INTEGER NOT NULL
)"""

#: SQLite v1: counters, namespaces, topics, attempts, ledgers
_LEDGERS = (
    "CREATE TABLE counters (name TEXT PRIMARY KEY, value BIGINT NOT NULL)",
    "INSERT INTO counters (name, value) VALUES ('next_ledger_id', 0)",
    """CREATE TABLE namespaces (
        name TEXT PRIMARY KEY,
        created_ms BIGINT NOT NULL,
        offload_threshold_bytes BIGINT NOT NULL DEFAULT -1,
        offload_threshold_seconds BIGINT NOT NULL DEFAULT -1,
        offload_deletion_lag_ms BIGINT,
        retention_size_bytes BIGINT NOT NULL DEFAULT 0,
        retention_time_seconds BIGINT NOT NULL DEFAULT 0,
        read_priority TEXT NOT NULL DEFAULT 'tiered-storage-first'
    )""",
    """CREATE TABLE topics (
        name TEXT PRIMARY KEY,
        namespace TEXT NOT NULL REFERENCES namespaces(name),
        created_ms BIGINT NOT NULL
    )""",
    "CREATE INDEX topics_by_namespace ON topics(namespace)",
    """CREATE TABLE offload_attempts (
        seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        uuid TEXT NOT NULL UNIQUE,
        ledger_id BIGINT NOT NULL,
        topic TEXT NOT NULL,
        state TEXT NOT NULL
            CHECK (state IN ('STARTED', 'COMPLETED', 'FAILED', 'SUPERSEDED', 'CLEANED')),
        started_ms BIGINT NOT NULL,
        finished_ms BIGINT,
        error TEXT,
        driver_name TEXT NOT NULL,
        driver_properties TEXT NOT NULL,
        data_key TEXT NOT NULL,
        index_key TEXT NOT NULL,
        data_size BIGINT,
        index_size BIGINT,
        block_crc32c TEXT,
        index_crc32c BIGINT
    )""",
    "CREATE INDEX attempts_by_ledger ON offload_attempts(ledger_id)",
    """CREATE TABLE ledgers (
        ledger_id BIGINT PRIMARY KEY,
        topic TEXT NOT NULL REFERENCES topics(name) ON DELETE CASCADE,
        entries BIGINT NOT NULL DEFAULT 0 CHECK (entries >= 0),
        size_bytes BIGINT NOT NULL DEFAULT 0 CHECK (size_bytes >= 0),
        created_ms BIGINT NOT NULL,
        closed_ms BIGINT,
        state TEXT NOT NULL CHECK (state IN ('OPEN', 'CLOSED', 'DELETED')),
        offload_uuid TEXT REFERENCES offload_attempts(uuid),
        offload_complete BOOLEAN NOT NULL DEFAULT FALSE,
        offload_local_deleted BOOLEAN NOT NULL DEFAULT FALSE,
        offload_timestamp_ms BIGINT
    )""",
    "CREATE INDEX ledgers_by_topic ON ledgers(topic, ledger_id)",
)

#: SQLite v2: offload status and the per-topic offload lock
_STATUS_AND_LOCKS = (
    """CREATE TABLE topic_offload_status (
        topic TEXT PRIMARY KEY REFERENCES topics(name) ON DELETE CASCADE,
        status TEXT NOT NULL CHECK (status IN ('NOT_RUN', 'RUNNING', 'SUCCESS', 'ERROR')),
        last_error TEXT,
        updated_ms BIGINT NOT NULL
    )""",
    """CREATE TABLE offload_locks (
        topic TEXT PRIMARY KEY REFERENCES topics(name) ON DELETE CASCADE,
        owner TEXT NOT NULL,
        acquired_ms BIGINT NOT NULL,
        heartbeat_ms BIGINT NOT NULL
    )""",
    "CREATE INDEX attempts_by_state ON offload_attempts(state)",
)

#: SQLite v3: a topic's own offload policies (NULL: its namespace's apply)
_TOPIC_POLICIES = (
    """CREATE TABLE topic_offload_policies (
        topic TEXT PRIMARY KEY REFERENCES topics(name) ON DELETE CASCADE,
        offload_threshold_bytes BIGINT,
        offload_threshold_seconds BIGINT,
        offload_deletion_lag_ms BIGINT,
        read_priority TEXT
    )""",
)

#: SQLite v4: the offload transform policy of a namespace (spec/transforms.md)
_TRANSFORMS = (
    "ALTER TABLE namespaces ADD COLUMN transform_compression TEXT NOT NULL DEFAULT 'none'",
    "ALTER TABLE namespaces ADD COLUMN transform_level BIGINT",
    "ALTER TABLE namespaces ADD COLUMN transform_encryption TEXT NOT NULL DEFAULT 'none'",
    "ALTER TABLE namespaces ADD COLUMN transform_key_id TEXT",
)

#: SQLite v5: the Kafka tier (offloader/metadata/kafka_schema.py)
_KAFKA = (
    """CREATE TABLE kafka_partitions (
        topic TEXT NOT NULL,
        partition BIGINT NOT NULL CHECK (partition >= 0),
        topic_id TEXT NOT NULL,
        watermark BIGINT NOT NULL DEFAULT -1,
        updated_ms BIGINT NOT NULL,
        last_error TEXT,
        PRIMARY KEY (topic, partition)
    )""",
    """CREATE TABLE kafka_remote_segments (
        segment_id TEXT PRIMARY KEY,
        topic TEXT NOT NULL,
        partition BIGINT NOT NULL,
        topic_id TEXT NOT NULL,
        base_offset BIGINT NOT NULL CHECK (base_offset >= 0),
        end_offset BIGINT NOT NULL,
        max_timestamp BIGINT NOT NULL,
        size_bytes BIGINT NOT NULL CHECK (size_bytes >= 0),
        leader_epochs TEXT NOT NULL,
        object_keys TEXT NOT NULL,
        state TEXT NOT NULL CHECK (state IN ('COPY_SEGMENT_STARTED', 'COPY_SEGMENT_FINISHED',
            'DELETE_SEGMENT_STARTED', 'DELETE_SEGMENT_FINISHED')),
        started_ms BIGINT NOT NULL,
        updated_ms BIGINT NOT NULL,
        log_crc32c BIGINT,
        error TEXT,
        FOREIGN KEY (topic, partition) REFERENCES kafka_partitions(topic, partition)
    )""",
    "CREATE INDEX kafka_segments_by_partition ON kafka_remote_segments(topic, partition, "
    "base_offset)",
    "CREATE INDEX kafka_segments_by_state ON kafka_remote_segments(state)",
    """CREATE TABLE kafka_gaps (
        seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        topic TEXT NOT NULL,
        partition BIGINT NOT NULL,
        start_offset BIGINT NOT NULL,
        end_offset BIGINT NOT NULL CHECK (end_offset >= start_offset),
        recorded_ms BIGINT NOT NULL,
        reason TEXT NOT NULL
    )""",
    """CREATE TABLE kafka_retention (
        topic TEXT PRIMARY KEY,
        retention_ms BIGINT NOT NULL DEFAULT -1,
        retention_bytes BIGINT NOT NULL DEFAULT -1
    )""",
)

#: PostgreSQL v2: brokers and their heartbeats, topic ownership, leases for cluster work
_CLUSTER = (
    """CREATE TABLE brokers (
        broker_id TEXT PRIMARY KEY,
        host TEXT NOT NULL,
        home TEXT NOT NULL,
        started_ms BIGINT NOT NULL,
        heartbeat_ms BIGINT NOT NULL
    )""",
    """CREATE TABLE topic_owners (
        topic TEXT PRIMARY KEY REFERENCES topics(name) ON DELETE CASCADE,
        broker_id TEXT NOT NULL,
        since_ms BIGINT NOT NULL
    )""",
    "CREATE INDEX topic_owners_by_broker ON topic_owners(broker_id)",
    """CREATE TABLE leases (
        name TEXT PRIMARY KEY,
        holder TEXT NOT NULL,
        acquired_ms BIGINT NOT NULL,
        expires_ms BIGINT NOT NULL
    )""",
)

#: PostgreSQL v3 (SQLite v6): the export watermarks (offloader.metadata.export_base)
_EXPORT = (
    """CREATE TABLE export_watermarks (
        target TEXT NOT NULL,
        topic TEXT NOT NULL,
        generation BIGINT NOT NULL CHECK (generation >= 1),
        ledger_id BIGINT NOT NULL DEFAULT -1,
        entry_id BIGINT NOT NULL DEFAULT -1,
        publish_time_ms BIGINT,
        settings TEXT NOT NULL DEFAULT '',
        rows BIGINT NOT NULL DEFAULT 0 CHECK (rows >= 0),
        files BIGINT NOT NULL DEFAULT 0 CHECK (files >= 0),
        invalid_rows BIGINT NOT NULL DEFAULT 0 CHECK (invalid_rows >= 0),
        updated_ms BIGINT NOT NULL,
        PRIMARY KEY (target, topic, generation)
    )""",
)

#: version N of the schema is reached by applying PG_MIGRATIONS[0..N-1] in order
PG_MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (*_LEDGERS, *_STATUS_AND_LOCKS, *_TOPIC_POLICIES, *_TRANSFORMS, *_KAFKA),
    _CLUSTER,
    _EXPORT,
    KAFKA_TRANSFORM_TABLES,  # PostgreSQL v4 (SQLite v7): a Kafka topic's transform policy
    KAFKA_ONE_COPY_TABLES,  # PostgreSQL v5 (SQLite v8): one copy per Kafka range, key scheme
)
PG_SCHEMA_VERSION = len(PG_MIGRATIONS)

#: tables of ours; one of them without ``offloader_schema`` means the schema is not ours
OUR_TABLES = ("namespaces", "topics", "ledgers", "offload_attempts", "kafka_partitions")
