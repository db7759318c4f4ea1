"""LocalCluster: the ClusterMetadata of an embedded (SQLite) store, which one broker owns.

An SQLite metadata file lives in one broker's home, so no other broker can share it: every
topic is this broker's and every lease is granted (several ``service run`` processes on one home
still never offload a ledger twice: the per-topic offload lock and the UUID compare-and-set of
the MetadataStore see to that). Nothing is stored; the broker record lives in memory.
"""

from __future__ import annotations

from offloader.metadata.cluster_base import BrokerRecord, Lease, TopicOwner


class LocalCluster:
    """:class:`~offloader.metadata.cluster_base.ClusterMetadata` for one broker."""

    shared = False

    def __init__(self) -> None:
        self._broker: BrokerRecord | None = None

    def register_broker(self, broker_id: str, host: str, home: str, now_ms: int) -> BrokerRecord:
        started = self._broker.started_ms if self._broker is not None else now_ms
        self._broker = BrokerRecord(broker_id, host, home, started, now_ms)
        return self._broker

    def broker_heartbeat(self, broker_id: str, now_ms: int) -> None:
        if self._broker is not None and self._broker.broker_id == broker_id:
            b = self._broker
            self._broker = BrokerRecord(b.broker_id, b.host, b.home, b.started_ms, now_ms)

    def list_brokers(self) -> list[BrokerRecord]:
        return [] if self._broker is None else [self._broker]

    def claim_topic(self, topic: str, broker_id: str, now_ms: int) -> TopicOwner:
        return TopicOwner(topic, broker_id, now_ms)

    def get_topic_owner(self, topic: str) -> TopicOwner | None:
        return None

    def list_topic_owners(self) -> dict[str, TopicOwner]:
        return {}

    def release_topic(self, topic: str, broker_id: str) -> bool:
        return True

    def try_acquire_lease(self, name: str, holder: str, now_ms: int, ttl_ms: int) -> bool:
        return True

    def release_lease(self, name: str, holder: str) -> bool:
        return True

    def get_lease(self, name: str) -> Lease | None:
        return None
