"""The MetadataStore contract: every backend in ``tests/metadata/backends.py`` must pass it.

Covers every Protocol method, the compare-and-set rules of the offload lifecycle, the attempt
history, the offload status and lock (with stale takeover), durability across reopen, and races
between real processes (ids unique, exactly one CAS winner, exactly one lock holder).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from offloader.errors import (
    AlreadyExists,
    InvalidLedgerState,
    InvalidName,
    MetadataError,
    NamespaceNotEmpty,
    NotFound,
    OffloadAlreadyComplete,
    OffloadConflict,
)
from offloader.metadata.base import DriverMetadata, MetadataStore, OffloadContext
from offloader.policies import NamespacePolicies
from tests.metadata import mp_workers
from tests.metadata.backends import BACKENDS

NS = "public/default"
TOPIC = "persistent://public/default/orders"
DRIVER = DriverMetadata(
    "aws-s3",
    {"store_url": "s3://bucket/prefix", "bucket": "bucket", "region": "eu-west-1", "endpoint": ""},
)


@pytest.fixture(params=sorted(BACKENDS))
def backend_location(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, str]:
    name: str = request.param
    return name, BACKENDS[name].new_location(request, tmp_path)


@pytest.fixture
def reopen(backend_location: tuple[str, str]) -> Iterator[Callable[[], MetadataStore]]:
    """Opens another store on the same location (closed at teardown)."""
    name, location = backend_location
    opened: list[MetadataStore] = []

    def _open() -> MetadataStore:
        store = BACKENDS[name].open(location)
        opened.append(store)
        return store

    yield _open
    for store in opened:
        store.close()


@pytest.fixture
def store(reopen: Callable[[], MetadataStore]) -> MetadataStore:
    return reopen()


@pytest.fixture
def topic(store: MetadataStore) -> str:
    store.create_namespace(NS, 1)
    store.create_topic(TOPIC, 2)
    return TOPIC


def closed_ledger(
    store: MetadataStore, topic: str, entries: int = 10, size: int = 1000, closed_ms: int = 500
) -> int:
    ledger_id = store.allocate_ledger_id()
    store.add_ledger(topic, ledger_id, 100)
    store.close_ledger(ledger_id, closed_ms, entries, size)
    return ledger_id


def begin(store: MetadataStore, ledger_id: int, uuid: str, now_ms: int = 1000) -> Any:
    return store.begin_offload(
        ledger_id, uuid, DRIVER, now_ms, data_key=f"{uuid}-ledger-{ledger_id}",
        index_key=f"{uuid}-ledger-{ledger_id}-index",
    )  # fmt: skip


def test_store_satisfies_the_protocol(store: MetadataStore) -> None:
    assert isinstance(store, MetadataStore)


# --- namespaces ---------------------------------------------------------------------------
def test_namespace_create_get_list(store: MetadataStore) -> None:
    record = store.create_namespace(NS, 7)
    assert record.name == NS and record.created_ms == 7
    assert record.policies == NamespacePolicies()
    assert store.get_namespace(NS) == record
    store.create_namespace("acme/b", 8, NamespacePolicies(offload_threshold_bytes=0))
    store.create_namespace("acme/a", 9)
    assert [n.name for n in store.list_namespaces()] == ["acme/a", "acme/b", NS]
    assert [n.name for n in store.list_namespaces(tenant="acme")] == ["acme/a", "acme/b"]
    assert store.get_namespace("acme/b").policies.offload_threshold_bytes == 0


def test_namespace_errors(store: MetadataStore) -> None:
    store.create_namespace(NS, 1)
    with pytest.raises(AlreadyExists):
        store.create_namespace(NS, 2)
    with pytest.raises(NotFound):
        store.get_namespace("nobody/here")
    with pytest.raises(NotFound):
        store.set_policies("nobody/here", NamespacePolicies())
    with pytest.raises(NotFound):
        store.delete_namespace("nobody/here")


def test_set_policies_round_trips_every_field(store: MetadataStore) -> None:
    store.create_namespace(NS, 1)
    policies = NamespacePolicies(
        offload_threshold_bytes=10 * 1024 * 1024,
        offload_threshold_seconds=3600,
        offload_deletion_lag_ms=60_000,
        retention_size_bytes=5 << 30,
        retention_time_seconds=-1,
        read_priority="bookkeeper-first",
    )
    record = store.set_policies(NS, policies)
    assert record.policies == policies
    assert record.policies.read_priority == "bookkeeper-first"
    assert store.get_namespace(NS).policies == policies
    back = store.set_policies(NS, policies.replace(offload_deletion_lag_ms=None))
    assert back.policies.offload_deletion_lag_ms is None
    assert back.policies.effective_deletion_lag_ms == 14_400_000


def test_delete_namespace_refuses_while_it_has_topics(store: MetadataStore, topic: str) -> None:
    with pytest.raises(NamespaceNotEmpty):
        store.delete_namespace(NS)
    store.delete_topic(topic)
    store.delete_namespace(NS)
    assert store.list_namespaces() == []


# --- topics -------------------------------------------------------------------------------
def test_topic_create_get_list(store: MetadataStore) -> None:
    with pytest.raises(NotFound):
        store.create_topic(TOPIC, 1)  # the namespace must exist
    store.create_namespace(NS, 1)
    store.create_namespace("public/other", 1)
    record = store.create_topic(TOPIC, 5)
    assert (record.name, record.namespace, record.created_ms) == (TOPIC, NS, 5)
    assert store.get_topic(TOPIC) == record
    with pytest.raises(AlreadyExists):
        store.create_topic(TOPIC, 6)
    store.create_topic("persistent://public/other/x", 6)
    store.create_topic("persistent://public/default/a", 6)
    assert [t.name for t in store.list_topics()] == [
        "persistent://public/default/a",
        TOPIC,
        "persistent://public/other/x",
    ]
    assert [t.name for t in store.list_topics(NS)] == ["persistent://public/default/a", TOPIC]
    with pytest.raises(NotFound):
        store.get_topic("persistent://public/default/missing")


def test_ensure_topic_is_idempotent(store: MetadataStore) -> None:
    store.create_namespace(NS, 1)
    first = store.ensure_topic(TOPIC, 10)
    assert store.ensure_topic(TOPIC, 20) == first
    with pytest.raises(NotFound):
        store.ensure_topic("persistent://nobody/ns/t", 1)


@pytest.mark.parametrize("name", ["public/default/t", "persistent://public/t", "persistent://a//t"])
def test_malformed_topic_names_are_refused(store: MetadataStore, name: str) -> None:
    store.create_namespace(NS, 1)
    with pytest.raises(InvalidName):
        store.create_topic(name, 1)


def test_delete_topic_returns_its_ledgers_and_removes_everything(
    store: MetadataStore, topic: str
) -> None:
    first = closed_ledger(store, topic)
    begin(store, first, "u-1")
    store.complete_offload(first, "u-1", 2000, data_size=1, index_size=1)
    trimmed = closed_ledger(store, topic)
    store.mark_ledger_deleted(trimmed)
    current = store.allocate_ledger_id()
    store.add_ledger(topic, current, 3000)
    store.set_offload_status(topic, "RUNNING", 1)
    assert store.try_acquire_offload_lock(topic, "me", 1, 1000)

    ledgers = store.delete_topic(topic)
    assert [ledger.ledger_id for ledger in ledgers] == [first, trimmed, current]
    assert ledgers[0].offload is not None and ledgers[0].offload.uuid == "u-1"
    assert ledgers[1].state == "DELETED"
    with pytest.raises(NotFound):
        store.get_topic(topic)
    with pytest.raises(NotFound):
        store.get_ledger(first)
    with pytest.raises(NotFound):
        store.list_ledgers(topic)
    with pytest.raises(NotFound):
        store.get_offload_status(topic)
    assert store.get_offload_lock(topic) is None
    assert store.claimed_uuids() == frozenset()
    assert [a.uuid for a in store.list_attempts(topic=topic)] == ["u-1"]  # history stays
    with pytest.raises(NotFound):
        store.delete_topic(topic)
    # the topic can be created again, empty
    store.create_topic(topic, 9)
    assert store.list_ledgers(topic) == []


# --- ledgers ------------------------------------------------------------------------------
def test_allocate_ledger_id_is_monotonic_and_durable(
    store: MetadataStore, reopen: Callable[[], MetadataStore], topic: str
) -> None:
    ids = [store.allocate_ledger_id() for _ in range(5)]
    assert ids == sorted(set(ids))
    store.add_ledger(topic, ids[-1] + 100, 1)  # an explicit id is never allocated again
    other = reopen()
    assert other.allocate_ledger_id() > ids[-1] + 100


def test_ledger_life(store: MetadataStore, topic: str) -> None:
    ledger_id = store.allocate_ledger_id()
    record = store.add_ledger(topic, ledger_id, 100)
    assert (record.topic, record.entries, record.size_bytes, record.state) == (
        topic,
        0,
        0,
        "OPEN",
    )
    assert record.created_ms == 100 and record.closed_ms is None and record.offload is None
    assert record.view().is_open
    record = store.update_ledger_stats(ledger_id, 3, 300)
    assert (record.entries, record.size_bytes) == (3, 300)
    record = store.close_ledger(ledger_id, 200, 4, 400)
    assert (record.state, record.closed_ms, record.entries, record.size_bytes) == (
        "CLOSED",
        200,
        4,
        400,
    )
    assert store.close_ledger(ledger_id, 200, 4, 400) == record  # repeating is a no-op
    with pytest.raises(InvalidLedgerState):
        store.close_ledger(ledger_id, 201, 4, 400)
    with pytest.raises(InvalidLedgerState):
        store.update_ledger_stats(ledger_id, 5, 500)
    assert store.get_ledger(ledger_id) == record
    view = record.view()
    assert (view.ledger_id, view.entries, view.size_bytes, view.closed_ms) == (
        ledger_id,
        4,
        400,
        200,
    )


def test_ledger_errors(store: MetadataStore, topic: str) -> None:
    with pytest.raises(NotFound):
        store.add_ledger("persistent://public/default/missing", 1, 1)
    store.add_ledger(topic, 10, 1)
    with pytest.raises(AlreadyExists):
        store.add_ledger(topic, 10, 1)
    with pytest.raises(InvalidLedgerState):
        store.add_ledger(topic, 5, 1)  # older than the newest ledger of the topic
    with pytest.raises(NotFound):
        store.get_ledger(999)
    with pytest.raises(NotFound):
        store.close_ledger(999, 1, 1, 1)
    with pytest.raises(NotFound):
        store.update_ledger_stats(999, 1, 1)
    with pytest.raises(NotFound):
        store.mark_ledger_deleted(999)


def test_list_ledgers_and_mark_deleted(store: MetadataStore, topic: str) -> None:
    store.create_topic("persistent://public/default/other", 1)
    ids = [closed_ledger(store, topic) for _ in range(3)]
    closed_ledger(store, "persistent://public/default/other")
    assert [ledger.ledger_id for ledger in store.list_ledgers(topic)] == ids
    before = store.mark_ledger_deleted(ids[0])
    assert before.state == "CLOSED"
    assert store.get_ledger(ids[0]).state == "DELETED"
    assert [ledger.ledger_id for ledger in store.list_ledgers(topic)] == ids[1:]
    all_ledgers = store.list_ledgers(topic, include_deleted=True)
    assert [ledger.ledger_id for ledger in all_ledgers] == ids


# --- offload lifecycle --------------------------------------------------------------------
def test_begin_and_complete_offload(store: MetadataStore, topic: str) -> None:
    ledger_id = closed_ledger(store, topic)
    assert begin(store, ledger_id, "u-1", now_ms=1000) is None
    context = store.get_ledger(ledger_id).offload
    assert context is not None
    assert (context.uuid, context.complete, context.local_deleted, context.timestamp_ms) == (
        "u-1",
        False,
        False,
        None,
    )
    assert context.driver == DRIVER
    assert context.data_key == f"u-1-ledger-{ledger_id}"
    assert context.index_key == f"u-1-ledger-{ledger_id}-index"
    assert store.get_attempt("u-1").state == "STARTED"
    assert store.claimed_uuids() == frozenset({"u-1"})

    done = store.complete_offload(
        ledger_id, "u-1", 5000, data_size=1234, index_size=56, block_crc32c=[1, 2, 0xFFFFFFFF],
        index_crc32c=77,
    )  # fmt: skip
    assert done.complete and done.timestamp_ms == 5000
    assert (done.data_size, done.index_size) == (1234, 56)
    assert done.block_crc32c == (1, 2, 0xFFFFFFFF) and done.index_crc32c == 77
    assert store.get_ledger(ledger_id).offload == done
    assert store.get_ledger(ledger_id).view().offload_complete
    attempt = store.get_attempt("u-1")
    assert attempt.state == "COMPLETED" and attempt.finished_ms == 5000
    # a repeated complete (an uncertain commit retried) is a no-op
    again = store.complete_offload(ledger_id, "u-1", 6000, data_size=1234, index_size=56)
    assert again == done
    with pytest.raises(OffloadAlreadyComplete):
        begin(store, ledger_id, "u-2")
    assert issubclass(OffloadAlreadyComplete, OffloadConflict)


def test_begin_returns_the_previous_incomplete_attempt(store: MetadataStore, topic: str) -> None:
    ledger_id = closed_ledger(store, topic)
    begin(store, ledger_id, "u-1", now_ms=1000)
    previous = begin(store, ledger_id, "u-2", now_ms=2000)
    assert isinstance(previous, OffloadContext)
    assert previous.uuid == "u-1" and not previous.complete
    assert previous.data_key == f"u-1-ledger-{ledger_id}" and previous.driver == DRIVER
    first = store.get_attempt("u-1")
    assert first.state == "SUPERSEDED" and first.finished_ms == 2000
    assert store.claimed_uuids() == frozenset({"u-2"})
    # the loser's complete is a conflict; the winner's succeeds
    with pytest.raises(OffloadConflict, match="does not match"):
        store.complete_offload(ledger_id, "u-1", 3000, data_size=1, index_size=1)
    assert store.get_attempt("u-1").state == "SUPERSEDED"
    assert store.complete_offload(ledger_id, "u-2", 3000, data_size=1, index_size=1).complete


def test_failed_attempt_is_returned_by_the_next_begin(store: MetadataStore, topic: str) -> None:
    ledger_id = closed_ledger(store, topic)
    begin(store, ledger_id, "u-1")
    store.fail_offload(ledger_id, "u-1", 1500, "S3 said no")
    failed = store.get_attempt("u-1")
    assert (failed.state, failed.error, failed.finished_ms) == ("FAILED", "S3 said no", 1500)
    with pytest.raises(OffloadConflict):
        store.complete_offload(ledger_id, "u-1", 1600, data_size=1, index_size=1)
    previous = begin(store, ledger_id, "u-2", now_ms=2000)
    assert previous is not None and previous.uuid == "u-1"
    assert store.get_attempt("u-1").state == "FAILED"  # stays FAILED, not SUPERSEDED


def test_fail_after_complete_is_refused(store: MetadataStore, topic: str) -> None:
    ledger_id = closed_ledger(store, topic)
    begin(store, ledger_id, "u-1")
    store.complete_offload(ledger_id, "u-1", 2000, data_size=1, index_size=1)
    with pytest.raises(OffloadConflict):
        store.fail_offload(ledger_id, "u-1", 2100, "late")
    assert store.get_attempt("u-1").state == "COMPLETED"


def test_fail_of_a_superseded_attempt_keeps_its_state(store: MetadataStore, topic: str) -> None:
    ledger_id = closed_ledger(store, topic)
    begin(store, ledger_id, "u-1")
    begin(store, ledger_id, "u-2")
    store.fail_offload(ledger_id, "u-1", 2100, "aborted")
    attempt = store.get_attempt("u-1")
    assert attempt.state == "SUPERSEDED" and attempt.error == "aborted"
    assert store.get_attempt("u-2").state == "STARTED"


def test_begin_offload_refusals(store: MetadataStore, topic: str) -> None:
    open_id = store.allocate_ledger_id()
    store.add_ledger(topic, open_id, 1)
    with pytest.raises(InvalidLedgerState):
        begin(store, open_id, "u-open")
    with pytest.raises(NotFound):
        begin(store, 999_999, "u-missing")
    closed_id = closed_ledger(store, topic, closed_ms=2)
    begin(store, closed_id, "u-1")
    other = closed_ledger(store, "persistent://public/default/orders", closed_ms=3)
    with pytest.raises(AlreadyExists):
        begin(store, other, "u-1")  # uuids are never reused
    store.mark_ledger_deleted(other)
    with pytest.raises(NotFound):
        begin(store, other, "u-deleted")
    assert store.list_attempts(ledger_id=other) == []


def test_complete_after_the_ledger_was_deleted_is_a_conflict(
    store: MetadataStore, topic: str
) -> None:
    ledger_id = closed_ledger(store, topic)
    begin(store, ledger_id, "u-1")
    store.mark_ledger_deleted(ledger_id)
    assert store.claimed_uuids() == frozenset()
    with pytest.raises(OffloadConflict, match="deleted"):
        store.complete_offload(ledger_id, "u-1", 2000, data_size=1, index_size=1)
    assert store.get_attempt("u-1").state == "SUPERSEDED"


def test_complete_after_the_topic_was_deleted_is_a_conflict(
    store: MetadataStore, topic: str
) -> None:
    ledger_id = closed_ledger(store, topic)
    begin(store, ledger_id, "u-1")
    store.delete_topic(topic)
    with pytest.raises(OffloadConflict, match="no longer exists"):
        store.complete_offload(ledger_id, "u-1", 2000, data_size=1, index_size=1)
    assert store.get_attempt("u-1").state == "SUPERSEDED"


def test_complete_with_unknown_or_mismatched_attempt(store: MetadataStore, topic: str) -> None:
    first = closed_ledger(store, topic)
    second = closed_ledger(store, topic)
    begin(store, first, "u-1")
    with pytest.raises(NotFound):
        store.complete_offload(first, "nobody", 1, data_size=1, index_size=1)
    with pytest.raises(OffloadConflict):
        store.complete_offload(second, "u-1", 1, data_size=1, index_size=1)
    with pytest.raises(NotFound):
        store.fail_offload(first, "nobody", 1, "x")


def test_mark_local_deleted_is_a_cas(store: MetadataStore, topic: str) -> None:
    ledger_id = closed_ledger(store, topic)
    begin(store, ledger_id, "u-1")
    with pytest.raises(InvalidLedgerState):
        store.mark_local_deleted(ledger_id, "u-1")  # not complete yet
    store.complete_offload(ledger_id, "u-1", 2000, data_size=1, index_size=1)
    with pytest.raises(OffloadConflict):
        store.mark_local_deleted(ledger_id, "u-other")
    record = store.mark_local_deleted(ledger_id, "u-1")
    assert record.offload is not None and record.offload.local_deleted
    assert record.local_deleted and record.view().local_deleted
    assert store.mark_local_deleted(ledger_id, "u-1") == record  # idempotent
    store.mark_ledger_deleted(ledger_id)
    with pytest.raises(OffloadConflict):
        store.mark_local_deleted(ledger_id, "u-1")


def test_attempt_history_and_cleanup(store: MetadataStore, topic: str) -> None:
    a = closed_ledger(store, topic)
    b = closed_ledger(store, topic)
    begin(store, a, "a-1", 10)
    begin(store, a, "a-2", 20)
    begin(store, b, "b-1", 30)
    store.fail_offload(b, "b-1", 35, "boom")
    store.complete_offload(a, "a-2", 40, data_size=1, index_size=1)

    assert [x.uuid for x in store.list_attempts()] == ["a-1", "a-2", "b-1"]
    assert [x.uuid for x in store.list_attempts(ledger_id=a)] == ["a-1", "a-2"]
    assert [x.uuid for x in store.list_attempts(topic=topic, states=["FAILED"])] == ["b-1"]
    assert [x.uuid for x in store.list_attempts(states=["SUPERSEDED", "COMPLETED"])] == [
        "a-1",
        "a-2",
    ]
    assert store.list_attempts(topic="persistent://public/default/nothing") == []
    with pytest.raises(MetadataError):
        store.list_attempts(states=["BOGUS"])  # type: ignore[list-item]
    attempt = store.get_attempt("a-1")
    assert (attempt.ledger_id, attempt.topic, attempt.started_ms) == (a, topic, 10)
    assert attempt.driver == DRIVER and attempt.data_key == f"a-1-ledger-{a}"
    with pytest.raises(NotFound):
        store.get_attempt("nobody")

    cleaned = store.mark_attempt_cleaned("a-1", 50)
    assert cleaned.state == "CLEANED" and cleaned.finished_ms == 20
    with pytest.raises(OffloadConflict):
        store.mark_attempt_cleaned("a-2", 50)  # still claimed by ledger a
    with pytest.raises(OffloadConflict):
        store.mark_attempt_cleaned("b-1", 50)  # a failed attempt the ledger still points at
    with pytest.raises(NotFound):
        store.mark_attempt_cleaned("nobody", 50)
    store.mark_ledger_deleted(a)
    assert store.mark_attempt_cleaned("a-2", 60).state == "CLEANED"


def test_claimed_offloads(store: MetadataStore, topic: str) -> None:
    a = closed_ledger(store, topic)
    b = closed_ledger(store, topic)
    c = closed_ledger(store, topic)
    closed_ledger(store, topic)  # never offloaded
    begin(store, a, "a-1")
    store.complete_offload(a, "a-1", 5, data_size=1, index_size=1)
    begin(store, b, "b-1")
    begin(store, c, "c-1")
    store.mark_ledger_deleted(c)
    claimed = store.claimed_offloads()
    assert [ledger.ledger_id for ledger in claimed] == [a, b]
    assert [ledger.offload.uuid for ledger in claimed if ledger.offload] == ["a-1", "b-1"]
    assert store.claimed_uuids() == frozenset({"a-1", "b-1"})


def test_everything_survives_reopen(
    store: MetadataStore, reopen: Callable[[], MetadataStore], topic: str
) -> None:
    ledger_id = closed_ledger(store, topic)
    begin(store, ledger_id, "u-1")
    done = store.complete_offload(ledger_id, "u-1", 9, data_size=3, index_size=2)
    store.set_policies(NS, NamespacePolicies(offload_threshold_bytes=0))
    store.close()
    other = reopen()
    assert other.get_ledger(ledger_id).offload == done
    assert other.get_namespace(NS).policies.offload_threshold_bytes == 0
    assert other.get_topic(topic).namespace == NS


def test_closed_store_refuses_calls(store: MetadataStore) -> None:
    store.close()
    with pytest.raises(MetadataError):
        store.list_namespaces()


# --- offload status and lock --------------------------------------------------------------
def test_offload_status(store: MetadataStore, topic: str) -> None:
    status = store.get_offload_status(topic)
    assert (status.status, status.last_error, status.updated_ms) == ("NOT_RUN", None, None)
    store.set_offload_status(topic, "RUNNING", 10)
    assert store.get_offload_status(topic).status == "RUNNING"
    store.set_offload_status(topic, "ERROR", 20, "Error offloading: boom")
    status = store.get_offload_status(topic)
    assert (status.status, status.last_error, status.updated_ms) == (
        "ERROR",
        "Error offloading: boom",
        20,
    )
    store.set_offload_status(topic, "SUCCESS", 30)
    assert store.get_offload_status(topic).last_error is None
    with pytest.raises(NotFound):
        store.get_offload_status("persistent://public/default/missing")
    with pytest.raises(NotFound):
        store.set_offload_status("persistent://public/default/missing", "RUNNING", 1)
    with pytest.raises(MetadataError):
        store.set_offload_status(topic, "BOGUS", 1)  # type: ignore[arg-type]


def test_offload_lock(store: MetadataStore, topic: str) -> None:
    assert store.get_offload_lock(topic) is None
    assert store.try_acquire_offload_lock(topic, "cli:1", 1000, 30_000)
    lock = store.get_offload_lock(topic)
    assert lock is not None and (lock.owner, lock.acquired_ms, lock.heartbeat_ms) == (
        "cli:1",
        1000,
        1000,
    )
    assert not store.try_acquire_offload_lock(topic, "service:2", 2000, 30_000)
    assert store.try_acquire_offload_lock(topic, "cli:1", 3000, 30_000)  # re-entrant
    assert store.refresh_offload_lock(topic, "cli:1", 20_000)
    lock = store.get_offload_lock(topic)
    assert lock is not None and (lock.acquired_ms, lock.heartbeat_ms) == (1000, 20_000)
    assert not store.try_acquire_offload_lock(topic, "service:2", 50_000, 30_000)  # 30 s exactly
    assert not store.release_offload_lock(topic, "service:2")
    assert store.release_offload_lock(topic, "cli:1")
    assert not store.release_offload_lock(topic, "cli:1")
    assert store.try_acquire_offload_lock(topic, "service:2", 60_000, 30_000)
    with pytest.raises(NotFound):
        store.try_acquire_offload_lock("persistent://public/default/missing", "x", 1, 1)


def test_stale_offload_lock_is_taken_over(store: MetadataStore, topic: str) -> None:
    assert store.try_acquire_offload_lock(topic, "crashed", 1000, 30_000)
    assert not store.try_acquire_offload_lock(topic, "new", 31_000, 30_000)
    assert store.try_acquire_offload_lock(topic, "new", 31_001, 30_000)
    lock = store.get_offload_lock(topic)
    assert lock is not None and (lock.owner, lock.acquired_ms) == ("new", 31_001)
    assert not store.refresh_offload_lock(topic, "crashed", 31_002)  # it lost the lock
    assert not store.release_offload_lock(topic, "crashed")
    assert store.get_offload_lock(topic) == lock


# --- several processes ----------------------------------------------------------------------
def test_processes_allocate_unique_ledger_ids(
    backend_location: tuple[str, str], store: MetadataStore
) -> None:
    name, location = backend_location
    per_process = 100
    batches = mp_workers.run_workers(mp_workers.allocate_ids, [(name, location, per_process)] * 4)
    ids = [ledger_id for batch in batches for ledger_id in batch]
    assert len(ids) == len(set(ids)) == 4 * per_process
    assert all(batch == sorted(batch) for batch in batches)  # monotonic within a process
    assert sorted(ids) == list(range(4 * per_process))
    assert store.allocate_ledger_id() == 4 * per_process


def test_processes_racing_offloads_have_exactly_one_winner(
    backend_location: tuple[str, str], store: MetadataStore, topic: str
) -> None:
    name, location = backend_location
    ledgers = [closed_ledger(store, topic) for _ in range(15)]
    reports = mp_workers.run_workers(
        mp_workers.race_offloads, [(name, location, worker, ledgers) for worker in range(3)]
    )
    outcomes = [outcome for _, worker_outcomes in reports for outcome in worker_outcomes]
    for ledger_id in ledgers:
        mine = [o for o in outcomes if o[0] == ledger_id]
        assert len(mine) == 3
        winners = [uuid for _, uuid, result in mine if result == "won"]
        assert len(winners) == 1, mine
        context = store.get_ledger(ledger_id).offload
        assert context is not None and context.complete and context.uuid == winners[0]
        states = {a.uuid: a.state for a in store.list_attempts(ledger_id=ledger_id)}
        assert states.pop(winners[0]) == "COMPLETED"
        assert set(states.values()) <= {"SUPERSEDED"}
        losers = {uuid for _, uuid, result in mine if result == "conflict"}
        assert set(states) == losers


def test_processes_racing_for_the_lock_have_exactly_one_holder(
    backend_location: tuple[str, str], store: MetadataStore, topic: str
) -> None:
    name, location = backend_location
    results = mp_workers.run_workers(
        mp_workers.race_lock, [(name, location, topic, f"owner-{i}") for i in range(4)]
    )
    holders = [owner for owner, acquired in results if acquired]
    assert len(holders) == 1
    lock = store.get_offload_lock(topic)
    assert lock is not None and lock.owner == holders[0]


# --- batches --------------------------------------------------------------------------------
def test_batch_commits_every_change_at_its_end(
    store: MetadataStore, topic: str, reopen: Callable[[], MetadataStore]
) -> None:
    with store.batch():
        first = closed_ledger(store, topic)
        second = closed_ledger(store, topic)
        # reads inside the batch see its changes
        assert [r.ledger_id for r in store.list_ledgers(topic)] == [first, second]
    other = reopen()
    assert [r.state for r in other.list_ledgers(topic)] == ["CLOSED", "CLOSED"]


def test_batch_undoes_a_failed_change_alone(store: MetadataStore, topic: str) -> None:
    with store.batch():
        ledger_id = closed_ledger(store, topic)
        with pytest.raises(AlreadyExists):
            store.create_topic(topic, 3)
        with pytest.raises(InvalidLedgerState):  # closing again with other stats
            store.close_ledger(ledger_id, 600, 99, 1)
        with pytest.raises((AlreadyExists, InvalidLedgerState)):  # the id's row exists
            store.add_ledger(topic, ledger_id, 100)
        with pytest.raises(MetadataError, match="too large"):  # the driver's error, translated
            store.create_topic("persistent://public/default/big", 2**70)
        store.begin_offload(ledger_id, "u-1", DRIVER, 700, data_key="d", index_key="i")
    record = store.get_ledger(ledger_id)
    assert (record.entries, record.size_bytes, record.closed_ms) == (10, 1000, 500)
    assert record.offload is not None and record.offload.uuid == "u-1"
    assert [t.name for t in store.list_topics()] == [topic]


def test_batch_rolled_back_when_its_body_raises(
    store: MetadataStore, topic: str, reopen: Callable[[], MetadataStore]
) -> None:
    with pytest.raises(RuntimeError, match="stop"), store.batch():
        closed_ledger(store, topic)
        with store.batch():  # a batch inside a batch joins it
            closed_ledger(store, topic)
        raise RuntimeError("stop")
    assert store.list_ledgers(topic) == []
    assert reopen().list_ledgers(topic) == []
    closed_ledger(store, topic)  # the store goes on
    assert len(store.list_ledgers(topic)) == 1


def test_other_threads_wait_for_a_batch(store: MetadataStore, topic: str) -> None:
    import threading

    seen: list[int] = []
    started = threading.Event()

    def other() -> None:
        started.set()
        seen.append(len(store.list_ledgers(topic)))

    with store.batch():
        closed_ledger(store, topic)
        thread = threading.Thread(target=other)
        thread.start()
        started.wait(5)
        thread.join(0.3)
        assert thread.is_alive()  # waits for the batch's end
        closed_ledger(store, topic)
    thread.join(10)
    assert seen == [2]
