"""SqliteKafkaMetadataStore: the KafkaMetadataStore in the metadata SQLite file.

It opens its own connection to ``<home>/metadata.db`` (the schema, WAL, busy timeout and error
translation of :mod:`offloader.metadata.sqlite_schema`; its tables in
:mod:`offloader.metadata.kafka_schema`), so it runs beside a
:class:`~offloader.metadata.sqlite.SqliteMetadataStore` in the same or another process. Every
change is one ``BEGIN IMMEDIATE`` transaction; ``finish_copy`` moves the state and the watermark
together; ``start_copy`` refuses a second live copy of an offset in its transaction (and the
unique index ``kafka_segments_one_copy`` backs it); a partition's upload lock is a lock file
under ``<home>/locks``. This module holds the SQLite SQL only: the checks, errors, filters and
row mapping it shares with the PostgreSQL backend are in :mod:`offloader.metadata.kafka_rules`.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from formats.kafka.names import KafkaKeyScheme
from offloader.metadata import kafka_rules as kr
from offloader.metadata.kafka_base import (
    COPY_FINISHED,
    DELETE_FINISHED,
    DELETE_STARTED,
    KafkaGap,
    KafkaPartitionRecord,
    KafkaRetention,
    NewRemoteSegment,
    RemoteSegmentRecord,
    RemoteSegmentState,
)
from offloader.metadata.rules import SQLITE
from offloader.metadata.sqlite.db import DEFAULT_BUSY_TIMEOUT_S, Database
from offloader.policies import TransformPolicy

_INSERT_SEGMENT = (
    f"INSERT INTO kafka_remote_segments ({', '.join(kr.SEGMENT_COLUMNS)}) "
    f"VALUES ({SQLITE.marks(len(kr.SEGMENT_COLUMNS))})"
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
                kr.check_topic_id(row["topic_id"], topic, partition, topic_id)
                return kr.partition_record(row)
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
        return None if row is None else kr.partition_record(row)

    def list_partitions(self, topic: str | None = None) -> list[KafkaPartitionRecord]:
        where, args = kr.topic_filter(SQLITE, topic)
        with self._db.read() as conn:
            found = conn.execute(
                f"SELECT * FROM kafka_partitions{where} ORDER BY topic, partition", args
            ).fetchall()
        return [kr.partition_record(row) for row in found]

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
                raise kr.unknown_partition(topic, partition)

    # --- remote segments ------------------------------------------------------------------
    def start_copy(self, segment: NewRemoteSegment, now_ms: int) -> RemoteSegmentRecord:
        kr.check_new_segment(segment)
        with self._db.write() as conn:
            if not conn.execute(
                "SELECT 1 FROM kafka_partitions WHERE topic = ? AND partition = ?",
                (segment.topic, segment.partition),
            ).fetchone():
                raise kr.unknown_partition(segment.topic, segment.partition)
            if conn.execute(
                "SELECT 1 FROM kafka_remote_segments WHERE segment_id = ?", (segment.segment_id,)
            ).fetchone():
                raise kr.segment_exists(segment.segment_id)
            taken = conn.execute(kr.overlap_query(SQLITE), kr.overlap_args(segment)).fetchone()
            if taken is not None:
                raise kr.copy_overlaps(segment, taken)
            conn.execute(_INSERT_SEGMENT, kr.segment_values(segment, now_ms))
            return self._get(conn, segment.segment_id)

    @contextmanager
    def partition_lock(self, topic: str, partition: int) -> Iterator[bool]:
        """An ``fcntl.flock`` on ``<home>/locks/kafka-upload-<sha256>.lock`` beside the database:
        the kernel releases it when the process dies. Every uploader of this database runs on
        this host (a shared store across hosts is PostgreSQL's)."""
        lock_dir = self.path.parent / "locks"
        lock_dir.mkdir(parents=True, exist_ok=True)
        digest = hashlib.sha256(f"{topic}\0{partition}".encode()).hexdigest()[:32]
        path = lock_dir / f"kafka-upload-{digest}.lock"
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                yield False
                return
            yield True
        finally:
            os.close(fd)

    def _get(self, conn: sqlite3.Connection, segment_id: str) -> RemoteSegmentRecord:
        row = conn.execute(
            "SELECT * FROM kafka_remote_segments WHERE segment_id = ?", (segment_id,)
        ).fetchone()
        return kr.need_segment(row, segment_id)

    def _move(
        self,
        conn: sqlite3.Connection,
        segment_id: str,
        target: RemoteSegmentState,
        now_ms: int,
        extra: str = "",
        args: tuple[object, ...] = (),
    ) -> RemoteSegmentRecord:
        kr.check_transition(self._get(conn, segment_id), target)
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
        where, args = kr.segment_filter(SQLITE, topic, partition, states)
        with self._db.read() as conn:
            found = conn.execute(
                f"SELECT * FROM kafka_remote_segments{where}{kr.SEGMENT_ORDER}", args
            ).fetchall()
        return [kr.segment_record(row) for row in found]

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
        kr.check_gap(start_offset, end_offset)
        gap = KafkaGap(topic, partition, start_offset, end_offset, now_ms, reason)
        with self._db.write() as conn:
            conn.execute(
                "INSERT INTO kafka_gaps (topic, partition, start_offset, end_offset, "
                "recorded_ms, reason) VALUES (?, ?, ?, ?, ?, ?)",
                (topic, partition, start_offset, end_offset, now_ms, reason),
            )
        return gap

    def list_gaps(self, topic: str | None = None) -> list[KafkaGap]:
        where, args = kr.topic_filter(SQLITE, topic)
        with self._db.read() as conn:
            found = conn.execute(
                f"SELECT * FROM kafka_gaps{where} ORDER BY topic, partition, start_offset", args
            ).fetchall()
        return [kr.gap_record(row) for row in found]

    def set_retention(self, retention: KafkaRetention) -> KafkaRetention:
        values = kr.retention_values(retention)
        with self._db.write() as conn:
            conn.execute(
                "INSERT INTO kafka_retention (topic, retention_ms, retention_bytes) "
                "VALUES (?, ?, ?) ON CONFLICT (topic) DO UPDATE SET "
                "retention_ms = excluded.retention_ms, retention_bytes = excluded.retention_bytes",
                values,
            )
        return KafkaRetention(*values)

    def get_retention(self, topic: str) -> KafkaRetention:
        with self._db.read() as conn:
            row = conn.execute("SELECT * FROM kafka_retention WHERE topic = ?", (topic,)).fetchone()
        return kr.retention_record(topic, row)

    # --- the key scheme (spec/kafka-segments.md, "Names") ------------------------------------
    def get_key_scheme(self) -> KafkaKeyScheme | None:
        with self._db.read() as conn:
            row = conn.execute("SELECT * FROM kafka_key_scheme WHERE id = 1").fetchone()
        return kr.key_scheme(row)

    def claim_key_scheme(self, scheme: KafkaKeyScheme) -> KafkaKeyScheme:
        with self._db.write() as conn:
            conn.execute(
                "INSERT INTO kafka_key_scheme (id, prefix, hash_prefix_len, cluster, "
                "entropy_bits) VALUES (?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING",
                kr.key_scheme_values(scheme),
            )
            row = conn.execute("SELECT * FROM kafka_key_scheme WHERE id = 1").fetchone()
        found = kr.key_scheme(row)
        assert found is not None  # inserted above, or there already
        return found

    # --- transform policies (spec/transforms.md §8) ----------------------------------------
    def set_topic_transform(self, topic: str, policy: TransformPolicy) -> TransformPolicy:
        with self._db.write() as conn:
            conn.execute(
                "INSERT INTO kafka_topic_transforms (topic, compression, level, encryption, "
                "key_id) VALUES (?, ?, ?, ?, ?) ON CONFLICT (topic) DO UPDATE SET "
                "compression = excluded.compression, level = excluded.level, "
                "encryption = excluded.encryption, key_id = excluded.key_id",
                kr.transform_values(topic, policy),
            )
        return policy

    def get_topic_transform(self, topic: str) -> TransformPolicy | None:
        with self._db.read() as conn:
            row = conn.execute(
                "SELECT * FROM kafka_topic_transforms WHERE topic = ?", (topic,)
            ).fetchone()
        return kr.transform_policy(row)

    def remove_topic_transform(self, topic: str) -> bool:
        with self._db.write() as conn:
            gone = conn.execute("DELETE FROM kafka_topic_transforms WHERE topic = ?", (topic,))
            return gone.rowcount > 0


__all__ = ["DELETE_FINISHED", "SqliteKafkaMetadataStore"]
