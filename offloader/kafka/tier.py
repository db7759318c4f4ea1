"""KafkaTier: the Kafka tier behind one object, as :class:`offloader.api.Offloader` hands it out.

It owns its :class:`~offloader.metadata.kafka_base.KafkaMetadataStore` connection and the cache
of remote segment indexes; it borrows the facade's object store, clock and metrics set. Every
method that takes a topic (and a partition) checks them here first, with Kafka's rules
(:func:`formats.kafka.names.check_topic`, ``check_partition``): a name no Kafka topic can have
is one ``KafkaNameError``, never a query.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

from formats.kafka.names import check_partition, check_topic
from offloader.errors import ConfigError
from offloader.kafka import fetch, retention, status, upload
from offloader.kafka.adopt import adopt_bucket_copies
from offloader.kafka.context import KafkaContext
from offloader.kafka.fetch import READ_MODES, IndexCache
from offloader.kafka.lag import (
    PartitionCopyLag,
    PartitionRemoteSize,
    copy_lags,
    remote_log_sizes,
)
from offloader.kafka.leadership import LeadershipGate
from offloader.kafka.rekey import rekey_segments
from offloader.kafka.settings import KafkaSettings
from offloader.kafka.types import KafkaRecordRow, PartitionStatus, UploadReport
from offloader.kafka_cluster import open_cluster_view
from offloader.keyring import KeyRing, ring_path
from offloader.metadata.kafka_base import KafkaMetadataStore, KafkaRetention
from offloader.metrics.base import NO_METRICS, Metrics
from offloader.offload.rekey import RekeyOutcome
from offloader.policies import TransformPolicy
from offloader.selection import TopicSelection
from offloader.store.base import ObjectStore


class KafkaTier:
    def __init__(
        self,
        store: ObjectStore,
        meta: KafkaMetadataStore,
        settings: KafkaSettings,
        clock_ms: Callable[[], int],
        metrics: Metrics = NO_METRICS,
    ) -> None:
        self.ctx = KafkaContext(store, meta, settings, clock_ms, metrics)
        url = settings.cluster_metadata
        if url is not None:  # connected on first use: kafka read never needs the cluster
            ctx = self.ctx
            self.ctx.gate = LeadershipGate(
                lambda: open_cluster_view(url),
                meta,
                clock_ms,
                adopt=lambda partition: adopt_bucket_copies(ctx, partition),
            )
        self.indexes = IndexCache(
            store, key_ring=settings.key_ring, cache_bytes=settings.cache_bytes
        )

    def close(self) -> None:
        try:
            if self.ctx.gate is not None:
                self.ctx.gate.close()
        finally:
            self.ctx.meta.close()

    def upload(self, log_dir: Path, topics: str | TopicSelection | None = None) -> UploadReport:
        """One upload pass over a broker's log directory."""
        return upload.upload_log_dir(self.ctx, log_dir, topics)

    def copy_lag(
        self, log_dir: Path, topics: str | TopicSelection | None = None
    ) -> list[PartitionCopyLag]:
        """Per partition of ``log_dir``: bytes and closed segments not in remote storage yet."""
        return copy_lags(self.ctx, log_dir, topics)

    def remote_log_sizes(self) -> list[PartitionRemoteSize]:
        """Per partition the metadata store knows: bytes and segments in remote storage."""
        return remote_log_sizes(self.ctx)

    def status(
        self, topic: str | None = None, log_dir: Path | None = None
    ) -> list[PartitionStatus]:
        if topic is not None:
            check_topic(topic)
        return status.partition_status(self.ctx, topic, log_dir)

    def read(
        self,
        topic: str,
        partition: int,
        *,
        from_offset: int | None = None,
        from_timestamp: int | None = None,
        count: int | None = None,
        log_dir: Path | None = None,
        mode: str = "remote-only",
    ) -> Iterator[KafkaRecordRow]:
        """Records from ``from_offset`` (or the first with a timestamp at or after
        ``from_timestamp``), at most ``count``, across the tiers ``mode`` allows."""
        check_topic(topic)
        check_partition(partition)
        if (from_offset is None) == (from_timestamp is None):
            raise ConfigError("give exactly one of --from-offset or --from-timestamp")
        if mode not in READ_MODES:
            raise ConfigError(f"mode {mode!r} is not one of {', '.join(READ_MODES)}")
        if mode != "remote-only" and log_dir is None:
            raise ConfigError(f"mode {mode} needs --log-dir (the broker's log directory)")
        return fetch.read_records(
            self.ctx,
            self.indexes,
            topic,
            partition,
            from_offset=from_offset,
            from_timestamp=from_timestamp,
            count=count,
            log_dir=log_dir,
            mode=mode,
        )

    def set_retention(self, topic: str, retention_ms: int, retention_bytes: int) -> KafkaRetention:
        check_topic(topic)
        return self.ctx.meta.set_retention(KafkaRetention(topic, retention_ms, retention_bytes))

    def get_retention(self, topic: str) -> KafkaRetention:
        check_topic(topic)
        return self.ctx.meta.get_retention(topic)

    def set_transform(self, topic: str, policy: TransformPolicy) -> TransformPolicy:
        """How the topic's new segments are stored (spec/transforms.md §8); a key id must be
        in the key ring (``MissingKeyError``). Segments already remote keep their format."""
        check_topic(topic)
        if policy.encrypted:
            ring = KeyRing(ring_path(self.ctx.settings.key_ring))
            ring.key(policy.key_id or ring.active_key_id())
        return self.ctx.meta.set_topic_transform(topic, policy)

    def get_transform(self, topic: str) -> tuple[TransformPolicy, str]:
        """The policy new segments of ``topic`` get and where it comes from: ``metadata``,
        ``offloader.toml`` or ``default`` (none)."""
        check_topic(topic)
        stored = self.ctx.meta.get_topic_transform(topic)
        if stored is not None:
            return stored, "metadata"
        toml = dict(self.ctx.settings.topic_transforms).get(topic)
        if toml is not None:
            return toml, "offloader.toml"
        return TransformPolicy(), "default"

    def remove_transform(self, topic: str) -> bool:
        """Forget the topic's stored policy (offloader.toml's applies again, if any)."""
        check_topic(topic)
        return self.ctx.meta.remove_topic_transform(topic)

    def rekey(self, to_key: str, *, dry_run: bool = False) -> list[RekeyOutcome]:
        """Re-wrap the data keys of encrypted remote segments with ``to_key`` (only their
        ``.chunks`` objects are rewritten)."""
        return rekey_segments(self.ctx, to_key, dry_run=dry_run)

    def apply_retention(self, topic: str | None = None) -> list[str]:
        """Delete remote segments past their topic's retention: their segment ids."""
        if topic is not None:
            check_topic(topic)
        return retention.apply_retention(self.ctx, topic)
