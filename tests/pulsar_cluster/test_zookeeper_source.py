"""The ZooKeeper source against a real ZooKeeper (Debian's package): nodes written as a broker
writes them (every compression, partitioned topics, cursors as children, a terminated
managed ledger), and each bad input as one clear error naming the path."""

from __future__ import annotations

import pytest
from kazoo.client import KazooClient
from kazoo.security import make_digest_acl

from devservers.postgres import free_port
from devservers.zookeeper import ZkServer
from formats.errors import ManagedLedgerInfoError
from formats.pulsar import compression
from formats.pulsar.managed_ledger_info import ManagedLedgerInfo, ledger_refs_of
from offloader.errors import (
    ConfigError,
    NotFound,
    PulsarMetadataError,
    PulsarMetadataUnavailable,
)
from offloader.pulsar_cluster import open_cluster_source, parse_metadata_url
from offloader.pulsar_cluster.base import resolve_topic, select_topics
from tests.pulsar_cluster.cluster_writer import ClusterWriter, offloaded, plain

pytestmark = pytest.mark.zookeeper

U1 = "11111111-2222-4333-8444-555555555555"
U2 = "aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee"


def _url(zk: ZkServer, cluster: ClusterWriter) -> str:
    return zk.url(cluster.chroot)


@pytest.mark.parametrize("codec", sorted(compression.CODEC_NAMES))
def test_each_compression_a_broker_writes_is_read(
    zk_server: ZkServer, cluster: ClusterWriter, codec: int
) -> None:
    info = ManagedLedgerInfo(
        (offloaded(3, U1, entries=7), offloaded(5, U2, complete=False), plain(8)),
        properties=(("a", "b"),),
    )
    cluster.put_topic("persistent://public/default/orders", info, codec=codec)
    with open_cluster_source(_url(zk_server, cluster)) as source:
        got = source.managed_ledger("public/default/orders")
    assert got.info == info
    assert got.topic == "persistent://public/default/orders"
    assert got.path.endswith("/managed-ledgers/public/default/persistent/orders")
    assert [li.ledger_id for li in got.offloaded] == [3]
    assert [li.ledger_id for li in got.not_offloaded] == [5, 8]


def test_listing_tenants_namespaces_and_topics(zk_server: ZkServer, cluster: ClusterWriter) -> None:
    cluster.put_topic("public/default/orders", ManagedLedgerInfo((plain(1),)))
    cluster.put_topic("persistent://public/default/with space ü", ManagedLedgerInfo((plain(2),)))
    cluster.put_partitioned(
        "t1/ns1/events", [ManagedLedgerInfo((plain(10 + n),)) for n in range(3)]
    )
    cluster.put_topic(
        "t1/ns2/done",
        ManagedLedgerInfo((offloaded(4, U1),), terminated_position=(4, 9)),
        codec=compression.ZLIB,
    )
    source = open_cluster_source(_url(zk_server, cluster))
    try:
        assert source.tenants() == ["public", "t1"]
        assert source.namespaces("t1") == ["t1/ns1", "t1/ns2"]
        assert source.topics("public/default") == [
            "persistent://public/default/orders",
            "persistent://public/default/with space ü",
        ]
        partitions = [f"persistent://t1/ns1/events-partition-{n}" for n in range(3)]
        assert source.topics("t1/ns1") == partitions
        assert resolve_topic(source, "t1/ns1/events") == partitions
        assert select_topics(source, "t1/ns1") == partitions
        assert select_topics(source, r"regex:.*/(orders|done)") == [
            "persistent://public/default/orders",
            "persistent://t1/ns2/done",
        ]
        assert select_topics(source, "orders, t1/ns2/done") == [
            "persistent://public/default/orders",
            "persistent://t1/ns2/done",
        ]
        # the one selection form (issue 35): a regex needs no prefix, and matches t/ns/x too
        assert select_topics(source, "t1/ns./(events-partition-1|done)") == [
            partitions[1],
            "persistent://t1/ns2/done",
        ]
        assert select_topics(source, "t1/ns2, t1/ns1/events") == [
            *partitions,
            "persistent://t1/ns2/done",
        ]
        many = source.managed_ledgers([*partitions, "t1/ns2/done", "t1/ns2/gone"])
        assert [c.info.ledgers[0].ledger_id for c in many] == [10, 11, 12, 4]
        assert many[-1].info.terminated_position == (4, 9)
        # the audit's view of the same nodes: the same topics, paths and ledgers
        refs = source.ledger_refs([*partitions, "t1/ns2/done", "t1/ns2/gone", "with space ü"])
        assert refs == [
            (c.topic, c.path, ledger_refs_of(c.info))
            for c in source.managed_ledgers([*partitions, "t1/ns2/done", "with space ü"])
        ]
        assert refs[3].ledgers == [(4, U1, True, ())]
        assert source.managed_ledger("with space ü").info.ledgers[0].ledger_id == 2
        with pytest.raises(NotFound, match="t1/ns2/gone"):
            source.managed_ledger("t1/ns2/gone")
        with pytest.raises(NotFound, match="matches"):
            select_topics(source, "regex:nothing")
    finally:
        source.close()


def test_a_node_that_is_not_a_managed_ledger_info_names_its_path(
    zk_server: ZkServer, cluster: ClusterWriter
) -> None:
    cluster.put_raw("/managed-ledgers/public/default/persistent/bad", b"\x0a\x05\x08\x01")
    with pytest.raises(ManagedLedgerInfoError) as info:
        open_cluster_source(_url(zk_server, cluster)).managed_ledger("bad")
    message = str(info.value)
    assert "/managed-ledgers/public/default/persistent/bad" in message
    assert "\n" not in message
    with pytest.raises(ManagedLedgerInfoError) as refs_error:
        open_cluster_source(_url(zk_server, cluster)).ledger_refs(["bad"])
    assert str(refs_error.value) == message


def test_an_unreachable_zookeeper_is_unavailable() -> None:
    port = free_port()
    with pytest.raises(PulsarMetadataUnavailable, match=f"127.0.0.1:{port}"):
        open_cluster_source(f"zk:127.0.0.1:{port}", timeout=1.0)


def test_a_missing_chroot_is_named(zk_server: ZkServer) -> None:
    with pytest.raises(PulsarMetadataError, match="chroot /no-such-root does not exist"):
        open_cluster_source(zk_server.url("/no-such-root"))


def test_a_root_without_managed_ledgers_is_not_a_pulsar_store(
    zk_server: ZkServer, zk_admin: KazooClient
) -> None:
    zk_admin.ensure_path("/not-pulsar/x")
    with pytest.raises(PulsarMetadataError, match="no /not-pulsar/managed-ledgers node"):
        open_cluster_source(zk_server.url("/not-pulsar"))


def test_an_acl_protected_node_names_its_path(zk_server: ZkServer, cluster: ClusterWriter) -> None:
    path = f"{cluster.chroot}/managed-ledgers/public/default/persistent/secret"
    cluster.client.ensure_path(path.rsplit("/", 1)[0])
    cluster.client.create(path, b"", acl=[make_digest_acl("someone", "else", all=True)])
    source = open_cluster_source(_url(zk_server, cluster))
    try:
        with pytest.raises(PulsarMetadataError, match=f"{path}: access denied"):
            source.managed_ledger("secret")
        with pytest.raises(PulsarMetadataError, match=f"{path}: access denied"):
            source.managed_ledgers(["secret"])
    finally:
        source.close()


@pytest.mark.parametrize(
    ("url", "canonical"),
    [
        ("zk:h1:2181,h2:2182/pulsar", "zk:h1:2181,h2:2182/pulsar"),
        ("zk://h1:2181/", "zk:h1:2181"),
        ("h1:2000", "zk:h1:2000"),
        ("metadata-store:zk:h1", "zk:h1:2181"),
        ("zk:[::1]:2181/a/b", "zk:[::1]:2181/a/b"),
    ],
)
def test_metadata_url_forms(url: str, canonical: str) -> None:
    assert parse_metadata_url(url).canonical == canonical


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("", "empty"),
        ("etcd:http://h:2379", "etcd metadata store is not supported yet"),
        ("oxia://h:6648", "oxia metadata store is not supported yet"),
        ("http://h:80", "unknown scheme"),
        ("zk:h:99999", "out of range"),
        ("zk:h:1/a//b", "bad chroot"),
        ("zk:h p:1", "not host:port"),
    ],
)
def test_bad_metadata_urls(url: str, words: str) -> None:
    with pytest.raises(ConfigError, match=words):
        parse_metadata_url(url)


def test_a_text_format_node_of_an_old_cluster_is_read(
    zk_server: ZkServer, cluster: ClusterWriter
) -> None:
    """The oldest brokers wrote protobuf's text format: read as Pulsar reads it (the binary
    decoders, C and pure, refuse it first)."""
    from google.protobuf import text_format

    from tests.formats.test_managed_ledger_info import _official

    info = ManagedLedgerInfo((offloaded(3, U1, entries=7), plain(8)), terminated_position=(8, 0))
    text = text_format.MessageToString(_official(info)).encode()
    cluster.put_raw("/managed-ledgers/public/default/persistent/old", text)
    with open_cluster_source(_url(zk_server, cluster)) as source:
        assert source.managed_ledger("public/default/old").info == info
        (got,) = source.managed_ledgers(["persistent://public/default/old"])
    assert got.info == info and [li.ledger_id for li in got.offloaded] == [3]
