"""The KafkaMetadataStore contract: every backend (SQLite, PostgreSQL) passes it.

Backends plug in through ``tests/metadata/backends.py`` (a name, a fresh location, an opener).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from formats.kafka.names import KafkaKeyScheme
from formats.kafka.spans import ObjectChecksums
from offloader.errors import AlreadyExists, InvalidLedgerState, NotFound, OffloadConflict
from offloader.metadata.kafka_base import (
    COPY_FINISHED,
    COPY_STARTED,
    DELETE_FINISHED,
    DELETE_STARTED,
    KafkaMetadataStore,
    KafkaRetention,
    NewRemoteSegment,
    SegmentChecks,
)
from offloader.metadata.sqlite.db import MIGRATIONS, SCHEMA_VERSION, Database
from offloader.metadata.sqlite.kafka import SqliteKafkaMetadataStore
from offloader.metadata.sqlite.store import SqliteMetadataStore
from offloader.policies import TransformPolicy
from tests.metadata.backends import BACKENDS

TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAA"
OTHER_ID = "AQEBAQEBAQEBAQEBAQEBAQ"


@pytest.fixture(params=sorted(BACKENDS))
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[KafkaMetadataStore]:
    backend = BACKENDS[request.param]
    opened = backend.open_kafka(backend.new_location(request, tmp_path))
    yield opened
    opened.close()


def _segment(sid: str, base: int, end: int, partition: int = 0) -> NewRemoteSegment:
    return NewRemoteSegment(
        segment_id=sid,
        topic="orders",
        topic_id=TOPIC_ID,
        partition=partition,
        base_offset=base,
        end_offset=end,
        max_timestamp=1000 + end,
        size_bytes=10 * (end - base + 1),
        leader_epochs={0: base, 3: base + 1},
        keys={"log": f"k/{sid}.log", "index": f"k/{sid}.index"},
    )


def test_is_the_protocol(store: KafkaMetadataStore) -> None:
    assert isinstance(store, KafkaMetadataStore)


def test_copy_life_cycle_and_watermark(store: KafkaMetadataStore) -> None:
    part = store.ensure_partition("orders", 0, TOPIC_ID, 1)
    assert part.watermark == -1
    with pytest.raises(NotFound):
        store.start_copy(_segment("a", 0, 9, partition=5), 2)
    started = store.start_copy(_segment("a", 0, 9), 2)
    assert started.state == COPY_STARTED and started.leader_epochs == {0: 0, 3: 1}
    assert started.keys["log"] == "k/a.log"
    # recorded before the upload; the watermark moves only when the copy finishes
    assert store.get_partition("orders", 0).watermark == -1  # type: ignore[union-attr]
    with pytest.raises(AlreadyExists):
        store.start_copy(_segment("a", 0, 9), 3)
    finished = store.finish_copy("a", 4, log_crc32c=77)
    assert (finished.state, finished.log_crc32c, finished.updated_ms) == (COPY_FINISHED, 77, 4)
    assert store.get_partition("orders", 0).watermark == 9  # type: ignore[union-attr]
    with pytest.raises(InvalidLedgerState):
        store.finish_copy("a", 5)
    # an older segment finishing later never moves the watermark back
    store.start_copy(_segment("b", 20, 29), 5)
    store.finish_copy("b", 6)
    store.start_copy(_segment("c", 10, 19), 7)
    store.finish_copy("c", 8)
    assert store.get_partition("orders", 0).watermark == 29  # type: ignore[union-attr]
    assert [s.segment_id for s in store.list_segments("orders", 0)] == ["a", "c", "b"]


def test_delete_path_and_failed_copies(store: KafkaMetadataStore) -> None:
    store.ensure_partition("orders", 0, TOPIC_ID, 1)
    store.start_copy(_segment("a", 0, 9), 2)
    with pytest.raises(InvalidLedgerState):
        store.finish_delete("a", 3)
    # an abandoned copy goes straight to deletion (KIP-405 has no FAILED state)
    deleting = store.start_delete("a", 3, error="corrupt batch")
    assert (deleting.state, deleting.error) == (DELETE_STARTED, "corrupt batch")
    with pytest.raises(InvalidLedgerState):
        store.finish_copy("a", 4)
    assert store.finish_delete("a", 5).state == DELETE_FINISHED
    assert store.get_partition("orders", 0).watermark == -1  # type: ignore[union-attr]
    with pytest.raises(InvalidLedgerState):
        store.start_delete("a", 6)
    with pytest.raises(NotFound):
        store.get_segment("nope")
    assert [s.segment_id for s in store.list_segments(states=[DELETE_FINISHED])] == ["a"]
    assert store.list_segments(states=[COPY_STARTED]) == []


def test_partitions_errors_gaps_retention(store: KafkaMetadataStore) -> None:
    store.ensure_partition("orders", 1, TOPIC_ID, 1, watermark=99)
    assert store.ensure_partition("orders", 1, TOPIC_ID, 2).watermark == 99
    with pytest.raises(OffloadConflict):
        store.ensure_partition("orders", 1, OTHER_ID, 3)
    store.ensure_partition("clicks", 0, OTHER_ID, 1)
    assert [(p.topic, p.partition) for p in store.list_partitions()] == [
        ("clicks", 0),
        ("orders", 1),
    ]
    store.set_partition_error("orders", 1, "crc mismatch", 4)
    assert store.get_partition("orders", 1).last_error == "crc mismatch"  # type: ignore[union-attr]
    with pytest.raises(NotFound):
        store.set_partition_error("orders", 9, "x", 4)
    assert store.get_partition("orders", 9) is None
    gap = store.record_gap("orders", 1, 100, 149, 5, "segment deleted before upload")
    assert store.list_gaps("orders") == [gap]
    assert store.list_gaps("clicks") == []
    with pytest.raises(InvalidLedgerState):
        store.record_gap("orders", 1, 10, 9, 5, "empty")
    assert store.get_retention("orders") == KafkaRetention("orders", -1, -1)
    store.set_retention(KafkaRetention("orders", 3_600_000, -1))
    store.set_retention(KafkaRetention("orders", 3_600_000, 1 << 30))
    assert store.get_retention("orders") == KafkaRetention("orders", 3_600_000, 1 << 30)


def test_topic_transform_policies(store: KafkaMetadataStore) -> None:
    assert store.get_topic_transform("orders") is None
    policy = TransformPolicy("zstd", 5, "aes-256-gcm", "k1")
    assert store.set_topic_transform("orders", policy) == policy
    assert store.get_topic_transform("orders") == policy
    assert store.get_topic_transform("clicks") is None
    store.set_topic_transform("orders", TransformPolicy())  # the identity is stored too
    assert store.get_topic_transform("orders") == TransformPolicy()
    store.set_topic_transform("clicks", TransformPolicy("zstd"))
    assert store.remove_topic_transform("orders") is True
    assert store.remove_topic_transform("orders") is False
    assert store.get_topic_transform("orders") is None
    assert store.get_topic_transform("clicks") == TransformPolicy("zstd")


def _checks(seed: bytes, transform: str = "none") -> SegmentChecks:
    objects = {
        "log": ObjectChecksums.of(seed * 700, span=1024),
        "index": ObjectChecksums.of(seed * 3),
    }
    return SegmentChecks(objects, transform)


def test_pinned_checks_round_trip_and_are_replaced_only_when_finished(
    store: KafkaMetadataStore,
) -> None:
    store.ensure_partition("orders", 0, TOPIC_ID, 1)
    store.start_copy(_segment("a", 0, 9), 2)
    assert store.get_segment("a").checks is None
    with pytest.raises(InvalidLedgerState):  # not finished yet
        store.set_segment_checks("a", _checks(b"x"), 3)
    pinned = _checks(b"abc", "zstd+aes-256-gcm")
    finished = store.finish_copy(
        "a", 4, log_crc32c=pinned.objects["log"].whole_crc32c, checks=pinned
    )
    assert finished.checks == pinned and store.get_segment("a").checks == pinned
    assert len(pinned.objects["log"].crcs) == 3  # 2100 bytes in 1 KiB spans
    # a re-key: the next .chunks accepted beside the old, then pinned alone
    chunks = ObjectChecksums.of(b"table")
    step = SegmentChecks({**pinned.objects, "chunks": chunks}, pinned.transform, chunks)
    assert store.set_segment_checks("a", step, 5).checks == step
    assert [s.checks for s in store.list_segments("orders", 0)] == [step]
    assert store.get_segment("a").updated_ms == 5
    with pytest.raises(NotFound):
        store.set_segment_checks("nope", step, 6)
    store.start_delete("a", 7)
    with pytest.raises(InvalidLedgerState):
        store.set_segment_checks("a", pinned, 8)


def test_sqlite_migrates_a_version_7_database_keeping_its_segments(tmp_path: Path) -> None:
    """A segment finished before checks were recorded still reads, with no checks."""
    path = tmp_path / "metadata.db"
    Database(path, migrations=MIGRATIONS[:7]).close()
    conn = sqlite3.connect(path)
    conn.execute(
        "INSERT INTO kafka_partitions (topic, partition, topic_id, watermark, updated_ms) "
        "VALUES ('orders', 0, ?, 9, 1)",
        (TOPIC_ID,),
    )
    conn.execute(
        "INSERT INTO kafka_remote_segments (segment_id, topic, partition, topic_id, base_offset,"
        " end_offset, max_timestamp, size_bytes, leader_epochs, object_keys, state, started_ms,"
        " updated_ms, log_crc32c) VALUES ('old', 'orders', 0, ?, 0, 9, 5, 100, '{}', "
        "'{\"log\": \"k/old.log\"}', 'COPY_SEGMENT_FINISHED', 1, 2, 77)",
        (TOPIC_ID,),
    )
    conn.commit()
    conn.close()
    with SqliteKafkaMetadataStore(path) as kafka:
        old = kafka.get_segment("old")
        assert (old.checks, old.log_crc32c, old.keys) == (None, 77, {"log": "k/old.log"})
        kafka.start_copy(_segment("new", 10, 19), 3)
        assert kafka.finish_copy("new", 4, checks=_checks(b"n")).checks == _checks(b"n")
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == len(MIGRATIONS)
    conn.close()


def test_sqlite_migrates_a_version_6_database_to_topic_transforms(tmp_path: Path) -> None:
    path = tmp_path / "metadata.db"
    Database(path, migrations=MIGRATIONS[:6]).close()
    with SqliteKafkaMetadataStore(path) as kafka:
        kafka.set_topic_transform("orders", TransformPolicy(encryption="aes-256-gcm"))
        assert kafka.get_topic_transform("orders") == TransformPolicy(encryption="aes-256-gcm")
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == len(MIGRATIONS)
    conn.close()


def test_sqlite_migrates_a_version_2_database(tmp_path: Path) -> None:
    path = tmp_path / "metadata.db"
    Database(path, migrations=MIGRATIONS[:2]).close()
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 2
    conn.close()
    with SqliteKafkaMetadataStore(path) as kafka, SqliteMetadataStore(path) as meta:
        kafka.ensure_partition("orders", 0, TOPIC_ID, 1)
        meta.create_namespace("t/ns", 1)
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == len(MIGRATIONS)
    conn.close()


@pytest.fixture(params=sorted(BACKENDS))
def two_stores(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[tuple[KafkaMetadataStore, KafkaMetadataStore]]:
    """Two connections to one store (two uploaders)."""
    backend = BACKENDS[request.param]
    location = backend.new_location(request, tmp_path)
    a, b = backend.open_kafka(location), backend.open_kafka(location)
    yield a, b
    a.close()
    b.close()


def test_one_live_copy_per_offset_range(store: KafkaMetadataStore) -> None:
    store.ensure_partition("orders", 0, TOPIC_ID, 1)
    store.start_copy(_segment("a", 0, 9), 2)
    # in flight or finished, a copy holds its offsets: an overlapping one is refused
    for sid, base, end in (("b", 0, 9), ("c", 5, 14), ("d", 9, 9)):
        with pytest.raises(OffloadConflict, match="one copy per offset range"):
            store.start_copy(_segment(sid, base, end), 3)
    store.finish_copy("a", 4)
    with pytest.raises(OffloadConflict):
        store.start_copy(_segment("b", 0, 9), 5)
    # a copy of a segment straddling the watermark answers from its effective start
    straddling = replace(_segment("e", 5, 19), start_offset=10)
    record = store.start_copy(straddling, 6)
    assert (record.base_offset, record.start_offset, record.first_offset) == (5, 10, 10)
    assert store.get_segment("a").first_offset == 0
    with pytest.raises(InvalidLedgerState):  # the start lies inside the segment
        store.start_copy(replace(_segment("f", 30, 39), start_offset=40), 7)
    # once deleted, the offsets may be copied again; other partitions are independent
    store.start_delete("e", 8)
    store.start_copy(_segment("g", 10, 19), 9)
    store.ensure_partition("orders", 1, TOPIC_ID, 1)
    store.start_copy(_segment("h", 0, 9, partition=1), 10)


def test_partition_lock_has_one_holder(
    two_stores: tuple[KafkaMetadataStore, KafkaMetadataStore],
) -> None:
    a, b = two_stores
    with a.partition_lock("orders", 0) as held:
        assert held
        with b.partition_lock("orders", 0) as other:
            assert not other
        with b.partition_lock("orders", 1) as other_partition:
            assert other_partition
    with b.partition_lock("orders", 0) as after:
        assert after  # released with the body


def test_the_first_key_scheme_claimed_wins(
    two_stores: tuple[KafkaMetadataStore, KafkaMetadataStore],
) -> None:
    a, b = two_stores
    assert a.get_key_scheme() is None
    pinterest = KafkaKeyScheme("tiered", cluster="c1", entropy_bits=5)
    assert a.claim_key_scheme(pinterest) == pinterest
    assert b.claim_key_scheme(KafkaKeyScheme(hash_prefix_len=4)) == pinterest
    assert b.get_key_scheme() == pinterest
