"""A Kafka cluster's metadata, read-only: leadership and topic configs (ZooKeeper or KRaft).

``base.py`` holds the :class:`KafkaClusterView` Protocol and its values, ``configs.py`` a
topic's effective configuration, ``identity.py`` this broker's ``meta.properties`` and the
metadata URL with :func:`open_cluster_view` (which chooses the backend), ``zookeeper.py`` the
ZooKeeper backend and ``kraft.py`` the KRaft one.
"""

from offloader.kafka_cluster.base import (
    KAFKA_DEFAULTS,
    KafkaClusterView,
    PartitionState,
    TopicConfig,
    TopicState,
)
from offloader.kafka_cluster.identity import (
    BrokerIdentity,
    KafkaMetadataUrl,
    open_cluster_view,
    parse_kafka_metadata_url,
    read_broker_identity,
)

__all__ = [
    "KAFKA_DEFAULTS",
    "BrokerIdentity",
    "KafkaClusterView",
    "KafkaMetadataUrl",
    "PartitionState",
    "TopicConfig",
    "TopicState",
    "open_cluster_view",
    "parse_kafka_metadata_url",
    "read_broker_identity",
]
