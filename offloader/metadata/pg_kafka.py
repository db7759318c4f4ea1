"""PgKafkaMetadataStore: the KafkaMetadataStore on the shared PostgreSQL database.

The Kafka tier's tables of :mod:`offloader.metadata.pg_schema`, queried over its own connection
(:class:`~offloader.metadata.pg_db.PgDatabase`, which translates psycopg's errors). Every change
is one READ COMMITTED transaction; the state machine's check-then-move holds the segment's row
lock (``FOR UPDATE``), and ``finish_copy`` moves the state and the partition's watermark
(``greatest``: never backwards) in the same transaction. ``start_copy`` holds the partition's
row lock while it checks that no live copy holds its offsets (one copy per range; the unique
index ``kafka_segments_one_copy`` backs it); a partition's upload lock is a session advisory
lock. This module holds the PostgreSQL SQL
and locks only: the checks, errors, filters and row mapping it shares with the SQLite backend
are in :mod:`offloader.metadata.kafka_rules`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

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
from offloader.metadata.postgres import db as pg
from offloader.metadata.postgres.db import DEFAULT_BUSY_TIMEOUT_S, Cursor, PgDatabase
from offloader.metadata.rules import POSTGRES
from offloader.policies import TransformPolicy

_INSERT_SEGMENT = (
    f"INSERT INTO kafka_remote_segments ({', '.join(kr.SEGMENT_COLUMNS)}) "
    f"VALUES ({POSTGRES.marks(len(kr.SEGMENT_COLUMNS))}) "
    "ON CONFLICT (segment_id) DO NOTHING RETURNING segment_id"
)


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
            kr.check_topic_id(row["topic_id"], topic, partition, topic_id)
            return kr.partition_record(row)

    def get_partition(self, topic: str, partition: int) -> KafkaPartitionRecord | None:
        with self._db.read() as cur:
            row = pg.one(
                cur,
                "SELECT * FROM kafka_partitions WHERE topic = %s AND partition = %s",
                (topic, partition),
            )
        return None if row is None else kr.partition_record(row)

    def list_partitions(self, topic: str | None = None) -> list[KafkaPartitionRecord]:
        where, args = kr.topic_filter(POSTGRES, topic)
        with self._db.read() as cur:
            sql = f"SELECT * FROM kafka_partitions{where} ORDER BY topic, partition"
            found = pg.all_rows(cur, sql, args)
        return [kr.partition_record(row) for row in found]

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
                raise kr.unknown_partition(topic, partition)

    # --- remote segments ------------------------------------------------------------------
    def start_copy(self, segment: NewRemoteSegment, now_ms: int) -> RemoteSegmentRecord:
        kr.check_new_segment(segment)
        with self._db.write() as cur:
            part = pg.one(
                cur,
                "SELECT topic_id FROM kafka_partitions WHERE topic = %s AND partition = %s "
                "FOR UPDATE",
                (segment.topic, segment.partition),
            )
            if part is None:
                raise kr.unknown_partition(segment.topic, segment.partition)
            # the partition row's lock orders the start_copy calls of one partition: the check
            # sees every live copy a concurrent one committed
            if pg.one(cur, "SELECT 1 FROM kafka_remote_segments WHERE segment_id = %s",
                      (segment.segment_id,)) is not None:  # fmt: skip
                raise kr.segment_exists(segment.segment_id)
            taken = pg.one(cur, kr.overlap_query(POSTGRES), kr.overlap_args(segment))
            if taken is not None:
                raise kr.copy_overlaps(segment, taken)
            if pg.one(cur, _INSERT_SEGMENT, kr.segment_values(segment, now_ms)) is None:
                raise kr.segment_exists(segment.segment_id)
            return self._get(cur, segment.segment_id)

    @contextmanager
    def partition_lock(self, topic: str, partition: int) -> Iterator[bool]:
        """A session advisory lock on a connection of its own (the server releases it when that
        connection ends): one uploader per partition across every home of the store."""
        with self._db.session_lock(f"kafka-upload\x1f{topic}\x1f{partition}", 0.0) as held:
            yield held

    def _get(self, cur: Cursor, segment_id: str, *, lock: bool = False) -> RemoteSegmentRecord:
        suffix = " FOR UPDATE" if lock else ""
        row = pg.one(
            cur, "SELECT * FROM kafka_remote_segments WHERE segment_id = %s" + suffix, (segment_id,)
        )
        return kr.need_segment(row, segment_id)

    def _move(
        self,
        cur: Cursor,
        segment_id: str,
        target: RemoteSegmentState,
        now_ms: int,
        extra: str = "",
        args: tuple[object, ...] = (),
    ) -> RemoteSegmentRecord:
        kr.check_transition(self._get(cur, segment_id, lock=True), target)
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
            extra = ", error = coalesce(%s, error)"
            return self._move(cur, segment_id, DELETE_STARTED, now_ms, extra, (error,))

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
        where, args = kr.segment_filter(POSTGRES, topic, partition, states)
        with self._db.read() as cur:
            sql = f"SELECT * FROM kafka_remote_segments{where}{kr.SEGMENT_ORDER}"
            found = pg.all_rows(cur, sql, args)
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
        with self._db.write() as cur:
            cur.execute(
                "INSERT INTO kafka_gaps (topic, partition, start_offset, end_offset, "
                "recorded_ms, reason) VALUES (%s, %s, %s, %s, %s, %s)",
                (topic, partition, start_offset, end_offset, now_ms, reason),
            )
        return KafkaGap(topic, partition, start_offset, end_offset, now_ms, reason)

    def list_gaps(self, topic: str | None = None) -> list[KafkaGap]:
        where, args = kr.topic_filter(POSTGRES, topic)
        with self._db.read() as cur:
            sql = f"SELECT * FROM kafka_gaps{where} ORDER BY topic, partition, start_offset, seq"
            found = pg.all_rows(cur, sql, args)
        return [kr.gap_record(row) for row in found]

    def set_retention(self, retention: KafkaRetention) -> KafkaRetention:
        values = kr.retention_values(retention)
        with self._db.write() as cur:
            cur.execute(
                "INSERT INTO kafka_retention (topic, retention_ms, retention_bytes) "
                "VALUES (%s, %s, %s) ON CONFLICT (topic) DO UPDATE SET "
                "retention_ms = excluded.retention_ms, retention_bytes = excluded.retention_bytes",
                values,
            )
        return KafkaRetention(*values)

    def get_retention(self, topic: str) -> KafkaRetention:
        with self._db.read() as cur:
            row = pg.one(cur, "SELECT * FROM kafka_retention WHERE topic = %s", (topic,))
        return kr.retention_record(topic, row)

    # --- the key scheme (spec/kafka-segments.md, "Names") ------------------------------------
    def get_key_scheme(self) -> KafkaKeyScheme | None:
        with self._db.read() as cur:
            row = pg.one(cur, "SELECT * FROM kafka_key_scheme WHERE id = 1", ())
        return kr.key_scheme(row)

    def claim_key_scheme(self, scheme: KafkaKeyScheme) -> KafkaKeyScheme:
        with self._db.write() as cur:
            cur.execute(
                "INSERT INTO kafka_key_scheme (id, prefix, hash_prefix_len, cluster, "
                "entropy_bits) VALUES (%s, %s, %s, %s, %s) ON CONFLICT (id) DO NOTHING",
                kr.key_scheme_values(scheme),
            )
            row = pg.one(cur, "SELECT * FROM kafka_key_scheme WHERE id = 1", ())
        found = kr.key_scheme(row)
        assert found is not None  # inserted above, or there already
        return found

    # --- transform policies (spec/transforms.md §8) ----------------------------------------
    def set_topic_transform(self, topic: str, policy: TransformPolicy) -> TransformPolicy:
        with self._db.write() as cur:
            cur.execute(
                "INSERT INTO kafka_topic_transforms (topic, compression, level, encryption, "
                "key_id) VALUES (%s, %s, %s, %s, %s) ON CONFLICT (topic) DO UPDATE SET "
                "compression = excluded.compression, level = excluded.level, "
                "encryption = excluded.encryption, key_id = excluded.key_id",
                kr.transform_values(topic, policy),
            )
        return policy

    def get_topic_transform(self, topic: str) -> TransformPolicy | None:
        with self._db.read() as cur:
            row = pg.one(cur, "SELECT * FROM kafka_topic_transforms WHERE topic = %s", (topic,))
        return kr.transform_policy(row)

    def remove_topic_transform(self, topic: str) -> bool:
        with self._db.write() as cur:
            cur.execute("DELETE FROM kafka_topic_transforms WHERE topic = %s", (topic,))
            return bool(cur.rowcount)


__all__ = ["DELETE_FINISHED", "PgKafkaMetadataStore"]
