"""The parts every lifecycle module shares: stores, clock, broker settings, owner identity,
and the metrics set the flows record into (:mod:`offloader.metrics`; a no-op unless the service
exports metrics).

With a shared metadata store several brokers (homes) work on one cluster: each broker's id
(:func:`broker_id_for`, kept in ``<home>/broker-id``) names it in the store's broker table and
as the owner of the topics whose ledgers its home holds (:class:`Runtime.cluster`).

:class:`Runtime` is built once by :meth:`offloader.api.Offloader.from_settings` and handed to
the managed ledgers, the offload commit protocol, the orphan audit and the service. Times that
the metadata records (ledger creation and close, offload completion, thresholds, deletion lag)
come from ``clock_ms``, injectable for tests; object ages in the orphan audit use the wall clock
(:meth:`Runtime.wall_ms`), because an object's ``last_modified`` comes from the store's clock.
"""

from __future__ import annotations

import hashlib
import os
import socket
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from offloader.api_types import BrokerSettings
from offloader.ledgers import LedgerStore, RolloverPolicy
from offloader.location import parse_store_url
from offloader.logs import redact
from offloader.metadata.base import (
    DRIVER_BUCKET,
    DRIVER_ENDPOINT,
    DRIVER_PROVIDER,
    DRIVER_REGION,
    DRIVER_SERVICE_ENDPOINT,
    DRIVER_STORE_URL,
    DriverMetadata,
    MetadataStore,
    OffloadContext,
)
from offloader.metadata.cluster_base import ClusterMetadata
from offloader.metadata.cluster_local import LocalCluster
from offloader.metrics.base import NO_METRICS, Metrics
from offloader.policies import NamespacePolicies
from offloader.store.base import ObjectStore


def wall_clock_ms() -> int:
    """Milliseconds since the epoch, from the system clock."""
    return time.time_ns() // 1_000_000


def make_owner_id() -> str:
    """A unique name for this process's offload lock holder (host, pid, random)."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


#: the file in a home that holds its broker id
BROKER_ID_FILE = "broker-id"


def read_broker_id(home: Path) -> str | None:
    """The broker id kept in ``<home>/broker-id``, None when the home has none yet."""
    try:
        return (home / BROKER_ID_FILE).read_text(encoding="utf-8").strip() or None
    except (FileNotFoundError, NotADirectoryError):
        return None


def broker_id_for(home: Path) -> str:
    """The broker id of ``home``: read from ``<home>/broker-id``, made on first use from the
    host name and a hash of the home's absolute path (``host-1a2b3c4d5e``) and written there, so
    it stays the same when the home is reached by another path or moved with its ledgers."""
    path = home / BROKER_ID_FILE
    existing = read_broker_id(home)
    if existing:
        return existing
    digest = hashlib.sha256(str(home.resolve()).encode()).hexdigest()[:10]
    host = "".join(c if c.isalnum() or c in "-." else "-" for c in socket.gethostname()) or "host"
    broker_id = f"{host}-{digest}"
    home.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{BROKER_ID_FILE}.{os.getpid()}.tmp")
    tmp.write_text(broker_id + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return path.read_text(encoding="utf-8").strip()


#: Pulsar's offload driver name of each store scheme (its ``managedLedgerOffloadDriver``)
DRIVER_NAMES = {"s3": "aws-s3", "gs": "google-cloud-storage", "az": "azureblob", "file": "file"}


def driver_metadata_for(
    store: ObjectStore, *, region: str | None = None, endpoint_url: str | None = None
) -> DriverMetadata:
    """Pulsar's ``OffloadDriverMetadata`` for ``store``: driver name, URL, bucket, region,
    endpoint (never credentials: store URLs refuse userinfo)."""
    url = store.url
    location = parse_store_url(url)
    name = DRIVER_NAMES[location.scheme]
    return DriverMetadata(
        name=name,
        properties={
            DRIVER_STORE_URL: url,
            DRIVER_PROVIDER: name,
            DRIVER_BUCKET: location.bucket,
            DRIVER_REGION: region or "",
            DRIVER_ENDPOINT: endpoint_url or "",
            DRIVER_SERVICE_ENDPOINT: endpoint_url or "",
        },
    )


def store_hint(context: OffloadContext | None, current_url: str) -> str:
    """When an offload's objects are missing from ``current_url``: which store the metadata
    says the offload went to, if another (``""`` otherwise), as the end of an error message."""
    recorded = "" if context is None else context.driver.properties.get(DRIVER_STORE_URL, "")
    if not recorded or recorded == current_url:
        return ""
    return (
        f"; the offload went to {redact(recorded)}, not to {redact(current_url)}: "
        f"use --store {redact(recorded)}"
    )


@dataclass
class Runtime:
    """Everything the lifecycle needs, in one place (not thread-safe for writes)."""

    home: Path
    meta: MetadataStore
    store: ObjectStore
    ledgers: LedgerStore
    broker: BrokerSettings
    clock_ms: Callable[[], int]
    driver: DriverMetadata
    owner: str = field(default_factory=make_owner_id)
    #: what the flows record into (``service run --metrics-addr``); a no-op by default
    metrics: Metrics = NO_METRICS
    #: brokers, topic owners and leases (a LocalCluster for the embedded store: one broker)
    cluster: ClusterMetadata = field(default_factory=LocalCluster)
    #: this broker's id (:func:`broker_id_for`; "" in hand-built runtimes: "local")
    broker_id: str = ""
    #: where the metadata lives: a ``postgresql://`` URL, or "" for ``<home>/metadata.db``
    metadata_url: str = ""

    @property
    def metadata_location(self) -> str:
        """What :func:`~offloader.metadata.open_metadata_store` opens for this runtime."""
        return self.metadata_url or str(self.home)

    @property
    def me(self) -> str:
        """This broker's id as topic owner ("local" when the runtime was built without one)."""
        return self.broker_id or "local"

    @property
    def rollover(self) -> RolloverPolicy:
        b = self.broker
        return RolloverPolicy(
            max_entries=b.max_entries_per_ledger,
            max_size_bytes=b.max_ledger_size,
            min_rollover_seconds=b.min_rollover_seconds,
            max_rollover_seconds=b.max_rollover_seconds,
        )

    @property
    def lock_dir(self) -> Path:
        return self.home / "locks"

    def now_ms(self) -> int:
        return self.clock_ms()

    @staticmethod
    def wall_ms() -> int:
        return wall_clock_ms()

    def policies(self, namespace: str, topic: str | None = None) -> NamespacePolicies:
        """The namespace's policies; with ``topic``, the ones that apply to that topic: its own
        offload policies over its namespace's (topic > namespace > broker)."""
        policies = self.meta.get_namespace(namespace).policies
        if topic is None:
            return policies
        return self.meta.get_topic_policies(topic).over(policies)

    def deletion_lag_ms(self, policies: NamespacePolicies) -> int | None:
        """The namespace's lag, else the broker default; None (negative) = never delete."""
        lag = policies.offload_deletion_lag_ms
        if lag is None:
            lag = self.broker.default_deletion_lag_ms
        return None if lag < 0 else lag

    @property
    def lock_stale_ms(self) -> int:
        return self.broker.offload_lock_stale_seconds * 1000
