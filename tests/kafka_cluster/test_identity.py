"""``meta.properties`` as Kafka writes it (ZooKeeper and KRaft modes) and the metadata URL."""

from __future__ import annotations

from pathlib import Path

import pytest

from offloader.errors import ConfigError, KafkaMetadataError
from offloader.kafka_cluster import parse_kafka_metadata_url, read_broker_identity

ZK_MODE = """#
#Tue Nov 28 01:02:03 UTC 2026
cluster.id=Zk3vT6aBQ3Ka9Xb1c2d3eA
version=0
broker.id=2
"""

KRAFT_MODE = """#
#Tue Nov 28 01:02:03 UTC 2026
node.id=3
directory.id=J8aAPkiVQ1S-6t2hYm2j4g
version=1
cluster.id=MkU3OEVBNTcwNTJENDM2Qk
"""


def _write(tmp_path: Path, text: str | bytes) -> Path:
    data = text.encode() if isinstance(text, str) else text
    (tmp_path / "meta.properties").write_bytes(data)
    return tmp_path


def test_zookeeper_mode(tmp_path: Path) -> None:
    identity = read_broker_identity(_write(tmp_path, ZK_MODE))
    assert (identity.broker_id, identity.cluster_id, identity.version, identity.mode) == (
        2,
        "Zk3vT6aBQ3Ka9Xb1c2d3eA",
        0,
        "zookeeper",
    )


def test_kraft_mode(tmp_path: Path) -> None:
    identity = read_broker_identity(_write(tmp_path, KRAFT_MODE))
    assert (identity.broker_id, identity.cluster_id, identity.version, identity.mode) == (
        3,
        "MkU3OEVBNTcwNTJENDM2Qk",
        1,
        "kraft",
    )


@pytest.mark.parametrize(
    ("text", "fault"),
    [
        ("broker.id=1\n", "no version= line"),
        ("version=0\ncluster.id=x\n", "without broker.id"),
        ("version=1\nnode.id=1\n", "without cluster.id"),
        ("version=1\ncluster.id=x\n", "without node.id"),
        ("version=0\nbroker.id=one\n", "broker.id='one' is not a number"),
        ("version=0\nbroker.id=-1\n", "is negative"),
        ("version=7\nbroker.id=1\n", "version 7"),
        (b"version=0\nbroker.id=\xff\n", "not UTF-8"),
    ],
)
def test_malformed_files_are_named(tmp_path: Path, text: str | bytes, fault: str) -> None:
    with pytest.raises(KafkaMetadataError, match=r"meta\.properties") as info:
        read_broker_identity(_write(tmp_path, text))
    assert fault in str(info.value)


def test_a_missing_file(tmp_path: Path) -> None:
    with pytest.raises(KafkaMetadataError, match=r"meta\.properties: no such file"):
        read_broker_identity(tmp_path)


@pytest.mark.parametrize(
    ("url", "canonical"),
    [
        ("zk://h1:2181,h2:2182/kafka", "zk:h1:2181,h2:2182/kafka"),
        ("zk:h1/kafka/", "zk:h1:2181/kafka"),
        ("ZK:[::1]:2181", "zk:[::1]:2181"),
        ("kraft:/var/lib/kafka/meta", "kraft:/var/lib/kafka/meta"),
        ("kraft:///var/lib/kafka/meta", "kraft:/var/lib/kafka/meta"),
    ],
)
def test_urls(url: str, canonical: str) -> None:
    assert parse_kafka_metadata_url(url).canonical == canonical


@pytest.mark.parametrize(
    ("url", "fault"),
    [
        ("", "empty"),
        ("etcd:h:1", "unknown scheme"),
        ("h1:2181", "unknown scheme"),
        ("zk:h:99999", "out of range"),
        ("zk:h p:1", "not host:port"),
        ("zk:h:1/a//b", "bad chroot"),
        ("kraft:", "no directory"),
    ],
)
def test_bad_urls(url: str, fault: str) -> None:
    with pytest.raises(ConfigError, match=fault):
        parse_kafka_metadata_url(url)
