"""Rows to records for both metadata backends (SQLite and PostgreSQL).

This module owns the mapping between the tables (:mod:`offloader.metadata.sqlite.db`,
:mod:`offloader.metadata.postgres.schema`) and the records of :mod:`offloader.metadata.base`
(JSON for driver properties and block checksums), and the column lists the shared statements
(:mod:`offloader.metadata.statements`) read. Pure: rows in, records out.
"""

from __future__ import annotations

import json

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
from offloader.metadata.rules import Row
from offloader.policies import TOPIC_POLICY_FIELDS, NamespacePolicies, TopicPolicies

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
