"""The SQLite tables of the Kafka tier (schema version 5 of the metadata database, the
per-topic transform policies of version 7, version 8's one copy per offset range and key
scheme, and the segments' pinned checks of version 9).

Only SQL text: :mod:`offloader.metadata.sqlite.db` appends :data:`KAFKA_TABLES`,
:data:`KAFKA_TRANSFORM_TABLES`, :data:`KAFKA_ONE_COPY_TABLES` and :data:`KAFKA_CHECKS_COLUMNS`
to its migrations; the last three are PostgreSQL's DDL too
(:mod:`offloader.metadata.postgres.schema` appends them, and ports :data:`KAFKA_TABLES`), so they
stay here, beside both backends; :mod:`offloader.metadata.kafka` queries the tables.
"""

from __future__ import annotations

KAFKA_TABLES: tuple[str, ...] = (
    """CREATE TABLE kafka_partitions (
        topic TEXT NOT NULL,
        partition INTEGER NOT NULL CHECK (partition >= 0),
        topic_id TEXT NOT NULL,
        watermark INTEGER NOT NULL DEFAULT -1,
        updated_ms INTEGER NOT NULL,
        last_error TEXT,
        PRIMARY KEY (topic, partition)
    )""",
    """CREATE TABLE kafka_remote_segments (
        segment_id TEXT PRIMARY KEY,
        topic TEXT NOT NULL,
        partition INTEGER NOT NULL,
        topic_id TEXT NOT NULL,
        base_offset INTEGER NOT NULL CHECK (base_offset >= 0),
        end_offset INTEGER NOT NULL,
        max_timestamp INTEGER NOT NULL,
        size_bytes INTEGER NOT NULL CHECK (size_bytes >= 0),
        leader_epochs TEXT NOT NULL,
        object_keys TEXT NOT NULL,
        state TEXT NOT NULL CHECK (state IN ('COPY_SEGMENT_STARTED', 'COPY_SEGMENT_FINISHED',
            'DELETE_SEGMENT_STARTED', 'DELETE_SEGMENT_FINISHED')),
        started_ms INTEGER NOT NULL,
        updated_ms INTEGER NOT NULL,
        log_crc32c INTEGER,
        error TEXT,
        FOREIGN KEY (topic, partition) REFERENCES kafka_partitions(topic, partition)
    )""",
    "CREATE INDEX kafka_segments_by_partition ON kafka_remote_segments(topic, partition, "
    "base_offset)",
    "CREATE INDEX kafka_segments_by_state ON kafka_remote_segments(state)",
    """CREATE TABLE kafka_gaps (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        topic TEXT NOT NULL,
        partition INTEGER NOT NULL,
        start_offset INTEGER NOT NULL,
        end_offset INTEGER NOT NULL CHECK (end_offset >= start_offset),
        recorded_ms INTEGER NOT NULL,
        reason TEXT NOT NULL
    )""",
    """CREATE TABLE kafka_retention (
        topic TEXT PRIMARY KEY,
        retention_ms INTEGER NOT NULL DEFAULT -1,
        retention_bytes INTEGER NOT NULL DEFAULT -1
    )""",
)

#: schema version 7: a Kafka topic's transform policy (spec/transforms.md §8); the same text is
#: PostgreSQL's version 4 (offloader/metadata/postgres/schema.py)
KAFKA_TRANSFORM_TABLES: tuple[str, ...] = (
    """CREATE TABLE kafka_topic_transforms (
        topic TEXT PRIMARY KEY,
        compression TEXT NOT NULL CHECK (compression IN ('none', 'zstd')),
        level BIGINT,
        encryption TEXT NOT NULL CHECK (encryption IN ('none', 'aes-256-gcm')),
        key_id TEXT
    )""",
)

#: one SQL text of both backends: the copy that the duplicates of one offset range defer to is
#: the COPY_SEGMENT_FINISHED one, then the earliest started, then the smallest segment id
_OTHER_WINS = (
    "k.topic = kafka_remote_segments.topic AND k.partition = kafka_remote_segments.partition "
    "AND k.base_offset = kafka_remote_segments.base_offset AND k.segment_id <> "
    "kafka_remote_segments.segment_id AND k.state IN ('COPY_SEGMENT_STARTED', "
    "'COPY_SEGMENT_FINISHED') AND ((k.state = 'COPY_SEGMENT_FINISHED' AND "
    "kafka_remote_segments.state = 'COPY_SEGMENT_STARTED') OR (k.state = "
    "kafka_remote_segments.state AND (k.started_ms < kafka_remote_segments.started_ms OR "
    "(k.started_ms = kafka_remote_segments.started_ms AND k.segment_id < "
    "kafka_remote_segments.segment_id))))"
)

#: schema version 8 (PostgreSQL 5): one copy per offset range, the effective start of a copy
#: that straddles the watermark, and the tier's key scheme. Copies of one base offset that two
#: uploaders made before this version are kept once (see ``_OTHER_WINS``); the others move to
#: DELETE_SEGMENT_STARTED with the reason, and the next upload pass deletes their objects.
KAFKA_ONE_COPY_TABLES: tuple[str, ...] = (
    "ALTER TABLE kafka_remote_segments ADD COLUMN start_offset BIGINT",
    "UPDATE kafka_remote_segments SET start_offset = base_offset",
    "UPDATE kafka_remote_segments SET state = 'DELETE_SEGMENT_STARTED', "
    "error = 'duplicate copy of the same offsets (found by the schema migration to one copy per "
    "range): deleted by the next upload pass' "
    "WHERE state IN ('COPY_SEGMENT_STARTED', 'COPY_SEGMENT_FINISHED') AND EXISTS "
    f"(SELECT 1 FROM kafka_remote_segments k WHERE {_OTHER_WINS})",
    "CREATE UNIQUE INDEX kafka_segments_one_copy ON kafka_remote_segments(topic, partition, "
    "start_offset) WHERE state IN ('COPY_SEGMENT_STARTED', 'COPY_SEGMENT_FINISHED')",
    """CREATE TABLE kafka_key_scheme (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        prefix TEXT NOT NULL,
        hash_prefix_len INTEGER NOT NULL,
        cluster TEXT,
        entropy_bits INTEGER NOT NULL
    )""",
)

#: schema version 9: what a segment's record pins of its objects (span CRC32Cs, sizes, the
#: transform; spec/kafka-segments.md §6), NULL on rows from before; the same text is
#: PostgreSQL's version 6 (offloader/metadata/postgres/schema.py)
KAFKA_CHECKS_COLUMNS: tuple[str, ...] = (
    "ALTER TABLE kafka_remote_segments ADD COLUMN checks TEXT",
)
