"""KafkaContext: the parts every Kafka-tier module shares (store, metadata, settings, clock,
metrics)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from offloader.kafka.settings import KafkaSettings
from offloader.metadata.kafka_base import KafkaMetadataStore
from offloader.metrics.base import NO_METRICS, Metrics
from offloader.store.base import ObjectStore


@dataclass
class KafkaContext:
    store: ObjectStore
    meta: KafkaMetadataStore
    settings: KafkaSettings
    clock_ms: Callable[[], int]
    #: what the tier records into (KIP-405's remote metrics); the no-op set by default
    metrics: Metrics = NO_METRICS

    def now_ms(self) -> int:
        return self.clock_ms()
