"""PgKafkaMetadataStore: the KafkaMetadataStore on the shared PostgreSQL database.

The Kafka tier's tables of :mod:`offloader.metadata.pg_schema`, queried over its own connection
(:class:`~offloader.metadata.pg_db.PgDatabase`); rows become records through the SQLite
backend's mapping. Every change is one READ COMMITTED transaction; the state machine's
check-then-move holds the segment's row lock (``FOR UPDATE``), and ``finish_copy`` moves the
state and the partition's watermark (``greatest``: never backwards) in the same transaction.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from offloader.errors import AlreadyExists, InvalidLedgerState, NotFound, OffloadConflict
from offloader.metadata import pg_rows as pg
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
from offloader.metadata.kafka_sqlite import partition_record, segment_record, transform_policy
from offloader.metadata.pg_db import DEFAULT_BUSY_TIMEOUT_S, Cursor, PgDatabase
from offloader.policies import TransformPolicy


class PgKafkaMetadataStore:
    """The shared :class:`~offloader.metadata.kafka_base.KafkaMetadataStore`."""

    def __init__(self, url: str, *, busy_timeout_s: float = DEFAULT_BUSY_TIMEOUT_S) -> None:
        self.url = url
        self._db = PgDatabase(url, busy_timeout_s=busy_timeout_s)

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> PgKafkaMetadataStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # --- partitions -----------------------------------------------------------------------
    def ensure_partition(
        self, topic: str, partition: int, topic_id: str, now_ms: int, *, watermark: int = -1
    ) -> KafkaPartitionRecord:
        with self._db.write() as cur:
            cur.execute(
                "INSERT INTO kafka_partitions (topic, partition, topic_id, watermark, updated_ms)"
                " VALUES (%s, %s, %s, %s, %s) ON CONFLICT (topic, partition) DO NOTHING",
                (topic, partition, topic_id, watermark, now_ms),
            )
            row = pg.one(
                cur,
                "SELECT * FROM kafka_partitions WHERE topic = %s AND partition = %s",
                (topic, partition),
            )
            assert row is not None  # inserted above, or there already
            if row["topic_id"] != topic_id:
                raise OffloadConflict(
                    f"{topic}-{partition} was recorded with topic id {row['topic_id']}, the "
                    f"log directory has {topic_id}: the topic was re-created"
                )
            return partition_record(row)

    def get_partition(self, topic: str, partition: int) -> KafkaPartitionRecord | None:
        with self._db.read() as cur:
            row = pg.one(
                cur,
                "SELECT * FROM kafka_partitions WHERE topic = %s AND partition = %s",
                (topic, partition),
            )
        return None if row is None else partition_record(row)

    def list_partitions(self, topic: str | None = None) -> list[KafkaPartitionRecord]:
        sql = "SELECT * FROM kafka_partitions"
        args: tuple[object, ...] = ()
        if topic is not None:
            sql, args = sql + " WHERE topic = %s", (topic,)
        with self._db.read() as cur:
            found = pg.all_rows(cur, sql + " ORDER BY topic, partition", args)
        return [partition_record(row) for row in found]

    def set_partition_error(
        self, topic: str, partition: int, error: str | None, now_ms: int
    ) -> None:
        with self._db.write() as cur:
            cur.execute(
                "UPDATE kafka_partitions SET last_error = %s, updated_ms = %s "
                "WHERE topic = %s AND partition = %s",
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
        with self._db.write() as cur:
            part = pg.one(
                cur,
                "SELECT topic_id FROM kafka_partitions WHERE topic = %s AND partition = %s "
                "FOR KEY SHARE",
                (s.topic, s.partition),
            )
            if part is None:
                raise NotFound(f"Kafka partition {s.topic}-{s.partition} is not known")
            inserted = pg.one(
                cur,
                "INSERT INTO kafka_remote_segments (segment_id, topic, partition, topic_id, "
                "base_offset, end_offset, max_timestamp, size_bytes, leader_epochs, "
                "object_keys, state, started_ms, updated_ms) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) "
                "ON CONFLICT (segment_id) DO NOTHING RETURNING segment_id",
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
            if inserted is None:
                raise AlreadyExists(f"remote segment {s.segment_id} already exists")
            return self._get(cur, s.segment_id)

    def _get(self, cur: Cursor, segment_id: str, *, lock: bool = False) -> RemoteSegmentRecord:
        suffix = " FOR UPDATE" if lock else ""
        row = pg.one(
            cur, "SELECT * FROM kafka_remote_segments WHERE segment_id = %s" + suffix, (segment_id,)
        )
        if row is None:
            raise NotFound(f"remote segment {segment_id} does not exist")
        return segment_record(row)

    def _move(
        self,
        cur: Cursor,
        segment_id: str,
        target: RemoteSegmentState,
        now_ms: int,
        extra: str = "",
        args: tuple[object, ...] = (),
    ) -> RemoteSegmentRecord:
        current = self._get(cur, segment_id, lock=True)
        if target not in ALLOWED_TRANSITIONS[current.state]:
            raise InvalidLedgerState(
                f"remote segment {segment_id} is {current.state}; it cannot become {target}"
            )
        cur.execute(
            f"UPDATE kafka_remote_segments SET state = %s, updated_ms = %s{extra} "
            "WHERE segment_id = %s".encode(),
            (target, now_ms, *args, segment_id),
        )
        return self._get(cur, segment_id)

    def finish_copy(
        self, segment_id: str, now_ms: int, *, log_crc32c: int | None = None
    ) -> RemoteSegmentRecord:
        with self._db.write() as cur:
            record = self._move(
                cur, segment_id, COPY_FINISHED, now_ms, ", log_crc32c = %s", (log_crc32c,)
            )
            cur.execute(
                "UPDATE kafka_partitions SET watermark = greatest(watermark, %s), "
                "updated_ms = %s, last_error = NULL WHERE topic = %s AND partition = %s",
                (record.end_offset, now_ms, record.topic, record.partition),
            )
            return record

    def start_delete(
        self, segment_id: str, now_ms: int, *, error: str | None = None
    ) -> RemoteSegmentRecord:
        with self._db.write() as cur:
            return self._move(
                cur,
                segment_id,
                DELETE_STARTED,
                now_ms,
                ", error = coalesce(%s, error)",
                (error,),
            )

    def finish_delete(self, segment_id: str, now_ms: int) -> RemoteSegmentRecord:
        with self._db.write() as cur:
            return self._move(cur, segment_id, DELETE_FINISHED, now_ms)

    def get_segment(self, segment_id: str) -> RemoteSegmentRecord:
        with self._db.read() as cur:
            return self._get(cur, segment_id)

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
            where.append("topic = %s")
            args.append(topic)
        if partition is not None:
            where.append("partition = %s")
            args.append(partition)
        if states is not None:
            where.append("state = ANY(%s)")
            args.append(list(states))
        sql = "SELECT * FROM kafka_remote_segments"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY topic, partition, base_offset, started_ms, segment_id"
        with self._db.read() as cur:
            found = pg.all_rows(cur, sql, args)
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
        with self._db.write() as cur:
            cur.execute(
                "INSERT INTO kafka_gaps (topic, partition, start_offset, end_offset, "
                "recorded_ms, reason) VALUES (%s, %s, %s, %s, %s, %s)",
                (topic, partition, start_offset, end_offset, now_ms, reason),
            )
        return KafkaGap(topic, partition, start_offset, end_offset, now_ms, reason)

    def list_gaps(self, topic: str | None = None) -> list[KafkaGap]:
        sql = "SELECT * FROM kafka_gaps"
        args: tuple[object, ...] = ()
        if topic is not None:
            sql, args = sql + " WHERE topic = %s", (topic,)
        with self._db.read() as cur:
            found = pg.all_rows(cur, sql + " ORDER BY topic, partition, start_offset, seq", args)
        return [
            KafkaGap(
                r["topic"],
                r["partition"],
                r["start_offset"],
                r["end_offset"],
                r["recorded_ms"],
                r["reason"],
            )
            for r in found
        ]

    def set_retention(self, retention: KafkaRetention) -> KafkaRetention:
        with self._db.write() as cur:
            cur.execute(
                "INSERT INTO kafka_retention (topic, retention_ms, retention_bytes) "
                "VALUES (%s, %s, %s) ON CONFLICT (topic) DO UPDATE SET "
                "retention_ms = excluded.retention_ms, retention_bytes = excluded.retention_bytes",
                (retention.topic, retention.retention_ms, retention.retention_bytes),
            )
        return KafkaRetention(retention.topic, retention.retention_ms, retention.retention_bytes)

    def get_retention(self, topic: str) -> KafkaRetention:
        with self._db.read() as cur:
            row = pg.one(cur, "SELECT * FROM kafka_retention WHERE topic = %s", (topic,))
        if row is None:
            return KafkaRetention(topic)
        return KafkaRetention(topic, row["retention_ms"], row["retention_bytes"])

    # --- transform policies (spec/transforms.md §8) ----------------------------------------
    def set_topic_transform(self, topic: str, policy: TransformPolicy) -> TransformPolicy:
        with self._db.write() as cur:
            cur.execute(
                "INSERT INTO kafka_topic_transforms (topic, compression, level, encryption, "
                "key_id) VALUES (%s, %s, %s, %s, %s) ON CONFLICT (topic) DO UPDATE SET "
                "compression = excluded.compression, level = excluded.level, "
                "encryption = excluded.encryption, key_id = excluded.key_id",
                (topic, policy.compression, policy.level, policy.encryption, policy.key_id),
            )
        return policy

    def get_topic_transform(self, topic: str) -> TransformPolicy | None:
        with self._db.read() as cur:
            row = pg.one(cur, "SELECT * FROM kafka_topic_transforms WHERE topic = %s", (topic,))
        return None if row is None else transform_policy(row)

    def remove_topic_transform(self, topic: str) -> bool:
        with self._db.write() as cur:
            cur.execute("DELETE FROM kafka_topic_transforms WHERE topic = %s", (topic,))
            return bool(cur.rowcount)


__all__ = ["DELETE_FINISHED", "PgKafkaMetadataStore"]
