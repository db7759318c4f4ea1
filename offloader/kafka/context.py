"""KafkaContext: the parts every Kafka-tier module shares (store, metadata, settings, clock)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from offloader.kafka.settings import KafkaSettings
from offloader.metadata.kafka_base import KafkaMetadataStore
from offloader.store.base import ObjectStore


@dataclass
class KafkaContext:
    store: ObjectStore
    meta: KafkaMetadataStore
    settings: KafkaSettings
    clock_ms: Callable[[], int]

    def now_ms(self) -> int:
        return self.clock_ms()
