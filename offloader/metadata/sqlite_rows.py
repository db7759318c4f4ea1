"""Rows to records for the metadata stores, and the SQLite lookups every transaction uses.

This module owns the mapping between the tables of :mod:`offloader.metadata.sqlite_schema` and
the records of :mod:`offloader.metadata.base` (JSON for driver properties and block checksums);
the PostgreSQL backend maps its rows with the same functions.
The lookups take a connection inside an open transaction and raise NotFound
(:func:`offloader.metadata.rules.need`).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence

from offloader.metadata.base import (
    DriverMetadata,
    LedgerRecord,
    NamespaceRecord,
    OffloadAttempt,
    OffloadContext,
    OffloadLock,
    TopicOffloadStatus,
    TopicRecord,
)
from offloader.metadata.rules import Row, need, need_namespace
from offloader.policies import TOPIC_POLICY_FIELDS, NamespacePolicies, TopicPolicies

LEDGER_SELECT = """
SELECT l.ledger_id, l.topic, l.entries, l.size_bytes, l.created_ms, l.closed_ms, l.state,
       l.offload_uuid, l.offload_complete, l.offload_local_deleted, l.offload_timestamp_ms,
       a.driver_name, a.driver_properties, a.data_key, a.index_key, a.data_size, a.index_size,
       a.block_crc32c, a.index_crc32c
FROM ledgers AS l LEFT JOIN offload_attempts AS a ON a.uuid = l.offload_uuid
"""
ATTEMPT_SELECT = "SELECT * FROM offload_attempts"


POLICY_COLUMNS = (
    "offload_threshold_bytes",
    "offload_threshold_seconds",
    "offload_deletion_lag_ms",
    "retention_size_bytes",
    "retention_time_seconds",
    "read_priority",
    "transform_compression",
    "transform_level",
    "transform_encryption",
    "transform_key_id",
)


def driver_json(driver: DriverMetadata) -> str:
    return json.dumps(dict(driver.properties), sort_keys=True)


def _driver(row: Row) -> DriverMetadata:
    return DriverMetadata(row["driver_name"], json.loads(row["driver_properties"]))


def namespace_record(row: Row) -> NamespaceRecord:
    policies = NamespacePolicies(**{column: row[column] for column in POLICY_COLUMNS})
    return NamespaceRecord(row["name"], policies, row["created_ms"])


def topic_record(row: Row) -> TopicRecord:
    return TopicRecord(row["name"], row["namespace"], row["created_ms"])


def ledger_record(row: Row) -> LedgerRecord:
    offload = None
    if row["offload_uuid"] is not None:
        crcs = row["block_crc32c"]
        offload = OffloadContext(
            uuid=row["offload_uuid"],
            complete=bool(row["offload_complete"]),
            local_deleted=bool(row["offload_local_deleted"]),
            timestamp_ms=row["offload_timestamp_ms"],
            driver=_driver(row),
            data_key=row["data_key"],
            index_key=row["index_key"],
            data_size=row["data_size"],
            index_size=row["index_size"],
            block_crc32c=tuple(json.loads(crcs)) if crcs else (),
            index_crc32c=row["index_crc32c"],
        )
    return LedgerRecord(
        ledger_id=row["ledger_id"],
        topic=row["topic"],
        entries=row["entries"],
        size_bytes=row["size_bytes"],
        created_ms=row["created_ms"],
        closed_ms=row["closed_ms"],
        state=row["state"],
        offload=offload,
    )


def attempt_record(row: Row) -> OffloadAttempt:
    return OffloadAttempt(
        uuid=row["uuid"],
        ledger_id=row["ledger_id"],
        topic=row["topic"],
        state=row["state"],
        started_ms=row["started_ms"],
        finished_ms=row["finished_ms"],
        error=row["error"],
        driver=_driver(row),
        data_key=row["data_key"],
        index_key=row["index_key"],
    )


def topic_policies(row: Row | None) -> TopicPolicies:
    """A topic's own policies from its ``topic_offload_policies`` row (no row: all None)."""
    if row is None:
        return TopicPolicies()
    return TopicPolicies(**{column: row[column] for column in TOPIC_POLICY_FIELDS})


def offload_status(topic: str, row: Row | None) -> TopicOffloadStatus:
    """A topic's ``offload-status`` from its row (no row: NOT_RUN)."""
    if row is None:
        return TopicOffloadStatus(topic, "NOT_RUN")
    return TopicOffloadStatus(topic, row["status"], row["last_error"], row["updated_ms"])


def offload_lock(row: Row | None) -> OffloadLock | None:
    """The holder of a topic's offload lock from its row, if any."""
    if row is None:
        return None
    return OffloadLock(row["topic"], row["owner"], row["acquired_ms"], row["heartbeat_ms"])


def one(conn: sqlite3.Connection, sql: str, args: Sequence[object] = ()) -> sqlite3.Row | None:
    row: sqlite3.Row | None = conn.execute(sql, tuple(args)).fetchone()
    return row


def get_ledger(conn: sqlite3.Connection, ledger_id: int) -> LedgerRecord:
    row = one(conn, LEDGER_SELECT + " WHERE l.ledger_id = ?", (ledger_id,))
    return ledger_record(need(row, f"ledger {ledger_id}"))


def get_attempt(conn: sqlite3.Connection, uuid: str) -> OffloadAttempt:
    row = need(one(conn, ATTEMPT_SELECT + " WHERE uuid = ?", (uuid,)), f"offload attempt {uuid}")
    return attempt_record(row)


def require_topic(conn: sqlite3.Connection, topic: str) -> sqlite3.Row:
    return need(one(conn, "SELECT * FROM topics WHERE name = ?", (topic,)), f"topic {topic}")


def require_namespace(conn: sqlite3.Connection, name: str) -> sqlite3.Row:
    return need_namespace(one(conn, "SELECT * FROM namespaces WHERE name = ?", (name,)), name)
