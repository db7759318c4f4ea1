"""Writes a Pulsar cluster's metadata into ZooKeeper as a broker does, for the tests.

``/managed-ledgers/<tenant>/<namespace>/persistent/<URL-encoded local name>`` holds the
``ManagedLedgerInfo`` (compressed with the broker's codec, or plain), its cursors are its
children (``ManagedCursorInfo`` values, which a reader of ledgers must skip); a partitioned
topic has ``/admin/partitioned-topics/...`` metadata and one managed ledger per partition,
``<name>-partition-<n>``. Only the tests write; the project never does.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from kazoo.client import KazooClient

from formats.pulsar import compression
from formats.pulsar.managed_ledger_info import (
    DriverMetadata,
    LedgerInfo,
    ManagedLedgerInfo,
    OffloadContext,
    encode_managed_ledger_info,
    uuid_halves,
)
from offloader.naming import TopicName


def driver(bucket: str, endpoint: str = "", region: str = "us-east-1") -> DriverMetadata:
    """The driver metadata Pulsar's S3 offloader records (``aws-s3``)."""
    return DriverMetadata(
        "aws-s3", (("bucket", bucket), ("region", region), ("endpoint", endpoint))
    )


def offloaded(
    ledger_id: int,
    uid: str,
    *,
    entries: int = 10,
    size: int = 1000,
    complete: bool = True,
    bucket: str = "bucket",
    endpoint: str = "",
    timestamp: int = 1_700_000_000_000,
) -> LedgerInfo:
    """A ledger with an offload context (complete or not) naming ``uid``."""
    msb, lsb = uuid_halves(uid)
    return LedgerInfo(
        ledger_id,
        entries=entries,
        size=size,
        timestamp=timestamp,
        offload_context=OffloadContext(
            msb,
            lsb,
            complete=complete,
            bookkeeper_deleted=complete,
            timestamp=timestamp + 1000,
            driver_metadata=driver(bucket, endpoint),
        ),
    )


def plain(ledger_id: int, *, entries: int = 10, size: int = 1000) -> LedgerInfo:
    """A ledger still in BookKeeper only (no offload context)."""
    return LedgerInfo(ledger_id, entries=entries, size=size, timestamp=1_700_000_000_000)


@dataclass
class ClusterWriter:
    """A kazoo client writing under ``chroot`` (the tests' only writer)."""

    client: KazooClient
    chroot: str

    def put_raw(self, path: str, value: bytes) -> None:
        full = self.chroot + path
        if self.client.exists(full):
            self.client.set(full, value)
        else:
            self.client.create(full, value, makepath=True)

    def put_topic(
        self,
        topic: str,
        info: ManagedLedgerInfo,
        *,
        codec: int = compression.NONE,
        cursors: tuple[str, ...] = ("sub",),
    ) -> str:
        name = TopicName.parse(topic)
        path = f"/managed-ledgers/{name.managed_ledger_name}"
        self.put_raw(path, encode_managed_ledger_info(info, codec=codec))
        for cursor in cursors:
            # a ManagedCursorInfo: cursorsLedgerId (1) = -1, markDelete ledger/entry (2, 3)
            self.put_raw(f"{path}/{cursor}", b"\x08\x01\x10\x03\x18\x05")
        return path

    def put_partitioned(
        self, topic: str, infos: list[ManagedLedgerInfo], *, codec: int = compression.NONE
    ) -> list[str]:
        name = TopicName.parse(topic)
        meta = json.dumps({"partitions": len(infos), "properties": {}}).encode()
        self.put_raw(
            f"/admin/partitioned-topics/{name.namespace}/persistent/{name.encoded_local_name}",
            meta,
        )
        return [
            self.put_topic(f"{name}-partition-{n}", info, codec=codec)
            for n, info in enumerate(infos)
        ]
