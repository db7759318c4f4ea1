"""The :class:`KafkaClusterView` Protocol: a Kafka cluster's metadata, read-only.

A view answers what a tiered-storage sidecar must know before it uploads a partition: which
broker leads it (and in which leader epoch), the topic's id, and the topic's *effective*
configuration (its overrides over the broker defaults). Two backends implement it: ZooKeeper
(``zookeeper.py``, Kafka up to 3.x: ``/brokers/topics/...`` and ``/config/topics/...``) and
KRaft (``kraft.py``: the ``__cluster_metadata-0`` log and its ``.checkpoint`` snapshots read from
disk). Backends translate their client's errors into :class:`~offloader.errors.KafkaMetadataError`
(and ``KafkaMetadataUnavailable``) naming the path at fault, and never write anything.

:meth:`KafkaClusterView.refresh` brings the view up to date (ZooKeeper: re-read; KRaft: read the
records appended since the last call); between two calls the view answers from memory, so a
leadership check per upload pass costs a dictionary lookup.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

#: Kafka's documented defaults for the configs the sidecar honours (a broker's own defaults,
#: ``/config/brokers/<default>`` or a KRaft ``ConfigRecord`` on the default broker resource,
#: override these; a topic's overrides override both)
KAFKA_DEFAULTS: Mapping[str, str] = {
    "remote.storage.enable": "false",
    "cleanup.policy": "delete",
    "retention.ms": "604800000",
    "retention.bytes": "-1",
    "local.retention.ms": "-2",
    "local.retention.bytes": "-2",
    "remote.log.copy.disable": "false",
}


@dataclass(frozen=True)
class PartitionState:
    """One partition as the cluster's metadata has it."""

    topic: str
    partition: int
    #: the leading broker's id; None when the partition has no leader (offline)
    leader: int | None
    leader_epoch: int
    replicas: tuple[int, ...] = ()
    isr: tuple[int, ...] = ()


@dataclass(frozen=True)
class TopicConfig:
    """A topic's effective configuration: ``overrides`` over the broker defaults, over
    :data:`KAFKA_DEFAULTS`. The typed properties read the keys the sidecar honours."""

    values: Mapping[str, str]
    #: the keys the topic itself sets (the rest come from defaults)
    overrides: frozenset[str] = frozenset()

    def get(self, key: str) -> str | None:
        return self.values.get(key)

    @property
    def remote_storage_enable(self) -> bool:
        return (self.values.get("remote.storage.enable") or "false").strip().lower() == "true"

    @property
    def remote_log_copy_disable(self) -> bool:
        return (self.values.get("remote.log.copy.disable") or "false").strip().lower() == "true"

    @property
    def cleanup_policy(self) -> tuple[str, ...]:
        raw = self.values.get("cleanup.policy") or "delete"
        return tuple(p.strip() for p in raw.split(",") if p.strip())

    @property
    def compacted(self) -> bool:
        return "compact" in self.cleanup_policy

    def _int(self, key: str) -> int | None:
        raw = self.values.get(key)
        if raw is None or not raw.strip():
            return None
        try:
            return int(raw.strip())
        except ValueError:
            return None

    @property
    def retention_ms(self) -> int | None:
        return self._int("retention.ms")

    @property
    def retention_bytes(self) -> int | None:
        return self._int("retention.bytes")

    @property
    def local_retention_ms(self) -> int | None:
        return self._int("local.retention.ms")

    @property
    def local_retention_bytes(self) -> int | None:
        return self._int("local.retention.bytes")

    @property
    def remote_copy_lag_ms(self) -> int | None:
        """KIP-1241's ``remote.copy.lag.ms`` where set."""
        return self._int("remote.copy.lag.ms")

    @property
    def remote_copy_lag_bytes(self) -> int | None:
        """KIP-1241's ``remote.copy.lag.bytes`` where set."""
        return self._int("remote.copy.lag.bytes")


@dataclass(frozen=True)
class TopicState:
    """One topic: its id (a UUID string, as Kafka prints it) and partitions and config."""

    name: str
    topic_id: str | None
    partitions: Mapping[int, PartitionState] = field(default_factory=dict)
    config: TopicConfig = field(default_factory=lambda: TopicConfig(values=dict(KAFKA_DEFAULTS)))


class KafkaClusterView(Protocol):
    """A Kafka cluster's metadata (ZooKeeper or KRaft), read-only."""

    @property
    def location(self) -> str:
        """The canonical metadata URL (``zk:host:port/chroot`` or ``kraft:<dir>``)."""
        ...

    def refresh(self) -> None:
        """Bring the view up to date with the cluster's metadata."""
        ...

    def topics(self) -> list[str]:
        """The names of the cluster's topics, sorted."""
        ...

    def topic(self, name: str) -> TopicState | None:
        """One topic's state; None when the cluster has no such topic."""
        ...

    def partition(self, topic: str, partition: int) -> PartitionState | None: ...

    def close(self) -> None: ...

    def __enter__(self) -> KafkaClusterView: ...

    def __exit__(self, *exc: object) -> None: ...
