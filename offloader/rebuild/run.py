"""One ``metadata rebuild``: the store listed once, each kind's rebuilder planning from that
listing, then (unless dry) writing.

A rebuild refuses a metadata store that already has records of a kind it rebuilds
(:class:`~offloader.errors.RebuildRefused`) unless ``merge`` is given; with ``merge`` it adds
only what is missing and reports what differs (``conflict``), never changing a record that
exists. It never writes to the object store.
"""

from __future__ import annotations

import builtins
import dataclasses
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any, cast

from offloader.errors import RebuildRefused
from offloader.logs import get_logger
from offloader.metadata.kafka_base import KafkaMetadataStore
from offloader.rebuild.base import (
    Rebuilder,
    RebuildItem,
    RebuildReport,
    StoreListing,
    TopicSelector,
)
from offloader.rebuild.kafka_segments import KafkaSegments
from offloader.rebuild.ledgers import PulsarLedgers
from offloader.runtime import Runtime
from offloader.selection import TopicSelection
from offloader.store.base import GetResult, MultipartUploadInfo, ObjectInfo, ObjectStore

__all__ = ["default_rebuilders", "list_store", "rebuild", "topic_selector"]

log = get_logger(__name__)

#: ``progress(objects_listed, 0)``: the total is unknown while listing
ListingProgress = Callable[[int, int], None]
#: the listing reports progress every this many objects
PROGRESS_EVERY = 1000


def default_rebuilders(kafka_meta: KafkaMetadataStore | None = None) -> list[Rebuilder]:
    """Every kind a rebuild recreates: Pulsar ledgers, and Kafka remote segments when the
    Kafka tier's metadata store is given (export watermarks plug in here too)."""
    kinds: list[Rebuilder] = [PulsarLedgers()]
    if kafka_meta is not None:
        kinds.append(KafkaSegments(kafka_meta))
    return kinds


def topic_selector(topics: str | TopicSelection | None) -> TopicSelector:
    """``--topics TOPICS`` (:mod:`offloader.selection`: names, a namespace, or a regex matched
    in full against ``persistent://t/ns/x`` and ``t/ns/x``) as a predicate on full topic
    names; None selects every topic."""
    selection = TopicSelection.of(topics)
    if selection is None:
        return lambda _topic: True
    return selection.matches


def list_store(rt: Runtime, progress: ListingProgress | None = None) -> StoreListing:
    """The one listing of a rebuild: every object (key order) and every incomplete upload."""
    objects: list[ObjectInfo] = []
    for info in rt.store.list():
        objects.append(info)
        if progress is not None and len(objects) % PROGRESS_EVERY == 0:
            progress(len(objects), 0)
    if progress is not None:
        progress(len(objects), 0)
    return StoreListing.of(objects, rt.store.list_multipart_uploads())


class CountingStore:
    """The runtime's store, counting the requests a rebuild makes (by operation) so that its
    report says what it cost; everything else is the store's own."""

    def __init__(self, store: ObjectStore) -> None:
        self._store = store
        self.requests: dict[str, int] = {}
        self._lock = threading.Lock()  # the marker bodies are read on several threads

    def _count(self, op: str) -> None:
        with self._lock:
            self.requests[op] = self.requests.get(op, 0) + 1

    def list(self, prefix: str = "") -> Iterator[ObjectInfo]:
        self._count("list")
        return self._store.list(prefix)

    def list_multipart_uploads(self, prefix: str = "") -> builtins.list[MultipartUploadInfo]:
        self._count("list_multipart_uploads")
        return self._store.list_multipart_uploads(prefix)

    def get(self, key: str) -> GetResult:
        self._count("get")
        return self._store.get(key)

    def head(self, key: str) -> ObjectInfo:
        self._count("head")
        return self._store.head(key)

    def __getattr__(self, name: str) -> Any:
        self._count(name)
        return getattr(self._store, name)


def rebuild(
    rt: Runtime,
    *,
    topics: str | TopicSelection | None = None,
    dry_run: bool = False,
    merge: bool = False,
    progress: ListingProgress | None = None,
    rebuilders: Sequence[Rebuilder] | None = None,
) -> RebuildReport:
    """Recreate the metadata store's records from the object store (see the module)."""
    select = topic_selector(topics)
    kinds = list(rebuilders) if rebuilders is not None else default_rebuilders()
    if not merge:
        for rebuilder in kinds:
            count = rebuilder.existing_records(rt)
            if count:
                raise RebuildRefused(
                    f"the metadata store already has {count} {rebuilder.kind} record(s) "
                    "(topics or partitions); give --merge to add only what is missing"
                )
    counting = CountingStore(rt.store)
    rt = dataclasses.replace(rt, store=cast(ObjectStore, counting))
    listing = list_store(rt, progress)
    items: list[RebuildItem] = []
    for rebuilder in kinds:
        plan = rebuilder.plan(rt, listing, select)
        if dry_run:
            items.extend(rebuilder.items(rt, plan, merge=merge))
        else:
            items.extend(rebuilder.apply(rt, plan, merge=merge))
    report = RebuildReport(
        items,
        dry_run=dry_run,
        merge=merge,
        objects_listed=len(listing.objects),
        uploads_listed=len(listing.uploads),
        requests=dict(counting.requests),
    )
    log.info("metadata rebuilt" if not dry_run else "metadata rebuild planned", **report.summary())
    return report
