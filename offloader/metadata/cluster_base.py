"""The ClusterMetadata Protocol and its records: brokers, topic ownership, leases.

This module owns the model of several brokers sharing one metadata store (issue 26): each
broker (one ``--home``) has an id and a heartbeat row (:class:`BrokerRecord`); a topic is owned
by the broker whose home holds its local ledgers (:class:`TopicOwner`), recorded when that
broker first writes to it and moved only by releasing it (``topics unload`` on the owner); work
that needs no local files (orphan audit and gc, remote retention, Kafka remote retention) is
done by whichever live ``service run`` holds the :class:`Lease` named for it, taken over once
it expires.

The PostgreSQL store implements it with tables
(:class:`~offloader.metadata.postgres.store.PgMetadataStore`); the embedded SQLite store serves one
broker only, so :class:`~offloader.metadata.cluster_local.LocalCluster` answers for it (every
topic is this broker's, every lease is granted). As for the MetadataStore, the store never reads
a clock: callers pass ``*_ms``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

#: the names of the leases for cluster work (``service run``)
LEASE_ORPHANS = "orphan-gc"
LEASE_RETENTION = "remote-retention"
LEASE_KAFKA_RETENTION = "kafka-remote-retention"


@dataclass(frozen=True)
class BrokerRecord:
    broker_id: str
    host: str
    home: str
    started_ms: int
    heartbeat_ms: int


@dataclass(frozen=True)
class TopicOwner:
    topic: str
    broker_id: str
    since_ms: int


@dataclass(frozen=True)
class Lease:
    name: str
    holder: str
    acquired_ms: int
    expires_ms: int


@runtime_checkable
class ClusterMetadata(Protocol):
    """Brokers, topic owners and leases (see the module docstring)."""

    #: True when several brokers may share this store (PostgreSQL), False for one (SQLite)
    shared: bool

    def register_broker(self, broker_id: str, host: str, home: str, now_ms: int) -> BrokerRecord:
        """Record (or refresh) the broker and its heartbeat."""
        ...

    def broker_heartbeat(self, broker_id: str, now_ms: int) -> None:
        """Refresh the broker's heartbeat (NotFound if it was never registered)."""
        ...

    def list_brokers(self) -> list[BrokerRecord]:
        """Every broker ever registered, by id."""
        ...

    def claim_topic(self, topic: str, broker_id: str, now_ms: int) -> TopicOwner:
        """Record ``broker_id`` as the topic's owner if it has none; the owner either way
        (compare its ``broker_id``). NotFound if the topic does not exist."""
        ...

    def get_topic_owner(self, topic: str) -> TopicOwner | None:
        """The topic's owner, None when it has none."""
        ...

    def list_topic_owners(self) -> dict[str, TopicOwner]:
        """Every owned topic's owner, by topic."""
        ...

    def release_topic(self, topic: str, broker_id: str) -> bool:
        """Drop the ownership if ``broker_id`` holds it; False otherwise (nothing changes)."""
        ...

    def try_acquire_lease(self, name: str, holder: str, now_ms: int, ttl_ms: int) -> bool:
        """Take or renew the lease until ``now_ms + ttl_ms``: True if it was free, ours or
        expired; False while another holder's lease runs."""
        ...

    def release_lease(self, name: str, holder: str) -> bool:
        """Give the lease up if ``holder`` holds it."""
        ...

    def get_lease(self, name: str) -> Lease | None: ...
