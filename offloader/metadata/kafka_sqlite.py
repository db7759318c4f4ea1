"""SqliteKafkaMetadataStore: the KafkaMetadataStore in the metadata SQLite file.

It opens its own connection to ``<home>/metadata.db`` (the schema, WAL, busy timeout and error
translation of :mod:`offloader.metadata.sqlite_schema`; its tables in
:mod:`offloader.metadata.kafka_schema`), so it runs beside a
:class:`~offloader.metadata.sqlite.SqliteMetadataStore` in the same or another process. Every
change is one ``BEGIN IMMEDIATE`` transaction; ``finish_copy`` moves the state and the watermark
together.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from pathlib import Path

from offloader.errors import AlreadyExists, InvalidLedgerState, NotFound, OffloadConflict
from offloader.metadata.kafka_base import (
    ALLOWED_TRANSITIONS,
    COPY_FINISHED,
    COPY_STARTED,
    DELETE_FINISHED,
    DELETE_STARTED,
    KafkaGap,
    KafkaPartitionRecord,
    KafkaRetention,
    NewRemoteSegment,
    RemoteSegmentRecord,
    RemoteSegmentState,
)
from offloader.metadata.sqlite_rows import Row
from offloader.metadata.sqlite_schema import DEFAULT_BUSY_TIMEOUT_S, Database
from offloader.policies import TransformPolicy


def segment_record(row: Row) -> RemoteSegmentRecord:
    return RemoteSegmentRecord(
        segment_id=row["segment_id"],
        topic=row["topic"],
        topic_id=row["topic_id"],
        partition=row["partition"],
        base_offset=row["base_offset"],
        end_offset=row["end_offset"],
        max_timestamp=row["max_timestamp"],
        size_bytes=row["size_bytes"],
        leader_epochs={int(k): int(v) for k, v in json.loads(row["leader_epochs"]).items()},
        keys=dict(json.loads(row["object_keys"])),
        state=row["state"],
        started_ms=row["started_ms"],
        updated_ms=row["updated_ms"],
        log_crc32c=row["log_crc32c"],
        error=row["error"],
    )


def transform_policy(row: Row) -> TransformPolicy:
    return TransformPolicy(row["compression"], row["level"], row["encryption"], row["key_id"])


def partition_record(row: Row) -> KafkaPartitionRecord:
    return KafkaPartitionRecord(
        row["topic"],
        row["partition"],
        row["topic_id"],
        row["watermark"],
        row["updated_ms"],
        row["last_error"],
    )


class SqliteKafkaMetadataStore:
    """The embedded :class:`~offloader.metadata.kafka_base.KafkaMetadataStore`."""

    def __init__(self, path: str | Path, *, busy_timeout_s: float = DEFAULT_BUSY_TIMEOUT_S) -> None:
        self.path = Path(path)
        self._db = Database(self.path, busy_timeout_s=busy_timeout_s)

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> SqliteKafkaMetadataStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # --- partitions -----------------------------------------------------------------------
    def ensure_partition(
        self, topic: str, partition: int, topic_id: str, now_ms: int, *, watermark: int = -1
    ) -> KafkaPartitionRecord:
        with self._db.write() as conn:
            row = conn.execute(
                "SELECT * FROM kafka_partitions WHERE topic = ? AND partition = ?",
                (topic, partition),
            ).fetchone()
            if row is not None:
                if row["topic_id"] != topic_id:
                    raise OffloadConflict(
                        f"{topic}-{partition} was recorded with topic id {row['topic_id']}, the "
                        f"log directory has {topic_id}: the topic was re-created"
                    )
                return partition_record(row)
            conn.execute(
                "INSERT INTO kafka_partitions (topic, partition, topic_id, watermark, updated_ms)"
                " VALUES (?, ?, ?, ?, ?)",
                (topic, partition, topic_id, watermark, now_ms),
            )
            return KafkaPartitionRecord(topic, partition, topic_id, watermark, now_ms)

    def get_partition(self, topic: str, partition: int) -> KafkaPartitionRecord | None:
        with self._db.read() as conn:
            row = conn.execute(
                "SELECT * FROM kafka_partitions WHERE topic = ? AND partition = ?",
                (topic, partition),
            ).fetchone()
        return None if row is None else partition_record(row)

    def list_partitions(self, topic: str | None = None) -> list[KafkaPartitionRecord]:
        sql = "SELECT * FROM kafka_partitions"
        args: tuple[object, ...] = ()
        if topic is not None:
            sql, args = sql + " WHERE topic = ?", (topic,)
        with self._db.read() as conn:
            found = conn.execute(sql + " ORDER BY topic, partition", args).fetchall()
        return [partition_record(row) for row in found]

    def set_partition_error(
        self, topic: str, partition: int, error: str | None, now_ms: int
    ) -> None:
        with self._db.write() as conn:
            cur = conn.execute(
                "UPDATE kafka_partitions SET last_error = ?, updated_ms = ? "
                "WHERE topic = ? AND partition = ?",
                (error, now_ms, topic, partition),
            )
            if cur.rowcount == 0:
                raise NotFound(f"Kafka partition {topic}-{partition} is not known")

    # --- remote segments ------------------------------------------------------------------
    def start_copy(self, segment: NewRemoteSegment, now_ms: int) -> RemoteSegmentRecord:
        s = segment
        if s.end_offset < s.base_offset or s.size_bytes < 0:
            raise InvalidLedgerState(
                f"segment {s.segment_id}: offsets {s.base_offset}..{s.end_offset}, "
                f"size {s.size_bytes}"
            )
        with self._db.write() as conn:
            part = conn.execute(
                "SELECT topic_id FROM kafka_partitions WHERE topic = ? AND partition = ?",
                (s.topic, s.partition),
            ).fetchone()
            if part is None:
                raise NotFound(f"Kafka partition {s.topic}-{s.partition} is not known")
            if conn.execute(
                "SELECT 1 FROM kafka_remote_segments WHERE segment_id = ?", (s.segment_id,)
            ).fetchone():
                raise AlreadyExists(f"remote segment {s.segment_id} already exists")
            conn.execute(
                "INSERT INTO kafka_remote_segments (segment_id, topic, partition, topic_id, "
                "base_offset, end_offset, max_timestamp, size_bytes, leader_epochs, "
                "object_keys, state, started_ms, updated_ms) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    s.segment_id,
                    s.topic,
                    s.partition,
                    s.topic_id,
                    s.base_offset,
                    s.end_offset,
                    s.max_timestamp,
                    s.size_bytes,
                    json.dumps({str(k): v for k, v in s.leader_epochs.items()}),
                    json.dumps(dict(s.keys), sort_keys=True),
                    COPY_STARTED,
                    now_ms,
                    now_ms,
                ),
            )
            return self._get(conn, s.segment_id)

    def _get(self, conn: sqlite3.Connection, segment_id: str) -> RemoteSegmentRecord:
        row = conn.execute(
            "SELECT * FROM kafka_remote_segments WHERE segment_id = ?", (segment_id,)
        ).fetchone()
        if row is None:
            raise NotFound(f"remote segment {segment_id} does not exist")
        return segment_record(row)

    def _move(
        self,
        conn: sqlite3.Connection,
        segment_id: str,
        target: RemoteSegmentState,
        now_ms: int,
        extra: str = "",
        args: tuple[object, ...] = (),
    ) -> RemoteSegmentRecord:
        current = self._get(conn, segment_id)
        if target not in ALLOWED_TRANSITIONS[current.state]:
            raise InvalidLedgerState(
                f"remote segment {segment_id} is {current.state}; it cannot become {target}"
            )
        conn.execute(
            f"UPDATE kafka_remote_segments SET state = ?, updated_ms = ?{extra} "
            "WHERE segment_id = ?",
            (target, now_ms, *args, segment_id),
        )
        return self._get(conn, segment_id)

    def finish_copy(
        self, segment_id: str, now_ms: int, *, log_crc32c: int | None = None
    ) -> RemoteSegmentRecord:
        with self._db.write() as conn:
            record = self._move(
                conn, segment_id, COPY_FINISHED, now_ms, ", log_crc32c = ?", (log_crc32c,)
            )
            conn.execute(
                "UPDATE kafka_partitions SET watermark = max(watermark, ?), updated_ms = ?, "
                "last_error = NULL WHERE topic = ? AND partition = ?",
                (record.end_offset, now_ms, record.topic, record.partition),
            )
            return record

    def start_delete(
        self, segment_id: str, now_ms: int, *, error: str | None = None
    ) -> RemoteSegmentRecord:
        with self._db.write() as conn:
            return self._move(
                conn, segment_id, DELETE_STARTED, now_ms, ", error = coalesce(?, error)", (error,)
            )

    def finish_delete(self, segment_id: str, now_ms: int) -> RemoteSegmentRecord:
        with self._db.write() as conn:
            return self._move(conn, segment_id, DELETE_FINISHED, now_ms)

    def get_segment(self, segment_id: str) -> RemoteSegmentRecord:
        with self._db.read() as conn:
            return self._get(conn, segment_id)

    def list_segments(
        self,
        topic: str | None = None,
        partition: int | None = None,
        *,
        states: Sequence[RemoteSegmentState] | None = None,
    ) -> list[RemoteSegmentRecord]:
        where: list[str] = []
        args: list[object] = []
        if topic is not None:
            where.append("topic = ?")
            args.append(topic)
        if partition is not None:
            where.append("partition = ?")
            args.append(partition)
        if states is not None:
            where.append(f"state IN ({', '.join('?' * len(states))})")
            args.extend(states)
        sql = "SELECT * FROM kafka_remote_segments"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY topic, partition, base_offset, started_ms, segment_id"
        with self._db.read() as conn:
            found = conn.execute(sql, args).fetchall()
        return [segment_record(row) for row in found]

    # --- gaps and retention ---------------------------------------------------------------
    def record_gap(
        self,
        topic: str,
        partition: int,
        start_offset: int,
        end_offset: int,
        now_ms: int,
        reason: str,
    ) -> KafkaGap:
        if end_offset < start_offset:
            raise InvalidLedgerState(f"gap {start_offset}..{end_offset} is empty")
        with self._db.write() as conn:
            conn.execute(
                "INSERT INTO kafka_gaps (topic, partition, start_offset, end_offset, "
                "recorded_ms, reason) VALUES (?, ?, ?, ?, ?, ?)",
                (topic, partition, start_offset, end_offset, now_ms, reason),
            )
        return KafkaGap(topic, partition, start_offset, end_offset, now_ms, reason)

    def list_gaps(self, topic: str | None = None) -> list[KafkaGap]:
        sql = "SELECT * FROM kafka_gaps"
        args: tuple[object, ...] = ()
        if topic is not None:
            sql, args = sql + " WHERE topic = ?", (topic,)
        with self._db.read() as conn:
            found = conn.execute(sql + " ORDER BY topic, partition, start_offset", args)
            rows = found.fetchall()
        return [
            KafkaGap(
                r["topic"],
                r["partition"],
                r["start_offset"],
                r["end_offset"],
                r["recorded_ms"],
                r["reason"],
            )
            for r in rows
        ]

    def set_retention(self, retention: KafkaRetention) -> KafkaRetention:
        with self._db.write() as conn:
            conn.execute(
                "INSERT INTO kafka_retention (topic, retention_ms, retention_bytes) "
                "VALUES (?, ?, ?) ON CONFLICT (topic) DO UPDATE SET "
                "retention_ms = excluded.retention_ms, retention_bytes = excluded.retention_bytes",
                (retention.topic, retention.retention_ms, retention.retention_bytes),
            )
        return KafkaRetention(retention.topic, retention.retention_ms, retention.retention_bytes)

    def get_retention(self, topic: str) -> KafkaRetention:
        with self._db.read() as conn:
            row = conn.execute("SELECT * FROM kafka_retention WHERE topic = ?", (topic,)).fetchone()
        if row is None:
            return KafkaRetention(topic)
        return KafkaRetention(topic, row["retention_ms"], row["retention_bytes"])

    # --- transform policies (spec/transforms.md §8) ----------------------------------------
    def set_topic_transform(self, topic: str, policy: TransformPolicy) -> TransformPolicy:
        with self._db.write() as conn:
            conn.execute(
                "INSERT INTO kafka_topic_transforms (topic, compression, level, encryption, "
                "key_id) VALUES (?, ?, ?, ?, ?) ON CONFLICT (topic) DO UPDATE SET "
                "compression = excluded.compression, level = excluded.level, "
                "encryption = excluded.encryption, key_id = excluded.key_id",
                (topic, policy.compression, policy.level, policy.encryption, policy.key_id),
            )
        return policy

    def get_topic_transform(self, topic: str) -> TransformPolicy | None:
        with self._db.read() as conn:
            row = conn.execute(
                "SELECT * FROM kafka_topic_transforms WHERE topic = ?", (topic,)
            ).fetchone()
        return None if row is None else transform_policy(row)

    def remove_topic_transform(self, topic: str) -> bool:
        with self._db.write() as conn:
            gone = conn.execute("DELETE FROM kafka_topic_transforms WHERE topic = ?", (topic,))
            return gone.rowcount > 0


__all__ = ["DELETE_FINISHED", "SqliteKafkaMetadataStore", "transform_policy"]
