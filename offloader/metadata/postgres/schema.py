"""The PostgreSQL schema of the metadata store: every table, as an append-only migration list.

:data:`PG_MIGRATIONS` is the schema history of a PostgreSQL metadata database
(its version is recorded in the one-row table ``offloader_schema``), applied by
:class:`~offloader.metadata.postgres.db.PgDatabase`. It is numbered on its own, apart from the
SQLite ``PRAGMA user_version``: PostgreSQL version 1 is the port of SQLite versions 1 to 5
(ledgers and offload contexts, offload status and locks, topic policies, transforms, the Kafka
tier) in one step, version 2 adds the cluster tables (brokers, topic ownership, leases),
version 3 the export watermarks (SQLite version 6,
:mod:`offloader.metadata.export_schema`), version 4 a Kafka topic's transform policy
(SQLite version 7, :mod:`offloader.metadata.kafka_schema`), version 5 one copy per Kafka offset
range and the Kafka key scheme (SQLite version 8), version 6 a Kafka segment's pinned checks
(SQLite version 9). A new table is one more tuple appended to :data:`PG_MIGRATIONS`; never edit
a step that has shipped.

The tables both backends have are written once, in SQLite's types
(:mod:`offloader.metadata.ledger_schema`, :mod:`offloader.metadata.kafka_schema`,
:mod:`offloader.metadata.export_schema`); :func:`ported` gives PostgreSQL's, which differ only
in types: every integer is ``BIGINT`` (SQLite's integers are signed 64-bit too), flags are
``BOOLEAN``, ``AUTOINCREMENT`` is an identity column, JSON payloads stay ``TEXT`` (the row
mapping is shared with SQLite). The cluster tables are PostgreSQL's alone.
"""

from __future__ import annotations

import re

from offloader.metadata import ledger_schema as ledgers
from offloader.metadata.export_schema import EXPORT_TABLES
from offloader.metadata.kafka_schema import (
    KAFKA_CHECKS_COLUMNS,
    KAFKA_ONE_COPY_TABLES,
    KAFKA_TABLES,
    KAFKA_TRANSFORM_TABLES,
)

#: the application name recorded in ``offloader_schema`` (to tell our schema from others)
APPLICATION = "ledger-offloader"

#: the table holding the schema version (created before the first step runs)
VERSION_TABLE = """CREATE TABLE IF NOT EXISTS offloader_schema (
    singleton BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (singleton),
    application TEXT NOT NULL,
    version INTEGER NOT NULL
)"""


def ported(steps: tuple[str, ...], *, flags: tuple[str, ...] = ()) -> tuple[str, ...]:
    """SQLite's DDL ``steps`` in PostgreSQL's types: ``INTEGER PRIMARY KEY AUTOINCREMENT`` an
    identity column, every other ``INTEGER`` a ``BIGINT`` (both signed 64-bit), and the 0/1
    ``flags`` columns (``INTEGER NOT NULL DEFAULT 0``) ``BOOLEAN NOT NULL DEFAULT FALSE``."""

    def port(statement: str) -> str:
        for flag in flags:
            statement = statement.replace(
                f"{flag} INTEGER NOT NULL DEFAULT 0", f"{flag} BOOLEAN NOT NULL DEFAULT FALSE"
            )
        statement = statement.replace(
            "INTEGER PRIMARY KEY AUTOINCREMENT", "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY"
        )
        return re.sub(r"\bINTEGER\b", "BIGINT", statement)

    return tuple(port(statement) for statement in steps)


#: SQLite v1 to v5 (ledgers, offload status and locks, topic policies, transforms, the Kafka
#: tier), ported: PostgreSQL v1
_PORTED = (
    *ported(ledgers.LEDGER_TABLES, flags=("offload_complete", "offload_local_deleted")),
    *ported(ledgers.STATUS_AND_LOCK_TABLES),
    *ported(ledgers.TOPIC_POLICY_TABLES),
    *ported(ledgers.TRANSFORM_COLUMNS),
    *ported(KAFKA_TABLES),
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

#: version N of the schema is reached by applying PG_MIGRATIONS[0..N-1] in order
PG_MIGRATIONS: tuple[tuple[str, ...], ...] = (
    _PORTED,
    _CLUSTER,
    ported(EXPORT_TABLES),  # PostgreSQL v3 (SQLite v6): the export watermarks
    KAFKA_TRANSFORM_TABLES,  # PostgreSQL v4 (SQLite v7): a Kafka topic's transform policy
    KAFKA_ONE_COPY_TABLES,  # PostgreSQL v5 (SQLite v8): one copy per Kafka range, key scheme
    KAFKA_CHECKS_COLUMNS,  # PostgreSQL v6 (SQLite v9): a Kafka segment's pinned checks
)
PG_SCHEMA_VERSION = len(PG_MIGRATIONS)

#: tables of ours; one of them without ``offloader_schema`` means the schema is not ours
OUR_TABLES = ("namespaces", "topics", "ledgers", "offload_attempts", "kafka_partitions")
