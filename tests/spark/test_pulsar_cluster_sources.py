"""``pulsar-messages`` and ``offloaded-ledger`` with ``pulsar_metadata``: a real Pulsar
cluster's topics by name (ZooKeeper from Debian, the objects on moto, real PySpark): only
ledgers whose offload is complete, in ledger order per topic, ``topic`` the real name, and a
topic's ledgers not offloaded reported once as a warning."""

from __future__ import annotations

from typing import Any

import pytest

from devservers.endpoint import S3Endpoint
from devservers.zookeeper import ZkServer
from formats.pulsar.encode import OutgoingMessage, encode_entry
from formats.pulsar.managed_ledger_info import ManagedLedgerInfo
from offloader.errors import ConfigError
from offloader.spark import register
from offloader.spark.plan import plan_cluster
from tests.pulsar_cluster.cluster_writer import ClusterWriter, offloaded, plain
from tests.pulsar_cluster.conftest import cluster, zk_admin  # noqa: F401 (fixtures)
from tests.spark.conftest import upload_ledger

pytestmark = [pytest.mark.spark, pytest.mark.zookeeper]

P0 = "persistent://public/default/sensors-partition-0"
P1 = "persistent://public/default/sensors-partition-1"


def _entries(tag: str, n: int) -> list[bytes]:
    return [
        encode_entry(
            [OutgoingMessage(f"{tag}-{i}".encode(), key=f"k{i}")],
            producer_name="golden",
            sequence_id=i,
            publish_time=1_700_000_000_000 + i,
            batch=False,
        )
        for i in range(n)
    ]


@pytest.fixture()
def sensors(
    zk_server: ZkServer,
    cluster: ClusterWriter,  # noqa: F811
    moto_endpoint: S3Endpoint,
    monkeypatch: pytest.MonkeyPatch,
) -> tuple[str, str]:
    for key, value in moto_endpoint.env().items():
        if key != "AWS_ENDPOINT_URL":
            monkeypatch.setenv(key, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    bucket = moto_endpoint.new_bucket()
    infos = []
    for part, ledgers in ((0, (30, 31)), (1, (40,))):
        items = []
        for lid in ledgers:
            ml = f"public/default/persistent/sensors-partition-{part}"
            up = upload_ledger(
                moto_endpoint,
                bucket,
                lid,
                _entries(f"p{part}-{lid}", 5),
                512,
                managed_ledger_name=ml,
            )
            items.append(
                offloaded(lid, up.uuid, entries=5, bucket=bucket, endpoint=moto_endpoint.url)
            )
        if part == 0:
            items.append(plain(32, entries=7))
        infos.append(ManagedLedgerInfo(tuple(items)))
    cluster.put_partitioned("public/default/sensors", infos)
    return zk_server.url(cluster.chroot), bucket


def _rows(spark: Any, fmt: str, url: str, topics: str, **options: str) -> list[Any]:
    register(spark)
    reader = spark.read.format(fmt).option("pulsar_metadata", url).option("topics", topics)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load().collect()  # type: ignore[no-any-return]


def test_pulsar_messages_of_a_partitioned_topic_by_name(
    spark: Any, sensors: tuple[str, str]
) -> None:
    url, _bucket = sensors
    rows = _rows(spark, "pulsar-messages", url, "public/default/sensors", value_format="string")
    got = [(r["topic"], r["ledger_id"], r["entry_id"], r["value"]) for r in rows]
    expected = [(P0, lid, i, f"p0-{lid}-{i}") for lid in (30, 31) for i in range(5)] + [
        (P1, 40, i, f"p1-40-{i}") for i in range(5)
    ]
    assert sorted(got) == sorted(expected)
    assert {r["key"] for r in rows} == {f"k{i}" for i in range(5)}


def test_offloaded_ledger_by_regex_and_namespace(spark: Any, sensors: tuple[str, str]) -> None:
    url, _bucket = sensors
    rows = _rows(spark, "offloaded-ledger", url, r"regex:.*sensors-partition-1")
    assert {(r["topic"], r["ledger_id"]) for r in rows} == {(P1, 40)}
    rows = _rows(spark, "offloaded-ledger", url, "public/default", ledger_ids="31")
    assert sorted((r["topic"], r["ledger_id"], r["entry_id"]) for r in rows) == [
        (P0, 31, i) for i in range(5)
    ]


def test_the_plan_keeps_ledger_order_and_warns_of_what_is_not_offloaded(
    sensors: tuple[str, str],
) -> None:
    url, bucket = sensors
    with pytest.warns(
        UserWarning, match=r"sensors-partition-0: 1 ledger\(s\) \(7 entries\)"
    ) as record:
        tasks = plan_cluster(url, "public/default/sensors")
    # once per topic: partition 1 has every ledger offloaded, partition 0 one warning
    assert sum(1 for w in record if "not offloaded" in str(w.message)) == 1
    order = [(t.topic, t.ledger_id) for t in tasks]
    assert order == sorted(order, key=lambda x: (x[0], x[1]))
    assert {t.store.url for t in tasks} == {f"s3://{bucket}"}
    with pytest.raises(ConfigError, match="pulsar_metadata takes option topics"):
        from offloader.spark.source import OffloadedLedgerReader

        OffloadedLedgerReader({"pulsar_metadata": url}).plan()
