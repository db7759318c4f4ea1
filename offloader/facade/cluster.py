"""A real Pulsar cluster's offloaded topics, by name: the facade of ``--pulsar-metadata``.

:class:`PulsarCluster` opens the cluster's metadata store read-only
(:func:`~offloader.pulsar_cluster.open_cluster_source`) and answers the commands that take
``--pulsar-metadata``: the cluster's topics, one topic's ledgers with their offload state (a
partitioned topic's name gives its partitions), a topic's entries read from the buckets its
offload contexts name (:mod:`offloader.read.cluster`; one ``store_url`` replaces them all),
and the orphan audit and gc of a bucket against the cluster
(:mod:`offloader.offload.cluster_orphans`). It needs no home and no metadata store of ours.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from dataclasses import dataclass

from offloader.api_types import EntryRecord
from offloader.config import OffloadSettings
from offloader.errors import ConfigError
from offloader.offload.cluster_orphans import (
    ClusterAudit,
    audit_cluster_bucket,
    collect_cluster_garbage,
)
from offloader.pulsar_cluster import ClusterTopic, PulsarClusterSource, open_cluster_source
from offloader.pulsar_cluster.base import all_topics, resolve_topic, select_topics
from offloader.read.cluster import BucketStores, ClusterLedger, read_cluster_entries
from offloader.selection import TopicSelection
from offloader.store import ObjectStore, open_store
from offloader.topics.messages import MessageRecord, decode_records


@dataclass(frozen=True)
class ClusterGcReport:
    """What ``objects gc`` against a cluster removed (or would, with ``dry_run``)."""

    audit: ClusterAudit
    deleted: tuple[str, ...]
    aborted: tuple[str, ...]
    dry_run: bool


class PulsarCluster:
    """One Pulsar cluster's metadata store (read-only) and the buckets it offloads to."""

    def __init__(
        self,
        metadata_url: str,
        *,
        store_url: str | None = None,
        endpoint_url: str | None = None,
        region: str | None = None,
        settings: OffloadSettings | None = None,
        timeout: float = 10.0,
        source: PulsarClusterSource | None = None,
    ) -> None:
        self._source = (
            source if source is not None else open_cluster_source(metadata_url, timeout=timeout)
        )
        self._store_url = store_url
        self._endpoint = endpoint_url
        self._region = region
        self._settings = settings
        self._stores = BucketStores(
            store_url, endpoint_url=endpoint_url, region=region, settings=settings
        )

    @property
    def location(self) -> str:
        return self._source.location

    @property
    def source(self) -> PulsarClusterSource:
        return self._source

    def close(self) -> None:
        try:
            self._stores.close()
        finally:
            self._source.close()

    def __enter__(self) -> PulsarCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- topics ---------------------------------------------------------------------------

    def list_topics(self, namespace: str | None = None) -> list[str]:
        """The cluster's topics (of ``namespace``, ``tenant/ns``, when given)."""
        if namespace is None:
            return all_topics(self._source)
        return self._source.topics(namespace)

    def select(self, selection: str | TopicSelection) -> list[str]:
        """The topics a selection (:mod:`offloader.selection`: names, a namespace, or a
        regex) names, as topic names."""
        return select_topics(self._source, selection)

    def topic_info(self, topic: str) -> list[ClusterTopic]:
        """The managed ledger of ``topic`` (of each partition, for a partitioned topic)."""
        return self._source.managed_ledgers(resolve_topic(self._source, topic))

    def partitions(self, topic: str) -> list[str]:
        """``topic`` itself, or its partitions when it is a partitioned topic's name."""
        return resolve_topic(self._source, topic)

    def store_overrides(self) -> dict[str, str | None]:
        """What replaces the offload contexts' bucket (``--store``), endpoint and region."""
        return {
            "store_url": self._store_url or None,
            "endpoint_url": self._endpoint,
            "region": self._region,
        }

    def managed_ledgers(self, topics: list[str]) -> list[ClusterTopic]:
        return self._source.managed_ledgers(topics)

    def ledger_store(self, ledger: ClusterLedger) -> ObjectStore:
        """The (cached) object store a ledger's objects are read from."""
        return self._stores(ledger)

    def read(
        self, topic: str, *, start: tuple[int, int] | None = None, count: int | None = None
    ) -> Iterator[EntryRecord]:
        """``topic``'s offloaded entries (one managed ledger: a partition, not a partitioned
        topic's base name) from ``start``, at most ``count``."""
        names = resolve_topic(self._source, topic)
        if len(names) != 1:
            raise ConfigError(
                f"{topic} is a partitioned topic of {len(names)} partitions: read one of them "
                f"({names[0]}, ...)"
            )
        ct = self._source.managed_ledger(names[0])
        entries = read_cluster_entries(ct, self._stores, start, count, self._settings)
        return (
            EntryRecord(ct.topic, lid, eid, payload, "offloaded", ok)
            for lid, eid, payload, ok in entries
        )

    def read_messages(
        self,
        topic: str,
        *,
        start: tuple[int, int] | None = None,
        count: int | None = None,
        decrypt_key_pem: bytes | None = None,
    ) -> Iterator[MessageRecord]:
        """``topic``'s offloaded entries from ``start`` decoded as Pulsar messages (batches
        split, chunks reassembled), at most ``count`` messages, as ``topics read --decode
        pulsar`` shows a topic of this home."""
        entries = self.read(topic, start=start)
        first = next(entries, None)
        if first is None:
            return iter(())
        triples = ((e.ledger_id, e.entry_id, e.payload) for e in itertools.chain((first,), entries))
        return decode_records(first.topic, triples, decrypt_key_pem=decrypt_key_pem, count=count)

    # --- the orphan audit -----------------------------------------------------------------

    def _audit_store(self) -> ObjectStore:
        if self._store_url:
            return open_store(
                self._store_url,
                endpoint_url=self._endpoint,
                region=self._region,
                settings=self._settings,
                create=False,
            )
        buckets: set[tuple[str, str | None, str | None]] = set()
        for ct in self._source.managed_ledgers(all_topics(self._source)):
            for li in ct.info.ledgers:
                driver = li.offload_context.driver_metadata if li.offload_context else None
                if driver is not None and driver.bucket:
                    buckets.add(
                        (
                            driver.bucket,
                            self._endpoint or driver.endpoint or None,
                            self._region or driver.region or None,
                        )
                    )
        if len(buckets) != 1:
            named = ", ".join(sorted(b for b, _, _ in buckets)) or "none"
            raise ConfigError(
                f"the cluster's offload contexts name {len(buckets)} buckets ({named}): give "
                "the one to audit with --store s3://BUCKET"
            )
        bucket, endpoint, region = buckets.pop()
        return open_store(
            f"s3://{bucket}",
            endpoint_url=endpoint,
            region=region,
            settings=self._settings,
            create=False,
        )

    def orphans(self, *, min_age_seconds: int = 0) -> ClusterAudit:
        """The bucket's objects and uploads no managed ledger of the cluster references."""
        store = self._audit_store()
        try:
            return audit_cluster_bucket(
                self._source,
                store,
                min_age_ms=min_age_seconds * 1000,
                now_ms=lambda: int(time.time() * 1000),
            )
        finally:
            store.close()

    def gc(
        self,
        *,
        min_age_seconds: int,
        dry_run: bool = False,
        include_unknown: bool = False,
    ) -> ClusterGcReport:
        """Delete what :meth:`orphans` finds that is provably unreferenced (see
        :mod:`offloader.offload.cluster_orphans`)."""
        store = self._audit_store()
        try:
            audit = audit_cluster_bucket(
                self._source,
                store,
                min_age_ms=min_age_seconds * 1000,
                now_ms=lambda: int(time.time() * 1000),
            )
            deleted, aborted = collect_cluster_garbage(
                self._source, store, audit, include_unknown=include_unknown, dry_run=dry_run
            )
        finally:
            store.close()
        return ClusterGcReport(audit, tuple(deleted), tuple(aborted), dry_run)
