"""The writer Protocol of the view contract suite: what a test does to a Kafka cluster's
metadata, each backend's writer doing it exactly as Kafka's controller does (ZooKeeper
znodes in ``zk_writer.py``; KRaft metadata records in ``kraft_writer.py``).

Configs are named by their **topic** names (``retention.ms``); ``set_default_config`` writes
the broker default as Kafka stores it (its ``log.*`` synonym where it has one,
:data:`offloader.kafka_cluster.configs.BROKER_SYNONYMS`).
"""

from __future__ import annotations

from typing import Protocol

from offloader.kafka_cluster.base import KafkaClusterView


class ClusterWriter(Protocol):
    @property
    def url(self) -> str:
        """The ``--kafka-metadata`` value of this cluster (``zk://...``, ``kraft:<dir>``)."""
        ...

    def create_topic(
        self,
        name: str,
        topic_id: str,
        partitions: dict[int, list[int]],
        config: dict[str, str] | None = None,
    ) -> None:
        """A new topic: its id (Kafka's base64 form), replicas per partition, overrides; each
        partition led by its first replica in leader epoch 0 with every replica in the ISR."""
        ...

    def set_leader(
        self, topic: str, partition: int, leader: int | None, leader_epoch: int, isr: list[int]
    ) -> None: ...

    def set_config(self, topic: str, key: str, value: str | None) -> None:
        """Set (or, with None, remove) one of the topic's overrides."""
        ...

    def set_default_config(self, key: str, value: str | None) -> None:
        """Set (or remove) a broker default of the topic config ``key``."""
        ...

    def delete_topic(self, name: str) -> None: ...

    def open_view(self) -> KafkaClusterView: ...
