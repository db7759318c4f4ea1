"""The core every part of the facade stands on: the :class:`Runtime`, closing, the Kafka tier
opened on first use, managed ledgers by topic name."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from offloader.kafka.settings import KafkaSettings
from offloader.kafka.tier import KafkaTier
from offloader.metadata import (
    ExportMetadataStore,
    open_export_metadata_store,
    open_kafka_metadata_store,
)
from offloader.naming import NamespaceName, TopicName
from offloader.runtime import Runtime

if TYPE_CHECKING:  # pyiceberg loads with the first Iceberg export, not with the facade
    from offloader.export.iceberg_catalog import CatalogPool

    # Pulsar's topics and the service load on first use: a Kafka-only process never needs them
    from offloader.service import ServiceState
    from offloader.topics.managed_ledger import ManagedLedger


ProgressCallback = Callable[[int, int], None]


class FacadeBase:
    """The state :class:`offloader.api.Offloader` and its parts share."""

    def __init__(self, runtime: Runtime) -> None:
        """Prefer :meth:`offloader.api.Offloader.from_settings`; tests may build a
        :class:`Runtime` by hand (for example around a
        :class:`~offloader.store.faulty.FaultyObjectStore`)."""
        self._rt = runtime
        #: what survives between service ticks (made by the first tick)
        self._service: ServiceState | None = None
        self._closed = False
        self._kafka: KafkaTier | None = None
        self._exports: ExportMetadataStore | None = None
        self._spark: object | None = None
        #: the Iceberg catalogs exports opened, kept open across runs (closed with the facade)
        self._iceberg_catalogs: CatalogPool | None = None

    @property
    def runtime(self) -> Runtime:
        """The parts (stores, clock, settings) this facade drives."""
        return self._rt

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            if self._kafka is not None:
                self._kafka.close()
            if self._exports is not None:
                self._exports.close()
            if self._iceberg_catalogs is not None:
                self._iceberg_catalogs.close()
            self._rt.meta.close()
        finally:
            self._rt.store.close()

    def _export_meta(self) -> ExportMetadataStore:
        if self._exports is None:
            # the runtime's store: a shared PostgreSQL one keeps every broker's watermarks
            location = self._rt.metadata_location
            read_only = not self._rt.metadata_url and not os.access(self._rt.home, os.W_OK)
            self._exports = open_export_metadata_store(location, read_only=read_only)
        return self._exports

    def kafka(self, settings: KafkaSettings | None = None) -> KafkaTier:
        """The Kafka tier (segments of broker log directories) on this store and home; opened
        on first use, closed with this facade. ``settings`` apply when it is first opened; the
        transform settings ``settings`` leaves unset (key ring, chunk size and cache,
        offloader.toml's per-topic policies) come from the broker settings."""
        if self._kafka is None:
            settings = self._kafka_settings(settings or KafkaSettings())
            self._kafka = KafkaTier(
                self._rt.store,
                open_kafka_metadata_store(self._rt.metadata_location),
                settings,
                self._rt.clock_ms,
                self._rt.metrics,
            )
        return self._kafka

    def _kafka_settings(self, settings: KafkaSettings) -> KafkaSettings:
        broker = self._rt.broker
        offload = broker.offload
        changes: dict[str, Any] = {}
        if settings.key_ring is None:
            changes["key_ring"] = offload.key_ring
        if settings.transform_chunk_size is None:
            changes["transform_chunk_size"] = offload.transform_chunk_size
        if settings.chunk_cache_bytes is None:
            changes["chunk_cache_bytes"] = offload.chunk_cache_bytes
        if not settings.topic_transforms:
            changes["topic_transforms"] = broker.kafka_topic_transforms
        if settings.cluster_metadata is None:
            changes["cluster_metadata"] = broker.kafka_metadata
        return dataclasses.replace(settings, **changes)

    def _ml(self, topic: str) -> ManagedLedger:
        from offloader.topics.managed_ledger import ManagedLedger

        return ManagedLedger(self._rt, TopicName.parse(topic))

    def list_topics(self, namespace: str | None = None) -> list[str]:
        if namespace is not None:
            namespace = str(NamespaceName.parse(namespace))
        return [t.name for t in self._rt.meta.list_topics(namespace)]
