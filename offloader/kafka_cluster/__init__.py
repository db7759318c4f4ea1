"""A Kafka cluster's metadata, read-only: leadership and topic configs (ZooKeeper or KRaft)."""

from offloader.kafka_cluster.base import (
    KAFKA_DEFAULTS,
    KafkaClusterView,
    PartitionState,
    TopicConfig,
    TopicState,
)

__all__ = ["KAFKA_DEFAULTS", "KafkaClusterView", "PartitionState", "TopicConfig", "TopicState"]
