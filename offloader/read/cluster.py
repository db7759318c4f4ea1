"""Reading a real Pulsar cluster's topic from the objects its brokers offloaded.

The ledgers come from the topic's ``ManagedLedgerInfo`` (:mod:`offloader.pulsar_cluster`), in
the managed ledger's order; only those whose offload Pulsar considers complete can be read
(the others are still in BookKeeper, which this project does not reach): they are skipped,
and :func:`read_cluster_entries` refuses a start position inside one. Each offloaded ledger is
read from the bucket its offload context's driver metadata names (``bucket``, the endpoint,
``region``) on the cloud its driver names (``aws-s3`` and ``S3``: ``s3://``, with that endpoint
and region; ``google-cloud-storage``: ``gs://``; ``azureblob``: ``az://``, each configured from
its cloud's own environment), or from the one store the caller gives instead (``--store``);
the stores are opened once per bucket (:class:`BucketStores`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from formats.pulsar.managed_ledger_info import LedgerInfo
from offloader.config import OffloadSettings
from offloader.errors import ConfigError, EntryOutOfRange, ObjectNotFound
from offloader.logs import get_logger
from offloader.pulsar_cluster.base import ClusterTopic
from offloader.read.handle import ReadHandle
from offloader.store import ObjectStore, open_store

log = get_logger(__name__)

#: Pulsar's offload driver names (``managedLedgerOffloadDriver``) and the store scheme of each
_DRIVER_SCHEMES = {
    "aws-s3": "s3",
    "s3": "s3",
    "google-cloud-storage": "gs",
    "azureblob": "az",
}


@dataclass(frozen=True)
class ClusterLedger:
    """One offloaded ledger of a cluster topic: where its objects are and what they hold."""

    topic: str
    ledger_id: int
    uuid: str
    entries: int | None
    size: int | None
    bucket: str | None
    endpoint: str | None
    region: str | None
    #: the driver that offloaded it (Pulsar's ``managedLedgerOffloadDriver``), None if unknown
    driver: str | None = None

    @property
    def scheme(self) -> str:
        """The store URL scheme of the ledger's driver (``s3`` when unknown)."""
        return _DRIVER_SCHEMES.get((self.driver or "").lower(), "s3")

    @classmethod
    def of(cls, topic: str, li: LedgerInfo) -> ClusterLedger:
        context = li.offload_context
        assert context is not None and context.uuid is not None
        driver = context.driver_metadata
        return cls(
            topic,
            li.ledger_id,
            context.uuid,
            li.entries,
            li.size,
            driver.bucket if driver is not None else None,
            (driver.endpoint or None) if driver is not None else None,
            (driver.region or None) if driver is not None else None,
            (driver.name or None) if driver is not None else None,
        )


def offloaded_ledgers(ct: ClusterTopic) -> list[ClusterLedger]:
    """The topic's ledgers whose offload is complete (and that name a UUID), in order."""
    return [
        ClusterLedger.of(ct.topic, li)
        for li in ct.info.ledgers
        if li.offloaded and li.uuid is not None
    ]


class BucketStores:
    """The object store of each ledger: ``store_url`` for all when given, else the bucket its
    driver metadata names (with that endpoint and region, unless ``endpoint_url`` and
    ``region`` override them). Each store is opened once; :meth:`close` closes them."""

    def __init__(
        self,
        store_url: str | None = None,
        *,
        endpoint_url: str | None = None,
        region: str | None = None,
        settings: OffloadSettings | None = None,
    ) -> None:
        self._store_url = store_url
        self._endpoint = endpoint_url
        self._region = region
        self._settings = settings
        self._open: dict[tuple[str, str | None, str | None], ObjectStore] = {}

    def url_for(self, ledger: ClusterLedger) -> tuple[str, str | None, str | None]:
        if self._store_url:
            return self._store_url, self._endpoint, self._region
        if not ledger.bucket:
            raise ConfigError(
                f"ledger {ledger.ledger_id} of {ledger.topic}: its offload context names no "
                "bucket (give the store with --store)"
            )
        if ledger.scheme != "s3":  # endpoint and credentials from the cloud's environment
            return f"{ledger.scheme}://{ledger.bucket}", None, None
        return (
            f"s3://{ledger.bucket}",
            self._endpoint or ledger.endpoint,
            self._region or ledger.region,
        )

    def __call__(self, ledger: ClusterLedger) -> ObjectStore:
        key = self.url_for(ledger)
        store = self._open.get(key)
        if store is None:
            url, endpoint, region = key
            store = open_store(
                url, endpoint_url=endpoint, region=region, settings=self._settings, create=False
            )
            self._open[key] = store
        return store

    def close(self) -> None:
        for store in self._open.values():
            store.close()
        self._open.clear()


def read_cluster_entries(
    ct: ClusterTopic,
    stores: Callable[[ClusterLedger], ObjectStore],
    start: tuple[int, int] | None = None,
    count: int | None = None,
    settings: OffloadSettings | None = None,
) -> Iterator[tuple[int, int, bytes, bool]]:
    """``(ledger_id, entry_id, payload, verified)`` of the topic's offloaded ledgers from
    ``start`` (default: the first), at most ``count``. A ``start`` in a ledger the topic does
    not have, or that is not offloaded, raises here, before any entry is read."""
    ledgers = offloaded_ledgers(ct)
    if start is not None and all(li.ledger_id != start[0] for li in ledgers):
        listed = any(li.ledger_id == start[0] for li in ct.info.ledgers)
        why = "is not offloaded (it is only in BookKeeper)" if listed else "is not one of its"
        raise EntryOutOfRange(
            f"invalid position {start[0]}:{start[1]} for {ct.topic}: ledger {start[0]} {why}"
        )
    skipped = [li for li in ct.not_offloaded if start is None or li.ledger_id > start[0]]
    if skipped:
        log.warning(
            "cluster topic has ledgers not offloaded",
            topic=ct.topic,
            ledgers=len(skipped),
            entries=sum(li.entries or 0 for li in skipped),
        )
    return _entries(ledgers, stores, start, count, settings)


def _entries(
    ledgers: list[ClusterLedger],
    stores: Callable[[ClusterLedger], ObjectStore],
    start: tuple[int, int] | None,
    count: int | None,
    settings: OffloadSettings | None,
) -> Iterator[tuple[int, int, bytes, bool]]:
    if count is not None and count <= 0:
        return
    produced = 0
    for ledger in ledgers:
        if start is not None and ledger.ledger_id < start[0]:
            continue
        first = start[1] if start is not None and ledger.ledger_id == start[0] else 0
        store = stores(ledger)
        try:
            handle = ReadHandle.open(store, ledger.ledger_id, ledger.uuid, settings)
        except ObjectNotFound as exc:
            raise ObjectNotFound(
                f"{exc} (ledger {ledger.ledger_id} of {ledger.topic}, offloaded to "
                f"{ledger.bucket or 'an unnamed bucket'})"
            ) from None
        with handle:
            last = handle.last_add_confirmed
            if count is not None:
                last = min(last, first + (count - produced) - 1)
            if first > last:
                continue
            verified = handle.verifies_spans
            for entry in handle.iter_entries(first, last):
                yield ledger.ledger_id, entry.entry_id, entry.payload, verified
                produced += 1
            if count is not None and produced >= count:
                return
