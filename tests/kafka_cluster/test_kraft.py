"""The KRaft view (offloader/kafka_cluster/kraft.py) over metadata logs and snapshots built
with the project's encoder from Kafka's schemas (tests/kafka_cluster/kraft_writer.py): the
snapshot then the log after it, leader changes and epochs, a topic deleted and re-created with
a new id, configs changed while the view is open, unknown records and control batches skipped,
metadata transactions, segment rolls, new snapshots, truncations and corrupt tails."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from formats.kafka.codecs import GZIP, ZSTD
from formats.kafka.encode import NewRecord, encode_batch
from formats.kafka.metadata_records import (
    RESOURCE_BROKER,
    RESOURCE_TOPIC,
    AbortTransactionRecord,
    BeginTransactionRecord,
    ConfigRecord,
    EndTransactionRecord,
    MetadataRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RemoveTopicRecord,
    TopicRecord,
    UnknownMetadataRecord,
    encode_metadata_record,
)
from formats.kafka.names import uuid_to_kafka
from offloader.errors import KafkaMetadataError, KafkaMetadataUnavailable
from offloader.kafka_cluster.base import (
    KAFKA_DEFAULTS,
    KafkaClusterView,
    PartitionState,
    TopicState,
)
from offloader.kafka_cluster.kraft import (
    METADATA_PARTITION_DIR,
    KRaftClusterView,
    snapshot_file_name,
)
from tests.kafka_cluster.kraft_writer import (
    TIMESTAMP,
    KRaftClusterWriter,
    KRaftLog,
    feature_level,
    no_op,
)

A = bytes.fromhex("0a" * 16)
B = bytes.fromhex("0b" * 16)
C = bytes.fromhex("0c" * 16)


def topic(name: str, tid: bytes, replicas: dict[int, tuple[int, ...]]) -> list[MetadataRecord]:
    out: list[MetadataRecord] = [TopicRecord(name, tid)]
    for number, reps in replicas.items():
        out.append(PartitionRecord(number, tid, reps, reps, leader=reps[0], leader_epoch=0))
    return out


def kid(raw: bytes) -> str:
    import uuid

    return uuid_to_kafka(uuid.UUID(bytes=raw))


@pytest.fixture
def mlog(tmp_path: Path) -> KRaftLog:
    return KRaftLog(tmp_path / "meta")


def test_it_is_a_cluster_view(mlog: KRaftLog) -> None:
    view: KafkaClusterView = KRaftClusterView(mlog.root)
    assert view.location == f"kraft:{mlog.root}"
    assert view.topics() == []


def test_the_partition_directory_itself_is_accepted(mlog: KRaftLog) -> None:
    mlog.append(topic("t", A, {0: (1, 2)}))
    view = KRaftClusterView(mlog.root / METADATA_PARTITION_DIR)
    assert view.topics() == ["t"]


def test_snapshot_then_the_log_after_it(mlog: KRaftLog) -> None:
    mlog.append([feature_level("metadata.version", 21)])
    mlog.append(topic("orders", A, {0: (1, 2, 3), 1: (2, 3, 1)}))
    mlog.append([ConfigRecord(RESOURCE_TOPIC, "orders", "remote.storage.enable", "true")])
    mlog.append([PartitionChangeRecord(0, A, leader=2, isr=(2, 3))])
    mlog.roll()
    snap = mlog.write_snapshot()
    mlog.append([PartitionChangeRecord(1, A, leader=3)])
    mlog.append(topic("events", B, {0: (3,)}))
    mlog.delete_segments_before(snap_offset := int(snap.name[:20]))
    assert not (mlog.dir / "00000000000000000000.log").exists()
    view = KRaftClusterView(mlog.root)
    assert view.snapshot is not None and view.snapshot.end_offset == snap_offset
    assert view.next_offset == mlog.next_offset
    assert view.topics() == ["events", "orders"]
    assert view.partition("orders", 0) == PartitionState("orders", 0, 2, 1, (1, 2, 3), (2, 3))
    p1 = view.partition("orders", 1)
    assert p1 is not None and (p1.leader, p1.leader_epoch) == (3, 1)
    orders = view.topic("orders")
    assert orders is not None and orders.topic_id == kid(A)
    assert orders.config.remote_storage_enable
    assert orders.config.overrides == frozenset({"remote.storage.enable"})


def test_records_inside_the_snapshot_are_not_applied_twice(mlog: KRaftLog) -> None:
    mlog.append(topic("t", A, {0: (1, 2, 3)}))  # offsets 0-1
    mlog.append(
        [PartitionChangeRecord(0, A, leader=2), PartitionChangeRecord(0, A, leader=3)]
    )  # offsets 2-3: the snapshot below holds offset 2, not 3
    state_at_3: list[MetadataRecord] = [
        TopicRecord("t", A),
        PartitionRecord(0, A, (1, 2, 3), (1, 2, 3), leader=2, leader_epoch=1),
    ]
    mlog.write_snapshot(state_at_3, end_offset=3)
    view = KRaftClusterView(mlog.root)
    p = view.partition("t", 0)
    assert p is not None and (p.leader, p.leader_epoch) == (3, 2)


def test_leader_changes_bump_the_epoch_and_minus_one_means_no_leader(mlog: KRaftLog) -> None:
    mlog.append(topic("t", A, {0: (1, 2, 3)}))
    view = KRaftClusterView(mlog.root)
    mlog.append([PartitionChangeRecord(0, A, isr=(1, 2))])  # ISR only: same leader and epoch
    view.refresh()
    p = view.partition("t", 0)
    assert p is not None and (p.leader, p.leader_epoch, p.isr) == (1, 0, (1, 2))
    mlog.append([PartitionChangeRecord(0, A, leader=2)])
    view.refresh()
    p = view.partition("t", 0)
    assert p is not None and (p.leader, p.leader_epoch) == (2, 1)
    mlog.append([PartitionChangeRecord(0, A, leader=-1, isr=())])
    view.refresh()
    p = view.partition("t", 0)
    assert p is not None and (p.leader, p.leader_epoch, p.isr) == (None, 2, ())
    mlog.append([PartitionChangeRecord(0, A, leader=3, isr=(3,), replicas=(3, 4))])
    view.refresh()
    assert view.partition("t", 0) == PartitionState("t", 0, 3, 3, (3, 4), (3,))


def test_a_topic_deleted_and_recreated_gets_the_new_id(mlog: KRaftLog) -> None:
    mlog.append(topic("t", A, {0: (1,), 1: (2,)}))
    mlog.append([ConfigRecord(RESOURCE_TOPIC, "t", "retention.ms", "9")])
    view = KRaftClusterView(mlog.root)
    mlog.append([RemoveTopicRecord(A)])
    mlog.append([PartitionChangeRecord(0, A, leader=2)])  # for the old id: nothing to change
    view.refresh()
    assert view.topic("t") is None and view.partition("t", 0) is None
    mlog.append(topic("t", B, {0: (3,)}))
    view.refresh()
    t = view.topic("t")
    assert t is not None and t.topic_id == kid(B) and list(t.partitions) == [0]
    assert t.config.retention_ms == int(KAFKA_DEFAULTS["retention.ms"])
    p = view.partition("t", 0)
    assert p is not None and (p.leader, p.leader_epoch) == (3, 0)
    # and through a snapshot taken after the re-creation
    mlog.write_snapshot()
    again = KRaftClusterView(mlog.root)
    assert again.topic("t") == view.topic("t")


def test_a_config_change_appended_while_the_view_is_open(mlog: KRaftLog) -> None:
    mlog.append(topic("t", A, {0: (1,)}))
    view = KRaftClusterView(mlog.root)
    before = view.topic("t")
    assert before is not None and before.config.retention_ms == 604800000
    mlog.append([ConfigRecord(RESOURCE_TOPIC, "t", "cleanup.policy", "compact,delete")])
    mlog.append([ConfigRecord(RESOURCE_BROKER, "", "log.retention.hours", "2")])
    mlog.append([ConfigRecord(RESOURCE_BROKER, "7", "log.retention.ms", "1")])  # one broker's
    view.refresh()
    t = view.topic("t")
    assert t is not None and t.config.compacted
    assert t.config.retention_ms == 2 * 3_600_000
    assert t.config.overrides == frozenset({"cleanup.policy"})
    mlog.append([ConfigRecord(RESOURCE_TOPIC, "t", "cleanup.policy", None)])
    mlog.append([ConfigRecord(RESOURCE_BROKER, "", "log.retention.ms", "5000")])
    view.refresh()
    t = view.topic("t")
    assert t is not None and not t.config.compacted and t.config.retention_ms == 5000
    assert t.config.overrides == frozenset()


def test_configs_written_before_the_topic_record_count(mlog: KRaftLog) -> None:
    mlog.append(
        [
            ConfigRecord(RESOURCE_TOPIC, "t", "remote.storage.enable", "true"),
            *topic("t", A, {0: (1,)}),
        ]
    )
    t = KRaftClusterView(mlog.root).topic("t")
    assert t is not None and t.config.remote_storage_enable


def test_unknown_records_and_control_batches_are_skipped(mlog: KRaftLog) -> None:
    mlog.append([feature_level("metadata.version", 21), no_op()])
    mlog.append_control()
    mlog.append(
        [
            UnknownMetadataRecord(17, 3, b"\xff" * 40),  # RegisterBrokerRecord, any body
            *topic("t", A, {0: (1, 2)}),
            UnknownMetadataRecord(999, 0, b"future"),
        ]
    )
    mlog.append_control(kind=6, value=b"\x00\x00 not a voters record we read")
    change = PartitionChangeRecord(0, A, leader=2, unknown_tags=((77, b"x"),))
    tagged = encode_metadata_record(change)
    batch = encode_batch([NewRecord(TIMESTAMP, None, tagged)], base_offset=mlog.next_offset)
    mlog.append_raw(batch, 1)
    view = KRaftClusterView(mlog.root)
    p = view.partition("t", 0)
    assert p is not None and (p.leader, p.leader_epoch) == (2, 1)
    assert view.next_offset == mlog.next_offset


def test_an_aborted_metadata_transaction_is_not_applied(mlog: KRaftLog) -> None:
    mlog.append(topic("t", A, {0: (1,)}))
    view = KRaftClusterView(mlog.root)
    mlog.append([BeginTransactionRecord("migration"), *topic("ghost", B, {0: (1,)})])
    mlog.append([PartitionChangeRecord(0, A, leader=5)])
    view.refresh()
    assert view.topics() == ["t"]  # held until the transaction ends
    p = view.partition("t", 0)
    assert p is not None and p.leader == 1
    mlog.append([AbortTransactionRecord("because")])
    view.refresh()
    assert view.topics() == ["t"]
    p = view.partition("t", 0)
    assert p is not None and p.leader == 1
    mlog.append([BeginTransactionRecord(None), *topic("real", C, {0: (2,)})])
    mlog.append([EndTransactionRecord()])
    view.refresh()
    assert view.topics() == ["real", "t"]


def test_a_segment_roll_while_the_view_is_open(mlog: KRaftLog) -> None:
    mlog.append(topic("t", A, {0: (1, 2)}))
    view = KRaftClusterView(mlog.root)
    mlog.append([PartitionChangeRecord(0, A, leader=2)])
    mlog.roll()
    mlog.append([PartitionChangeRecord(0, A, leader=1)])
    mlog.roll()
    view.refresh()
    p = view.partition("t", 0)
    assert p is not None and (p.leader, p.leader_epoch) == (1, 2)
    mlog.append([PartitionChangeRecord(0, A, leader=2)])
    view.refresh()
    p = view.partition("t", 0)
    assert p is not None and (p.leader, p.leader_epoch) == (2, 3)


def test_a_new_snapshot_and_retention_while_the_view_is_open(mlog: KRaftLog) -> None:
    mlog.append(topic("t", A, {0: (1, 2)}))
    view = KRaftClusterView(mlog.root)
    mlog.append([PartitionChangeRecord(0, A, leader=2)])
    mlog.roll()
    mlog.write_snapshot()
    mlog.append([PartitionChangeRecord(0, A, leader=1)])
    mlog.delete_segments_before(mlog.next_offset)
    view.refresh()
    p = view.partition("t", 0)
    assert p is not None and (p.leader, p.leader_epoch) == (1, 2)


def test_the_log_moving_past_the_view_reloads_from_the_newest_snapshot(mlog: KRaftLog) -> None:
    mlog.append(topic("t", A, {0: (1, 2)}))
    view = KRaftClusterView(mlog.root)
    mlog.append([PartitionChangeRecord(0, A, leader=2)])
    mlog.roll()
    mlog.append([PartitionChangeRecord(0, A, leader=1)])
    mlog.roll()
    mlog.write_snapshot()
    mlog.delete_segments_before(mlog.next_offset)  # the view's segment and the next are gone
    mlog.append([PartitionChangeRecord(0, A, leader=2)])
    view.refresh()
    assert view.snapshot is not None
    p = view.partition("t", 0)
    assert p is not None and (p.leader, p.leader_epoch) == (2, 3)


def test_a_truncated_uncommitted_tail_is_unread(mlog: KRaftLog) -> None:
    mlog.append(topic("t", A, {0: (1, 2)}))
    kept = mlog.next_offset
    mlog.append([PartitionChangeRecord(0, A, leader=2)])  # uncommitted: truncated below
    view = KRaftClusterView(mlog.root)
    p = view.partition("t", 0)
    assert p is not None and p.leader == 2
    mlog.truncate_to(kept)
    mlog.raft_epoch += 1
    mlog.append([PartitionChangeRecord(0, A, isr=(1,))])  # the new leader's record instead
    view.refresh()
    assert view.partition("t", 0) == PartitionState("t", 0, 1, 0, (1, 2), (1,))


def test_a_truncation_to_a_shorter_log(mlog: KRaftLog) -> None:
    mlog.append(topic("t", A, {0: (1, 2)}))
    kept = mlog.next_offset
    mlog.append([PartitionChangeRecord(0, A, leader=2)])
    view = KRaftClusterView(mlog.root)
    mlog.truncate_to(kept)
    view.refresh()
    p = view.partition("t", 0)
    assert p is not None and (p.leader, p.leader_epoch) == (1, 0)


def test_a_batch_being_written_is_read_once_complete(mlog: KRaftLog) -> None:
    mlog.append(topic("t", A, {0: (1, 2)}))
    batch = encode_batch(
        [NewRecord(TIMESTAMP, None, encode_metadata_record(PartitionChangeRecord(0, A, leader=2)))],
        base_offset=mlog.next_offset,
    )
    with open(mlog.segment, "ab") as handle:
        handle.write(batch[:30])
    view = KRaftClusterView(mlog.root)  # no error: the tail is a write in progress
    p = view.partition("t", 0)
    assert p is not None and p.leader == 1
    view.refresh()
    with open(mlog.segment, "ab") as handle:
        handle.write(batch[30:])
    view.refresh()
    p = view.partition("t", 0)
    assert p is not None and (p.leader, p.leader_epoch) == (2, 1)


def test_a_corrupt_tail_names_the_file_and_keeps_what_came_before(mlog: KRaftLog) -> None:
    mlog.append(topic("t", A, {0: (1, 2)}))
    view = KRaftClusterView(mlog.root)
    good = mlog.next_offset
    mlog.append([PartitionChangeRecord(0, A, leader=2)])
    position = mlog.marks[-2][1]
    with open(mlog.segment, "r+b") as handle:  # flip a byte inside the last batch's records
        handle.seek(position + 70)
        byte = handle.read(1)
        handle.seek(position + 70)
        handle.write(bytes([byte[0] ^ 0xFF]))
    with pytest.raises(KafkaMetadataError, match=rf"{mlog.segment}.*byte {position}.*CRC32C"):
        view.refresh()
    assert view.next_offset == good
    p = view.partition("t", 0)
    assert p is not None and p.leader == 1  # the answers of the last good record
    with pytest.raises(KafkaMetadataError, match=str(mlog.segment)):
        KRaftClusterView(mlog.root)
    # Kafka's recovery truncates the bad batch and the leader's copy is fetched again
    mlog.truncate_to(good)
    mlog.append([PartitionChangeRecord(0, A, leader=2)])
    view.refresh()
    p = view.partition("t", 0)
    assert p is not None and (p.leader, p.leader_epoch) == (2, 1)


def test_garbage_after_the_last_batch(mlog: KRaftLog) -> None:
    mlog.append(topic("t", A, {0: (1,)}))
    with open(mlog.segment, "ab") as handle:
        handle.write(b"\x00" * 16 + b"\x07" + b"\x00" * 60)  # magic 7
    with pytest.raises(KafkaMetadataError, match="corrupt record batch"):
        KRaftClusterView(mlog.root)


def test_a_cut_off_batch_before_a_later_segment_is_corruption(mlog: KRaftLog) -> None:
    mlog.append(topic("t", A, {0: (1,)}))
    with open(mlog.segment, "ab") as handle:
        handle.write(encode_batch([NewRecord(0, None, b"\x01\x14\x00\x00")], base_offset=2)[:40])
    mlog.next_offset = 3
    mlog.roll()
    mlog.append([PartitionChangeRecord(0, A, leader=1)])
    with pytest.raises(KafkaMetadataError, match=r"00000000000000000000\.log"):
        KRaftClusterView(mlog.root)


def test_an_unreadable_record_names_the_file(mlog: KRaftLog) -> None:
    mlog.append(topic("t", A, {0: (1,)}))
    bad = encode_metadata_record(TopicRecord("u", B))[:-4]
    mlog.append_raw(encode_batch([NewRecord(0, None, bad)], base_offset=mlog.next_offset), 1)
    with pytest.raises(KafkaMetadataError, match=r"\.log: .*metadata record"):
        KRaftClusterView(mlog.root)


def test_a_snapshot_without_its_footer(mlog: KRaftLog) -> None:
    mlog.append(topic("t", A, {0: (1,)}))
    snap = mlog.write_snapshot(footer=False)
    with pytest.raises(KafkaMetadataError, match=rf"{snap}.*SnapshotFooterRecord"):
        KRaftClusterView(mlog.root)


def test_a_snapshot_without_its_header(mlog: KRaftLog) -> None:
    mlog.append(topic("t", A, {0: (1,)}))
    name = snapshot_file_name(mlog.next_offset, 1)
    value = encode_metadata_record(TopicRecord("t", A))
    body = encode_batch([NewRecord(0, None, value)], base_offset=0)
    (mlog.dir / name).write_bytes(body)
    with pytest.raises(KafkaMetadataError, match="SnapshotHeaderRecord"):
        KRaftClusterView(mlog.root)


def test_partial_and_deleted_snapshots_are_ignored(mlog: KRaftLog) -> None:
    mlog.append(topic("t", A, {0: (1,)}))
    (mlog.dir / (snapshot_file_name(99, 1) + ".part")).write_bytes(b"half")
    (mlog.dir / (snapshot_file_name(98, 1) + ".deleted")).write_bytes(b"old")
    (mlog.dir / "00000000000000000000.log.deleted").write_bytes(b"old")
    view = KRaftClusterView(mlog.root)
    assert view.snapshot is None and view.topics() == ["t"]


def test_a_missing_directory_is_unavailable(tmp_path: Path) -> None:
    with pytest.raises(KafkaMetadataUnavailable, match=METADATA_PARTITION_DIR):
        KRaftClusterView(tmp_path / "nowhere")


def test_a_log_that_starts_after_the_snapshot_is_a_gap(mlog: KRaftLog) -> None:
    mlog.append(topic("t", A, {0: (1,)}))
    mlog.roll()
    mlog.append([PartitionChangeRecord(0, A, leader=1)])
    os.unlink(mlog.dir / "00000000000000000000.log")
    with pytest.raises(KafkaMetadataError, match="starts at offset 2 but there is no snapshot"):
        KRaftClusterView(mlog.root)


def test_refresh_with_nothing_new_changes_nothing(mlog: KRaftLog) -> None:
    mlog.append(topic("t", A, {0: (1, 2)}))
    view = KRaftClusterView(mlog.root)
    before = view.partition("t", 0)
    for _ in range(3):
        view.refresh()
    assert view.partition("t", 0) is before  # the same object: nothing was rebuilt


def test_the_contract_writer_makes_a_log_the_view_follows(tmp_path: Path) -> None:
    writer = KRaftClusterWriter(tmp_path)
    writer.create_topic("t", kid(A), {0: [1, 2, 3]}, {"retention.ms": "10"})
    with writer.open_view() as view:
        writer.set_leader("t", 0, 3, 2, [3])  # two leader records: epoch 0 -> 2
        writer.set_default_config("retention.bytes", "100")
        view.refresh()
        assert view.partition("t", 0) == PartitionState("t", 0, 3, 2, (1, 2, 3), (3,))
        t = view.topic("t")
        assert t is not None and t.config.retention_bytes == 100 and t.config.retention_ms == 10
        with pytest.raises(ValueError, match="cannot follow"):
            writer.set_leader("t", 0, 1, 2, [1])


def test_refresh_reads_only_what_was_appended(mlog: KRaftLog) -> None:
    mlog.append(topic("t", A, {0: (1, 2)}))
    mlog.append([PartitionChangeRecord(0, A, leader=2)])
    view = KRaftClusterView(mlog.root)
    with open(mlog.segment, "r+b") as handle:  # damage the first batch, already applied
        handle.seek(70)
        handle.write(b"\xff\xff\xff\xff")
    mlog.append([PartitionChangeRecord(0, A, leader=1)])
    view.refresh()  # the damaged bytes are behind the view's position: not read again
    p = view.partition("t", 0)
    assert p is not None and (p.leader, p.leader_epoch) == (1, 2)
    with pytest.raises(KafkaMetadataError, match="CRC32C"):
        KRaftClusterView(mlog.root)  # a new view reads them


@pytest.mark.parametrize("codec", [GZIP, ZSTD])
def test_compressed_batches(mlog: KRaftLog, codec: int) -> None:
    values = [encode_metadata_record(r) for r in topic("t", A, {0: (1, 2), 1: (2, 1)})]
    batch = encode_batch(
        [NewRecord(TIMESTAMP, None, v) for v in values], base_offset=0, codec=codec
    )
    mlog.append_raw(batch, len(values))
    view = KRaftClusterView(mlog.root)
    p = view.partition("t", 1)
    assert p is not None and p.leader == 2


# --- a property: any run of operations, refreshed at any points, gives the writer's state ----
NAMES = ("a", "b", "c")
operations = st.lists(
    st.one_of(
        st.tuples(st.just("create"), st.sampled_from(NAMES), st.integers(1, 3)),
        st.tuples(st.just("delete"), st.sampled_from(NAMES)),
        st.tuples(st.just("leader"), st.sampled_from(NAMES), st.integers(0, 2), st.integers(-1, 4)),
        st.tuples(st.just("isr"), st.sampled_from(NAMES), st.integers(0, 2)),
        st.tuples(
            st.just("config"),
            st.sampled_from(NAMES),
            st.sampled_from(["retention.ms", "cleanup.policy"]),
            st.none() | st.sampled_from(["1", "compact"]),
        ),
        st.tuples(st.just("default"), st.none() | st.sampled_from(["5", "7"])),
        st.tuples(st.just("noise")),
        st.tuples(st.just("roll")),
        st.tuples(st.just("snapshot")),
        st.tuples(st.just("refresh")),
    ),
    max_size=40,
)


def _expected(mlog: KRaftLog) -> dict[tuple[str, int], PartitionState]:
    return {
        (name, number): PartitionState(
            name,
            number,
            None if part.leader < 0 else part.leader,
            part.leader_epoch,
            tuple(part.replicas),
            tuple(part.isr),
        )
        for name, state in mlog.topics.items()
        for number, part in state.partitions.items()
    }


def _check(view: KRaftClusterView, mlog: KRaftLog) -> None:
    expected = _expected(mlog)
    assert view.topics() == sorted(mlog.topics)
    got = {
        (name, number): state
        for name in view.topics()
        for number, state in (view.topic(name) or TopicState(name, None)).partitions.items()
    }
    assert got == expected
    for name in view.topics():
        t = view.topic(name)
        assert t is not None and t.topic_id == kid(mlog.topics[name].topic_id)
        overrides = mlog.configs.get((RESOURCE_TOPIC, name), {})
        assert t.config.overrides == frozenset(overrides)
        default = mlog.configs.get((RESOURCE_BROKER, ""), {}).get("log.retention.ms")
        want = overrides.get("retention.ms", default or KAFKA_DEFAULTS["retention.ms"])
        assert t.config.get("retention.ms") == want


@given(operations)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_any_run_of_operations(ops: list[tuple]) -> None:  # type: ignore[type-arg]
    with tempfile.TemporaryDirectory(prefix="kraft-prop.") as tmp:
        mlog = KRaftLog(Path(tmp))
        view = KRaftClusterView(mlog.root)
        serial = 0
        for op in ops:
            kind = op[0]
            if kind == "create" and op[1] not in mlog.topics:
                serial += 1
                tid = serial.to_bytes(16, "big")
                mlog.append(topic(op[1], tid, {p: (1, 2, 3) for p in range(op[2])}))
            elif kind == "delete" and op[1] in mlog.topics:
                mlog.append([RemoveTopicRecord(mlog.topics[op[1]].topic_id)])
            elif kind in ("leader", "isr") and op[1] in mlog.topics:
                state = mlog.topics[op[1]]
                if op[2] in state.partitions:
                    change = (
                        PartitionChangeRecord(op[2], state.topic_id, leader=op[3])
                        if kind == "leader"
                        else PartitionChangeRecord(op[2], state.topic_id, isr=(3,))
                    )
                    mlog.append([change])
            elif kind == "config":
                mlog.append([ConfigRecord(RESOURCE_TOPIC, op[1], op[2], op[3])])
            elif kind == "default":
                mlog.append([ConfigRecord(RESOURCE_BROKER, "", "log.retention.ms", op[1])])
            elif kind == "noise":
                mlog.append([no_op()])
                mlog.append_control()
            elif kind == "roll":
                mlog.roll()
            elif kind == "snapshot":
                mlog.roll()
                mlog.write_snapshot()
                mlog.delete_segments_before(mlog.next_offset)
            elif kind == "refresh":
                view.refresh()
                _check(view, mlog)
        view.refresh()
        _check(view, mlog)
        _check(KRaftClusterView(mlog.root), mlog)
