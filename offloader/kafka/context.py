"""KafkaContext: the parts every Kafka-tier module shares (store, metadata, settings, clock,
metrics, and the leadership gate when the cluster's metadata is given)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from offloader.kafka.settings import KafkaSettings
from offloader.metadata.kafka_base import KafkaMetadataStore
from offloader.metrics.base import NO_METRICS, Metrics
from offloader.store.base import ObjectStore

if TYPE_CHECKING:  # the gate's module imports this one
    from offloader.kafka.leadership import LeadershipGate


@dataclass
class KafkaContext:
    store: ObjectStore
    meta: KafkaMetadataStore
    settings: KafkaSettings
    clock_ms: Callable[[], int]
    #: what the tier records into (KIP-405's remote metrics); the no-op set by default
    metrics: Metrics = NO_METRICS
    #: the cluster's metadata (``--kafka-metadata``): which partitions this broker may upload
    gate: LeadershipGate | None = None

    def now_ms(self) -> int:
        return self.clock_ms()
