"""The KafkaMetadataStore's partitions, segments, gaps, retention, key scheme and transforms,
written once for SQLite and PostgreSQL.

This module owns the statements and the algorithm of every
:class:`~offloader.metadata.kafka_base.KafkaMetadataStore` method but the partition upload lock,
over a backend's transactions (:class:`~offloader.metadata.statements.Transactions`): the SQLite
store (:mod:`offloader.metadata.sqlite.kafka`, whose upload lock is a lock file) and the
PostgreSQL one (:mod:`offloader.metadata.postgres.kafka`, a session advisory lock) only open
their database and hold that lock. Every change is one write transaction (SQLite
``BEGIN IMMEDIATE``, the database's write lock; PostgreSQL READ COMMITTED); on PostgreSQL the
state machine's check-then-move holds the segment's row lock (``FOR UPDATE``), and
``start_copy`` holds the partition's row lock while it checks that no live copy holds its
offsets (one copy per range; the unique index ``kafka_segments_one_copy`` backs it).
``finish_copy`` moves the state and the partition's watermark (never backwards: ``max`` /
``greatest``) in the same transaction. The checks, errors, filters and row mapping are in
:mod:`offloader.metadata.kafka_rules`.
"""

from __future__ import annotations

from collections.abc import Sequence

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
    SegmentChecks,
)
from offloader.metadata.statements import Executor, SqlStore, Transactions, marks
from offloader.policies import TransformPolicy

_INSERT_SEGMENT = (
    f"INSERT INTO kafka_remote_segments ({', '.join(kr.SEGMENT_COLUMNS)}) "
    f"VALUES ({marks(len(kr.SEGMENT_COLUMNS))}) "
    "ON CONFLICT (segment_id) DO NOTHING RETURNING segment_id"
)


class SqlKafkaMetadataStore(SqlStore):
    """The :class:`~offloader.metadata.kafka_base.KafkaMetadataStore` methods over ``_db``
    (see the module docstring); a backend adds ``partition_lock``."""

    _db: Transactions

    # --- partitions -----------------------------------------------------------------------
    def ensure_partition(
        self, topic: str, partition: int, topic_id: str, now_ms: int, *, watermark: int = -1
    ) -> KafkaPartitionRecord:
        with self._db.writing() as ex:
            ex.run(
                "INSERT INTO kafka_partitions (topic, partition, topic_id, watermark, updated_ms)"
                " VALUES (?, ?, ?, ?, ?) ON CONFLICT (topic, partition) DO NOTHING",
                (topic, partition, topic_id, watermark, now_ms),
            )
            row = ex.one(
                "SELECT * FROM kafka_partitions WHERE topic = ? AND partition = ?",
                (topic, partition),
            )
            assert row is not None  # inserted above, or there already
            kr.check_topic_id(row["topic_id"], topic, partition, topic_id)
            return kr.partition_record(row)

    def get_partition(self, topic: str, partition: int) -> KafkaPartitionRecord | None:
        with self._db.reading() as ex:
            row = ex.one(
                "SELECT * FROM kafka_partitions WHERE topic = ? AND partition = ?",
                (topic, partition),
            )
        return None if row is None else kr.partition_record(row)

    def list_partitions(self, topic: str | None = None) -> list[KafkaPartitionRecord]:
        with self._db.reading() as ex:
            where, args = kr.topic_filter(ex.dialect, topic)
            sql = f"SELECT * FROM kafka_partitions{where} ORDER BY topic, partition"
            found = ex.all(sql, args)
        return [kr.partition_record(row) for row in found]

    def set_partition_error(
        self, topic: str, partition: int, error: str | None, now_ms: int
    ) -> None:
        with self._db.writing() as ex:
            changed = ex.run(
                "UPDATE kafka_partitions SET last_error = ?, updated_ms = ? "
                "WHERE topic = ? AND partition = ?",
                (error, now_ms, topic, partition),
            )
            if changed == 0:
                raise kr.unknown_partition(topic, partition)

    # --- remote segments ------------------------------------------------------------------
    def start_copy(self, segment: NewRemoteSegment, now_ms: int) -> RemoteSegmentRecord:
        kr.check_new_segment(segment)
        with self._db.writing() as ex:
            lock = ex.dialect.lock("FOR UPDATE")
            part = ex.one(
                f"SELECT topic_id FROM kafka_partitions WHERE topic = ? AND partition = ?{lock}",
                (segment.topic, segment.partition),
            )
            if part is None:
                raise kr.unknown_partition(segment.topic, segment.partition)
            # the partition row's lock (PostgreSQL; SQLite's write lock covers the database)
            # orders the start_copy calls of one partition: the check sees every live copy a
            # concurrent one committed
            exists = "SELECT 1 FROM kafka_remote_segments WHERE segment_id = ?"
            if ex.one(exists, (segment.segment_id,)) is not None:
                raise kr.segment_exists(segment.segment_id)
            taken = ex.one(kr.overlap_query(ex.dialect), kr.overlap_args(segment))
            if taken is not None:
                raise kr.copy_overlaps(segment, taken)
            if ex.one(_INSERT_SEGMENT, kr.segment_values(segment, now_ms)) is None:
                raise kr.segment_exists(segment.segment_id)
            return self._get(ex, segment.segment_id)

    def _get(self, ex: Executor, segment_id: str, *, lock: bool = False) -> RemoteSegmentRecord:
        suffix = ex.dialect.lock("FOR UPDATE") if lock else ""
        row = ex.one(
            "SELECT * FROM kafka_remote_segments WHERE segment_id = ?" + suffix, (segment_id,)
        )
        return kr.need_segment(row, segment_id)

    def _move(
        self,
        ex: Executor,
        segment_id: str,
        target: RemoteSegmentState,
        now_ms: int,
        extra: str = "",
        args: tuple[object, ...] = (),
    ) -> RemoteSegmentRecord:
        kr.check_transition(self._get(ex, segment_id, lock=True), target)
        ex.run(
            f"UPDATE kafka_remote_segments SET state = ?, updated_ms = ?{extra} "
            "WHERE segment_id = ?",
            (target, now_ms, *args, segment_id),
        )
        return self._get(ex, segment_id)

    def finish_copy(
        self,
        segment_id: str,
        now_ms: int,
        *,
        log_crc32c: int | None = None,
        checks: SegmentChecks | None = None,
        max_timestamp: int | None = None,
    ) -> RemoteSegmentRecord:
        with self._db.writing() as ex:
            record = self._move(
                ex,
                segment_id,
                COPY_FINISHED,
                now_ms,
                ", log_crc32c = ?, checks = ?, max_timestamp = coalesce(?, max_timestamp)",
                (log_crc32c, kr.checks_json(checks), max_timestamp),
            )
            ex.run(
                f"UPDATE kafka_partitions SET watermark = {ex.dialect.greatest}(watermark, ?), "
                "updated_ms = ?, last_error = NULL WHERE topic = ? AND partition = ?",
                (record.end_offset, now_ms, record.topic, record.partition),
            )
            return record

    def set_segment_checks(
        self, segment_id: str, checks: SegmentChecks, now_ms: int
    ) -> RemoteSegmentRecord:
        with self._db.writing() as ex:
            kr.check_checks_update(self._get(ex, segment_id, lock=True))
            ex.run(
                "UPDATE kafka_remote_segments SET checks = ?, updated_ms = ? WHERE segment_id = ?",
                (kr.checks_json(checks), now_ms, segment_id),
            )
            return self._get(ex, segment_id)

    def start_delete(
        self, segment_id: str, now_ms: int, *, error: str | None = None
    ) -> RemoteSegmentRecord:
        with self._db.writing() as ex:
            extra = ", error = coalesce(?, error)"
            return self._move(ex, segment_id, DELETE_STARTED, now_ms, extra, (error,))

    def finish_delete(self, segment_id: str, now_ms: int) -> RemoteSegmentRecord:
        with self._db.writing() as ex:
            return self._move(ex, segment_id, DELETE_FINISHED, now_ms)

    def get_segment(self, segment_id: str) -> RemoteSegmentRecord:
        with self._db.reading() as ex:
            return self._get(ex, segment_id)

    def list_segments(
        self,
        topic: str | None = None,
        partition: int | None = None,
        *,
        states: Sequence[RemoteSegmentState] | None = None,
    ) -> list[RemoteSegmentRecord]:
        with self._db.reading() as ex:
            where, args = kr.segment_filter(ex.dialect, topic, partition, states)
            sql = f"SELECT * FROM kafka_remote_segments{where}{kr.SEGMENT_ORDER}"
            found = ex.all(sql, args)
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
        with self._db.writing() as ex:
            ex.run(
                "INSERT INTO kafka_gaps (topic, partition, start_offset, end_offset, "
                "recorded_ms, reason) VALUES (?, ?, ?, ?, ?, ?)",
                (topic, partition, start_offset, end_offset, now_ms, reason),
            )
        return KafkaGap(topic, partition, start_offset, end_offset, now_ms, reason)

    def list_gaps(self, topic: str | None = None) -> list[KafkaGap]:
        with self._db.reading() as ex:
            where, args = kr.topic_filter(ex.dialect, topic)
            sql = f"SELECT * FROM kafka_gaps{where} ORDER BY topic, partition, start_offset, seq"
            found = ex.all(sql, args)
        return [kr.gap_record(row) for row in found]

    def set_retention(self, retention: KafkaRetention) -> KafkaRetention:
        values = kr.retention_values(retention)
        with self._db.writing() as ex:
            ex.run(
                "INSERT INTO kafka_retention (topic, retention_ms, retention_bytes) "
                "VALUES (?, ?, ?) ON CONFLICT (topic) DO UPDATE SET "
                "retention_ms = excluded.retention_ms, retention_bytes = excluded.retention_bytes",
                values,
            )
        return KafkaRetention(*values)

    def get_retention(self, topic: str) -> KafkaRetention:
        with self._db.reading() as ex:
            row = ex.one("SELECT * FROM kafka_retention WHERE topic = ?", (topic,))
        return kr.retention_record(topic, row)

    # --- the key scheme (spec/kafka-segments.md, "Names") ------------------------------------
    def get_key_scheme(self) -> KafkaKeyScheme | None:
        with self._db.reading() as ex:
            row = ex.one("SELECT * FROM kafka_key_scheme WHERE id = 1", ())
        return kr.key_scheme(row)

    def claim_key_scheme(self, scheme: KafkaKeyScheme) -> KafkaKeyScheme:
        with self._db.writing() as ex:
            ex.run(
                "INSERT INTO kafka_key_scheme (id, prefix, hash_prefix_len, cluster, "
                "entropy_bits) VALUES (?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING",
                kr.key_scheme_values(scheme),
            )
            row = ex.one("SELECT * FROM kafka_key_scheme WHERE id = 1", ())
        found = kr.key_scheme(row)
        assert found is not None  # inserted above, or there already
        return found

    # --- transform policies (spec/transforms.md §8) ----------------------------------------
    def set_topic_transform(self, topic: str, policy: TransformPolicy) -> TransformPolicy:
        with self._db.writing() as ex:
            ex.run(
                "INSERT INTO kafka_topic_transforms (topic, compression, level, encryption, "
                "key_id) VALUES (?, ?, ?, ?, ?) ON CONFLICT (topic) DO UPDATE SET "
                "compression = excluded.compression, level = excluded.level, "
                "encryption = excluded.encryption, key_id = excluded.key_id",
                kr.transform_values(topic, policy),
            )
        return policy

    def get_topic_transform(self, topic: str) -> TransformPolicy | None:
        with self._db.reading() as ex:
            row = ex.one("SELECT * FROM kafka_topic_transforms WHERE topic = ?", (topic,))
        return kr.transform_policy(row)

    def remove_topic_transform(self, topic: str) -> bool:
        with self._db.writing() as ex:
            return ex.run("DELETE FROM kafka_topic_transforms WHERE topic = ?", (topic,)) > 0


__all__ = ["DELETE_FINISHED", "SqlKafkaMetadataStore"]
