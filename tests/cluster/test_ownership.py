"""Topic ownership across brokers sharing a PostgreSQL metadata store (issue 26).

A topic belongs to the broker whose home holds its ledgers (its first writer); every other
broker is refused producing, rolling over, offloading or deleting its ledgers, with a
TopicOwnedElsewhere naming the owner, also while the owner is down; ``unload`` on the owner
releases it. Reads are cluster-wide: every broker lists the topics and reads offloaded ledgers.
"""

from __future__ import annotations

import pytest

from offloader.errors import InvalidLedgerState, LedgerNotFound, TopicOwnedElsewhere
from offloader.metadata.cluster_base import LEASE_ORPHANS
from tests.cluster.conftest import NS, Broker

pytestmark = pytest.mark.postgres

T1 = "persistent://public/default/orders"


def payloads(n: int, tag: str = "e") -> list[bytes]:
    return [f"{tag}-{i}".encode() for i in range(n)]


def test_brokers_have_ids_kept_in_their_homes(broker: Broker) -> None:
    a, b = broker("a"), broker("b")
    assert a.broker_id != b.broker_id
    assert (a.runtime.home / "broker-id").read_text().strip() == a.broker_id
    assert {r.broker_id for r in a.brokers()} == {a.broker_id, b.broker_id}
    # reopening the same home is the same broker
    again = broker("a")
    assert again.broker_id == a.broker_id
    assert len(again.brokers()) == 2


def test_the_first_writer_owns_the_topic_and_others_are_refused(broker: Broker) -> None:
    a, b = broker("a"), broker("b")
    a.create_namespace(NS)
    a.produce(T1, payloads(12))
    assert a.topic_owner(T1) == a.broker_id
    assert b.topic_info(T1).owner == a.broker_id
    refusals = [
        lambda: b.produce(T1, payloads(1)),
        lambda: b.roll_over(T1),
        lambda: b.offload_prefix(T1, size_threshold=0),
        lambda: b.apply_deletion_lag(T1),
        lambda: b.delete_topic(T1),
        lambda: b.unload_topic(T1),
    ]
    for refused in refusals:
        with pytest.raises(TopicOwnedElsewhere) as info:
            refused()
        assert info.value.owner == a.broker_id and a.broker_id in str(info.value)
    # the owner is down: still refused, nothing moved
    a.close()
    with pytest.raises(TopicOwnedElsewhere):
        b.produce(T1, payloads(1))
    assert b.topic_owner(T1) == broker("a").broker_id
    assert sum(r.entries for r in b.topic_info(T1).ledgers) == 12


def test_other_brokers_read_offloaded_ledgers(broker: Broker) -> None:
    a, b = broker("a"), broker("b")
    a.create_namespace(NS)
    a.produce(T1, payloads(12))  # ledgers of 5, 5 and 2 (open) entries
    # B sees the topic but not the ledgers only in A's home
    assert b.list_topics() == [T1]
    with pytest.raises(LedgerNotFound, match=a.broker_id):
        list(b.read(T1))
    a.offload_prefix(T1, size_threshold=0)
    read = [e.payload for e in b.read(T1)]
    assert read == payloads(10)  # the closed ledgers; A's open ledger is in A's home only
    assert [e.payload for e in a.read(T1)] == payloads(12)


def test_unload_releases_ownership_once_everything_is_offloaded(broker: Broker) -> None:
    a, b = broker("a"), broker("b")
    a.create_namespace(NS)
    a.produce(T1, payloads(7))
    # refused while ledgers are only in A's home (the current one is rolled over on the way)
    with pytest.raises(InvalidLedgerState, match="offload them first"):
        a.unload_topic(T1)
    assert a.topic_owner(T1) == a.broker_id
    assert [(r.state, r.entries) for r in a.topic_info(T1).ledgers] == [
        ("CLOSED", 5),
        ("CLOSED", 2),
        ("OPEN", 0),
    ]
    a.offload_prefix(T1, size_threshold=0)
    offloaded = a.unload_topic(T1)
    assert len(offloaded) == 2 and a.topic_owner(T1) is None
    # B takes the topic over by writing to it, and reads it whole
    b.produce(T1, payloads(3, "b"))
    assert b.topic_owner(T1) == b.broker_id
    with pytest.raises(TopicOwnedElsewhere):
        a.produce(T1, payloads(1))
    assert [e.payload for e in b.read(T1)] == payloads(7) + payloads(3, "b")


def test_service_ticks_only_own_topics_and_cluster_work_under_one_lease(broker: Broker) -> None:
    a, b = broker("a"), broker("b")
    a.create_namespace(NS)
    t2 = "persistent://public/default/clicks"
    a.produce(T1, payloads(11))
    b.produce(t2, payloads(11))
    a.set_offload_threshold(NS, 0)  # now: the services offload, not the produces
    report_a = a.service_tick()
    report_b = b.service_tick()
    # each broker offloads only what its home holds
    owned_a = {r.ledger_id for r in a.topic_info(T1).ledgers if r.offload_complete}
    owned_b = {r.ledger_id for r in b.topic_info(t2).ledgers if r.offload_complete}
    assert set(report_a.offloaded) == owned_a and len(owned_a) == 2
    assert set(report_b.offloaded) == owned_b and len(owned_b) == 2
    # the orphan sweep runs in one service only: a's holds the lease, b's was refused it
    lease = a.runtime.cluster.get_lease(LEASE_ORPHANS)
    assert lease is not None and lease.holder == a.runtime.owner
    assert not b.runtime.cluster.try_acquire_lease(
        LEASE_ORPHANS, b.runtime.owner, b.runtime.now_ms(), 60_000
    )
    # once it expires (a is gone), b takes it over
    expired = lease.expires_ms + 1
    assert b.runtime.cluster.try_acquire_lease(LEASE_ORPHANS, b.runtime.owner, expired, 60_000)
    assert b.runtime.cluster.get_lease(LEASE_ORPHANS).holder == b.runtime.owner  # type: ignore[union-attr]
