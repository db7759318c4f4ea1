"""The ZooKeeper backend's own edges: each bad cluster (unreachable, missing chroot, not
Kafka's, a node the ACL refuses, JSON Kafka never writes) is one typed error naming the znode;
and its steady state: a refresh with nothing changed reads nothing but a sync."""

from __future__ import annotations

import uuid

import pytest
from kazoo.client import KazooClient
from kazoo.security import make_digest_acl

from devservers.postgres import free_port
from devservers.zookeeper import ZkServer
from offloader.errors import KafkaMetadataError, KafkaMetadataUnavailable
from offloader.kafka_cluster import open_cluster_view
from tests.kafka_cluster.zk_writer import ZkClusterWriter

pytestmark = pytest.mark.zookeeper

ID = "vH8B7dzFR2-2sPSvS9vV2w"


@pytest.fixture()
def zk_writer(zk_server: ZkServer, kafka_zk_admin: KazooClient) -> ZkClusterWriter:
    return ZkClusterWriter(kafka_zk_admin, zk_server, f"/kafka-{uuid.uuid4().hex[:12]}")


def test_an_unreachable_zookeeper_is_unavailable() -> None:
    port = free_port()
    with pytest.raises(KafkaMetadataUnavailable, match=f"127.0.0.1:{port}"):
        open_cluster_view(f"zk://127.0.0.1:{port}", timeout=1.0)


def test_a_missing_chroot_is_named(zk_server: ZkServer, kafka_zk_admin: KazooClient) -> None:
    # kafka_zk_admin: the server's first session made (its first write preallocates the log)
    with pytest.raises(KafkaMetadataError, match="chroot /no-such-kafka does not exist"):
        open_cluster_view(zk_server.url("/no-such-kafka"))


def test_a_root_without_brokers_topics_is_not_kafka(
    zk_server: ZkServer, kafka_zk_admin: KazooClient
) -> None:
    kafka_zk_admin.ensure_path("/not-kafka/x")
    with pytest.raises(KafkaMetadataError, match="no /not-kafka/brokers/topics node"):
        open_cluster_view(zk_server.url("/not-kafka"))


def test_an_acl_protected_state_node_names_its_path(zk_writer: ZkClusterWriter) -> None:
    zk_writer.create_topic("ok", ID, {0: [1]})
    path = f"{zk_writer.chroot}/brokers/topics/secret"
    zk_writer.client.create(
        path,
        b'{"version":3,"partitions":{"0":[1]}}',
        acl=[make_digest_acl("someone", "else", all=True)],
    )
    with pytest.raises(KafkaMetadataError, match=f"{path}: access denied"):
        open_cluster_view(zk_writer.url)


@pytest.mark.parametrize(
    ("node", "value", "fault"),
    [
        ("/brokers/topics/t", b"{not json", "malformed JSON"),
        ("/brokers/topics/t", b'{"version":3}', "no partitions map"),
        ("/brokers/topics/t", b'{"partitions":{"x":[1]}}', "partition 'x'"),
        ("/brokers/topics/t/partitions/0/state", b'{"leader":"1"}', "leader '1'"),
        ("/brokers/topics/t/partitions/0/state", b"\xff\xfe", "malformed JSON"),
        ("/config/topics/t", b'{"version":1,"config":{"a":1}}', "not a map of strings"),
    ],
)
def test_json_kafka_never_writes_names_the_znode(
    zk_writer: ZkClusterWriter, node: str, value: bytes, fault: str
) -> None:
    zk_writer.create_topic("t", ID, {0: [1]})
    zk_writer.client.set(zk_writer.chroot + node, value)
    with pytest.raises(KafkaMetadataError) as info:
        open_cluster_view(zk_writer.url)
    message = str(info.value)
    assert f"{zk_writer.chroot}{node}:" in message and fault in message
    assert "\n" not in message


def test_a_bad_node_written_while_running_fails_the_refresh_then_recovers(
    zk_writer: ZkClusterWriter,
) -> None:
    zk_writer.create_topic("t", ID, {0: [1, 2]})
    with open_cluster_view(zk_writer.url) as view:
        state = f"{zk_writer.chroot}/brokers/topics/t/partitions/0/state"
        zk_writer.client.set(state, b"[]")
        with pytest.raises(KafkaMetadataError, match=f"{state}: malformed JSON"):
            view.refresh()
        zk_writer.set_leader("t", 0, 2, 5, [2])
        view.refresh()
        p = view.partition("t", 0)
        assert p is not None and (p.leader, p.leader_epoch) == (2, 5)


def test_broker_default_synonyms(zk_writer: ZkClusterWriter) -> None:
    zk_writer.create_topic("t", ID, {0: [1]})
    zk_writer.client.create(
        f"{zk_writer.chroot}/config/brokers/<default>",
        b'{"version":1,"config":{"log.retention.hours":"2","log.cleanup.policy":"compact"}}',
    )
    with open_cluster_view(zk_writer.url) as view:
        topic = view.topic("t")
        assert topic is not None
        assert topic.config.retention_ms == 2 * 3_600_000
        assert topic.config.compacted


def test_a_steady_refresh_reads_no_node(zk_writer: ZkClusterWriter) -> None:
    for n in range(5):
        zk_writer.create_topic(f"t{n}", ID, {p: [1, 2] for p in range(4)})
    with open_cluster_view(zk_writer.url) as view:
        reads: list[str] = []
        inner = view._zk.get_many  # type: ignore[attr-defined]

        def counting(paths, watch=None):  # type: ignore[no-untyped-def]
            paths = list(paths)
            reads.extend(paths)
            return inner(paths, watch)

        view._zk.get_many = counting  # type: ignore[attr-defined]
        view.refresh()
        view.refresh()
        assert reads == []
        zk_writer.set_leader("t3", 2, 2, 1, [2])
        view.refresh()
        assert reads == [f"{zk_writer.chroot}/brokers/topics/t3/partitions/2/state"]


def test_a_session_break_reads_everything_again(zk_writer: ZkClusterWriter) -> None:
    from kazoo.client import KazooState

    for n in range(3):
        zk_writer.create_topic(f"t{n}", ID, {0: [1], 1: [1]})
    with open_cluster_view(zk_writer.url) as view:
        reads: list[str] = []
        inner = view._zk.get_many  # type: ignore[attr-defined]

        def counting(paths, watch=None):  # type: ignore[no-untyped-def]
            paths = list(paths)
            reads.extend(paths)
            return inner(paths, watch)

        view._zk.get_many = counting  # type: ignore[attr-defined]
        # kazoo tells its listeners the connection was suspended: watches may have been lost
        view._zk._on_state(KazooState.SUSPENDED)  # type: ignore[attr-defined]
        view.refresh()
        states = [p for p in reads if p.endswith("/state")]
        assert len(states) == 6 and len([p for p in reads if "/config/" in p]) == 4
        reads.clear()
        view.refresh()
        assert reads == []
