"""One Pulsar cluster as the tests see it: its managed ledgers in ZooKeeper (written as brokers
write them) and the bucket its brokers offloaded to on moto (the golden objects Pulsar wrote,
under the UUIDs the offload contexts name, with Pulsar's user metadata).

* ``public/default/orders`` (LZ4-compressed node): ledgers 11 and 12 offloaded (golden
  ``single-block``, ``multi-block``), ledger 13 still in BookKeeper; an earlier attempt of
  ledger 11 under another UUID remains (a superseded attempt);
* ``t1/ns1/events``, partitioned in 2: partition 0 (ZSTD node) has ledger 15
  (``custom-metadata``), partition 1 (SNAPPY node, terminated) has ledger 21
  (``entry-fills-block``);
* ``public/default/slow`` (ZLIB node): ledger 500's offload is running (its UUID recorded, not
  complete), with its multipart upload in progress;
* left in the bucket by gone things: a deleted topic's ledger 600, a trimmed ledger 700 of
  ``orders``, ledger 800 of a managed ledger of another cluster, ``README.txt``, and an
  unfinished upload of ledger 901.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from devservers.endpoint import S3Endpoint
from formats.keys import data_key, index_key
from formats.pulsar import compression
from formats.pulsar.managed_ledger_info import ManagedLedgerInfo
from tests.formats.helpers import case, golden_bytes, regenerate_payloads
from tests.pulsar_cluster.cluster_writer import ClusterWriter, offloaded, plain

U_ORDERS_11 = "0d5c7b2e-58b8-4a8e-9a43-2c0a6b2f1b11"
U_ORDERS_11_OLD = "7f000000-0000-4000-8000-000000000011"
U_ORDERS_12 = "0d5c7b2e-58b8-4a8e-9a43-2c0a6b2f1b12"
U_EVENTS_15 = "1e000000-0000-4000-8000-000000000015"
U_EVENTS_21 = "1e000000-0000-4000-8000-000000000021"
U_SLOW_500 = "50000000-0000-4000-8000-000000000500"
U_DELETED_600 = "60000000-0000-4000-8000-000000000600"
U_TRIMMED_700 = "70000000-0000-4000-8000-000000000700"
U_OTHER_800 = "80000000-0000-4000-8000-000000000800"
U_UPLOAD_901 = "90000000-0000-4000-8000-000000000901"


def pulsar_metadata(role: str, managed_ledger: str | None) -> dict[str, str]:
    """The user metadata Pulsar's BlobStoreManagedLedgerOffloader puts on its objects."""
    meta = {
        "s3managedledgeroffloaderformatversion": "1",
        "s3managedledgeroffloadersoftwareversion": "3.0.0",
        "s3managedledgeroffloadersoftwaregitsha": "0123abc",
        "role": role,
    }
    if managed_ledger is not None:
        meta["ManagedLedgerName"] = managed_ledger
    return meta


@dataclass
class Scenario:
    """What :func:`build` wrote, for the assertions."""

    url: str
    bucket: str
    endpoint: S3Endpoint
    payloads: dict[tuple[str, int], list[bytes]] = field(default_factory=dict)
    orphan_keys: dict[str, str] = field(default_factory=dict)  # key -> expected reason
    referenced_keys: set[str] = field(default_factory=set)
    upload_id: str = ""
    running_upload_id: str = ""


def _put_golden(
    s3: Any, bucket: str, uid: str, name: str, ml: str, *, data_only: bool = False
) -> tuple[str, ...]:
    c = case(name)
    data, index = golden_bytes(c)
    lid = c["ledger_id"]
    s3.put_object(
        Bucket=bucket, Key=data_key(uid, lid), Body=data, Metadata=pulsar_metadata("data", ml)
    )
    if data_only:
        return (data_key(uid, lid),)
    s3.put_object(
        Bucket=bucket, Key=index_key(uid, lid), Body=index, Metadata=pulsar_metadata("index", ml)
    )
    return data_key(uid, lid), index_key(uid, lid)


def _put_small(s3: Any, bucket: str, uid: str, lid: int, ml: str | None) -> tuple[str, str]:
    for key, role in ((data_key(uid, lid), "data"), (index_key(uid, lid), "index")):
        s3.put_object(Bucket=bucket, Key=key, Body=b"x" * 100, Metadata=pulsar_metadata(role, ml))
    return data_key(uid, lid), index_key(uid, lid)


def build(cluster: ClusterWriter, endpoint: S3Endpoint, url: str) -> Scenario:
    bucket = endpoint.new_bucket()
    s3 = endpoint.client()
    sc = Scenario(url, bucket, endpoint)

    def off(lid: int, uid: str, name: str, **kw: Any) -> Any:
        c = case(name)
        return offloaded(
            lid,
            uid,
            entries=c["entry_count"],
            size=c["total_entry_bytes"],
            bucket=bucket,
            endpoint=endpoint.url,
            **kw,
        )

    orders_ml = "public/default/persistent/orders"
    cluster.put_topic(
        "public/default/orders",
        ManagedLedgerInfo(
            (
                off(11, U_ORDERS_11, "single-block"),
                off(12, U_ORDERS_12, "multi-block"),
                plain(13, entries=42, size=4200),
            )
        ),
        codec=compression.LZ4,
    )
    sc.referenced_keys.update(_put_golden(s3, bucket, U_ORDERS_11, "single-block", orders_ml))
    sc.referenced_keys.update(_put_golden(s3, bucket, U_ORDERS_12, "multi-block", orders_ml))
    sc.payloads[("persistent://public/default/orders", 11)] = regenerate_payloads(
        case("single-block")
    )
    sc.payloads[("persistent://public/default/orders", 12)] = regenerate_payloads(
        case("multi-block")
    )
    for key in _put_small(s3, bucket, U_ORDERS_11_OLD, 11, orders_ml):
        sc.orphan_keys[key] = "superseded-attempt"

    p0, p1 = "t1/ns1/persistent/events-partition-0", "t1/ns1/persistent/events-partition-1"
    cluster.put_partitioned(
        "t1/ns1/events",
        [ManagedLedgerInfo((off(15, U_EVENTS_15, "custom-metadata"),))],
        codec=compression.ZSTD,
    )
    cluster.put_topic(
        "t1/ns1/events-partition-1",
        ManagedLedgerInfo(
            (off(21, U_EVENTS_21, "entry-fills-block"),), terminated_position=(21, 2)
        ),
        codec=compression.SNAPPY,
    )
    cluster.put_raw("/admin/partitioned-topics/t1/ns1/persistent/events", b'{"partitions":2}')
    sc.referenced_keys.update(_put_golden(s3, bucket, U_EVENTS_15, "custom-metadata", p0))
    sc.referenced_keys.update(_put_golden(s3, bucket, U_EVENTS_21, "entry-fills-block", p1))
    sc.payloads[("persistent://t1/ns1/events-partition-0", 15)] = regenerate_payloads(
        case("custom-metadata")
    )
    sc.payloads[("persistent://t1/ns1/events-partition-1", 21)] = regenerate_payloads(
        case("entry-fills-block")
    )

    slow_ml = "public/default/persistent/slow"
    cluster.put_topic(
        "public/default/slow",
        ManagedLedgerInfo((plain(499), off(500, U_SLOW_500, "single-block", complete=False))),
        codec=compression.ZLIB,
    )
    running = s3.create_multipart_upload(
        Bucket=bucket, Key=data_key(U_SLOW_500, 500), Metadata=pulsar_metadata("data", slow_ml)
    )
    sc.running_upload_id = running["UploadId"]

    for key in _put_small(s3, bucket, U_DELETED_600, 600, "public/default/persistent/deleted"):
        sc.orphan_keys[key] = "topic-deleted"
    for key in _put_small(s3, bucket, U_TRIMMED_700, 700, orders_ml):
        sc.orphan_keys[key] = "ledger-gone"
    for key in _put_small(s3, bucket, U_OTHER_800, 800, "elsewhere/ns/persistent/x"):
        sc.orphan_keys[key] = "unknown-managed-ledger"
    s3.put_object(Bucket=bucket, Key="README.txt", Body=b"hello")
    sc.orphan_keys["README.txt"] = "not-an-offload-key"
    stray = s3.create_multipart_upload(Bucket=bucket, Key=data_key(U_UPLOAD_901, 901))
    sc.upload_id = stray["UploadId"]
    return sc
