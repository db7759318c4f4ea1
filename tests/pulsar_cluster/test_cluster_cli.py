"""``offloader --pulsar-metadata URL topics list|info|read`` on a real ZooKeeper describing a
cluster whose offloaded objects (Pulsar's golden ledgers) are on moto, over HTTP."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from devservers.endpoint import S3Endpoint
from devservers.zookeeper import ZkServer
from tests.cli.helpers import json_lines, ok, one_line_error, run
from tests.pulsar_cluster.cluster_writer import ClusterWriter
from tests.pulsar_cluster.scenario import U_ORDERS_11, U_ORDERS_12, Scenario, build

pytestmark = pytest.mark.zookeeper


@pytest.fixture()
def scenario(
    zk_server: ZkServer,
    cluster: ClusterWriter,
    moto_endpoint: S3Endpoint,
    monkeypatch: pytest.MonkeyPatch,
) -> Scenario:
    for name, value in moto_endpoint.env().items():
        if name != "AWS_ENDPOINT_URL":  # the driver metadata names the endpoint
            monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    monkeypatch.delenv("AWS_ENDPOINT_URL_S3", raising=False)
    return build(cluster, moto_endpoint, zk_server.url(cluster.chroot))


def test_topics_list_names_the_clusters_topics(tmp_path: Path, scenario: Scenario) -> None:
    out = ok(tmp_path, "--pulsar-metadata", scenario.url, "topics", "list")
    assert out.stdout.splitlines() == [
        "persistent://public/default/orders",
        "persistent://public/default/slow",
        "persistent://t1/ns1/events-partition-0",
        "persistent://t1/ns1/events-partition-1",
    ]
    out = ok(tmp_path, "--json", "--pulsar-metadata", scenario.url, "topics", "list", "t1/ns1")
    assert [r["topic"] for r in json_lines(out)] == [
        "persistent://t1/ns1/events-partition-0",
        "persistent://t1/ns1/events-partition-1",
    ]


def test_topics_info_is_stats_internal_for_offload(
    tmp_path: Path, scenario: Scenario, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OFFLOADER_PULSAR_METADATA", scenario.url)  # the environment works too
    out = ok(tmp_path, "--json", "topics", "info", "public/default/orders")
    (record,) = json_lines(out)
    assert record["topic"] == "persistent://public/default/orders"
    assert record["path"].endswith("/managed-ledgers/public/default/persistent/orders")
    assert [(r["ledger_id"], r["offloaded"], r["uuid"]) for r in record["ledgers"]] == [
        (11, True, U_ORDERS_11),
        (12, True, U_ORDERS_12),
        (13, False, None),
    ]
    assert record["ledgers"][0]["bucket"] == scenario.bucket
    assert record["ledgers"][0]["bookkeeper_deleted"] is True
    assert record["entries"] == 100 + 3000 + 42
    text = ok(tmp_path, "topics", "info", "public/default/slow").stdout
    assert "started" in text and "500" in text
    events = json_lines(ok(tmp_path, "--json", "topics", "info", "t1/ns1/events"))
    assert [e["topic"] for e in events] == [
        "persistent://t1/ns1/events-partition-0",
        "persistent://t1/ns1/events-partition-1",
    ]
    assert events[1]["terminated_position"] == "21:2"


def test_topics_read_from_the_bucket_the_driver_metadata_names(
    tmp_path: Path, scenario: Scenario
) -> None:
    expected = scenario.payloads[("persistent://public/default/orders", 11)]
    out = ok(
        tmp_path,
        "--json",
        "--pulsar-metadata",
        scenario.url,
        "topics",
        "read",
        "orders",
        "--from",
        "11:98",
        "--count",
        "4",
    )
    rows = json_lines(out)
    assert [(r["ledger_id"], r["entry_id"]) for r in rows] == [(11, 98), (11, 99), (12, 0), (12, 1)]
    assert rows[0]["sha256"] == hashlib.sha256(expected[98]).hexdigest()
    second = scenario.payloads[("persistent://public/default/orders", 12)]
    assert rows[3]["sha256"] == hashlib.sha256(second[1]).hexdigest()
    assert {r["tier"] for r in rows} == {"offloaded"}


def test_topics_read_whole_partition_and_store_override(tmp_path: Path, scenario: Scenario) -> None:
    out = ok(
        tmp_path,
        "--json",
        "--pulsar-metadata",
        scenario.url,
        "--store",
        f"s3://{scenario.bucket}",
        "--endpoint-url",
        scenario.endpoint.url,
        "topics",
        "read",
        "t1/ns1/events-partition-0",
    )
    expected = scenario.payloads[("persistent://t1/ns1/events-partition-0", 15)]
    rows = json_lines(out)
    assert [r["sha256"] for r in rows] == [hashlib.sha256(p).hexdigest() for p in expected]


def test_read_errors_are_one_line(tmp_path: Path, scenario: Scenario) -> None:
    base = ("--pulsar-metadata", scenario.url, "topics", "read")
    line = one_line_error(run(tmp_path, *base, "orders", "--from", "13:0"))
    assert "ledger 13 is not offloaded" in line
    line = one_line_error(run(tmp_path, *base, "orders", "--from", "99:0"))
    assert "ledger 99 is not one of its" in line
    line = one_line_error(run(tmp_path, *base, "nope"))
    assert "nope has no managed ledger" in line
    result = run(tmp_path, *base, "t1/ns1/events")
    assert result.exit_code != 0 and "partitioned topic of 2 partitions" in result.stderr


def test_an_unreachable_cluster_is_one_line(tmp_path: Path) -> None:
    from devservers.postgres import free_port

    port = free_port()
    line = one_line_error(
        run(tmp_path, "--pulsar-metadata", f"zk:127.0.0.1:{port}", "topics", "list")
    )
    assert f"127.0.0.1:{port}" in line


def test_pulsar_metadata_in_offloader_toml(tmp_path: Path, scenario: Scenario) -> None:
    (tmp_path / "offloader.toml").write_text(f'pulsar_metadata = "{scenario.url}"\n')
    out = ok(tmp_path, "topics", "list", "public/default")
    assert out.stdout.splitlines() == [
        "persistent://public/default/orders",
        "persistent://public/default/slow",
    ]


def test_bad_cluster_input_is_one_line_naming_the_path(
    tmp_path: Path, zk_server: ZkServer, cluster: ClusterWriter
) -> None:
    """Through the command: a node that is not a ManagedLedgerInfo, a chroot that does not
    exist, an ACL-protected node: each one ``error:`` line naming the path."""
    from kazoo.security import make_digest_acl

    base = f"{cluster.chroot}/managed-ledgers/public/default/persistent"
    cluster.put_raw("/managed-ledgers/public/default/persistent/bad", b"\x0a\x05\x08\x01")
    cluster.client.create(f"{base}/secret", b"", acl=[make_digest_acl("x", "y", all=True)])
    url = zk_server.url(cluster.chroot)
    line = one_line_error(run(tmp_path, "--pulsar-metadata", url, "topics", "info", "bad"))
    assert f"{base}/bad" in line and "not a ManagedLedgerInfo" in line
    line = one_line_error(run(tmp_path, "--pulsar-metadata", url, "topics", "info", "secret"))
    assert f"{base}/secret: access denied" in line
    missing = zk_server.url(f"{cluster.chroot}-gone")
    line = one_line_error(run(tmp_path, "--pulsar-metadata", missing, "topics", "list"))
    assert f"the chroot {cluster.chroot}-gone does not exist" in line
