"""Building the :class:`Runtime` from settings: the object store, the metadata store (the
home's SQLite file or a shared PostgreSQL), this broker's registration, the local ledger store,
the metrics wrapper. :meth:`offloader.api.Offloader.from_settings` documents the arguments."""

from __future__ import annotations

import dataclasses
import socket
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, cast

from offloader.api_types import (
    BrokerSettings,
)
from offloader.errors import (
    ConfigError,
    NotFound,
)
from offloader.keyring import key_ring_path
from offloader.ledgers import FsyncPolicy, LedgerStore
from offloader.ledgers.info import FSYNC_POLICIES
from offloader.location import is_remote_url, parse_store_url, s3_endpoint
from offloader.metadata import (
    check_home,
    cluster_of,
    is_postgres_url,
    open_metadata_store,
)
from offloader.metrics import Metrics
from offloader.runtime import Runtime, broker_id_for, driver_metadata_for, wall_clock_ms
from offloader.store import MeteredObjectStore, open_store

if TYPE_CHECKING:
    pass


def build_runtime(
    home: str | Path = ".offloader",
    store_url: str | None = None,
    *,
    metadata_url: str | None = None,
    endpoint_url: str | None = None,
    region: str | None = None,
    broker: BrokerSettings | None = None,
    clock_ms: Callable[[], int] | None = None,
    create_store: bool = True,
    read_only: bool = False,
    metrics: Metrics | None = None,
) -> Runtime:
    """Open every part (see :meth:`offloader.api.Offloader.from_settings`)."""
    broker = broker or BrokerSettings()
    home_path = Path(home).expanduser().resolve()
    missing_home: NotFound | None = None
    shared = is_postgres_url(metadata_url)
    try:
        # the shared store needs no metadata file in the home (a new broker's is empty)
        open_read_only = check_home(home_path, read_only=read_only and not shared)
    except NotFound as exc:
        if not is_remote_url(store_url):
            raise
        missing_home, open_read_only = exc, True  # after the remote store's own checks
    if open_read_only:
        create_store = False
    else:
        home_path.mkdir(parents=True, exist_ok=True)
    if broker.offload.key_ring is None:  # transforms: $OFFLOADER_KEY_RING or <home>/keys
        offload = broker.offload.replace(key_ring=str(key_ring_path(home_path)))
        broker = dataclasses.replace(broker, offload=offload)
    location = parse_store_url(store_url or f"file://{home_path}/objects")
    store = open_store(
        location,
        endpoint_url=endpoint_url,
        region=region,
        settings=broker.offload,
        create=create_store,
    )
    if missing_home is not None:
        store.close()
        raise missing_home
    try:
        if shared and metadata_url is not None:
            meta = open_metadata_store(metadata_url)
        else:
            meta = open_metadata_store(home_path, read_only=open_read_only)
    except BaseException:
        store.close()
        raise
    cluster = cluster_of(meta)
    broker_id = ""
    if shared:
        try:
            broker_id = broker_id_for(home_path)
            cluster.register_broker(
                broker_id, socket.gethostname(), str(home_path), (clock_ms or wall_clock_ms)()
            )
        except BaseException:
            meta.close()
            store.close()
            raise
    clock = clock_ms or wall_clock_ms
    fsync = broker.fsync
    if fsync not in FSYNC_POLICIES:
        raise ConfigError(f"fsync policy {fsync!r} is not one of {', '.join(FSYNC_POLICIES)}")
    ledgers = LedgerStore(home_path, fsync=cast(FsyncPolicy, fsync), clock_ms=clock)
    endpoint = s3_endpoint(endpoint_url) if location.is_s3 else endpoint_url
    driver = driver_metadata_for(store, region=region, endpoint_url=endpoint)
    if metrics is not None:
        store = MeteredObjectStore(store, metrics)
    runtime = Runtime(
        home=home_path,
        meta=meta,
        store=store,
        ledgers=ledgers,
        broker=broker,
        clock_ms=clock,
        driver=driver,
        cluster=cluster,
        broker_id=broker_id,
        metadata_url=metadata_url if shared and metadata_url is not None else "",
    )
    if metrics is not None:
        runtime.metrics = metrics
    if metrics is not None:
        runtime.metrics = metrics
    return runtime
