"""Fixtures of the Kafka cluster view tests: a writer per backend (``WRITERS``), each on a
fresh cluster (ZooKeeper: a new chroot on the session's server)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from devservers.zookeeper import ZkServer
from tests.kafka_cluster.kraft_writer import KRaftClusterWriter
from tests.kafka_cluster.writers import ClusterWriter
from tests.kafka_cluster.zk_writer import ZkClusterWriter


@pytest.fixture(scope="session")
def kafka_zk_admin(zk_server: ZkServer) -> Iterator[KazooClient]:
    client = KazooClient(hosts=zk_server.hosts, timeout=15)
    client.start(timeout=30)
    yield client
    client.stop()
    client.close()


def _zk(request: pytest.FixtureRequest, tmp_path: Path) -> ClusterWriter:
    server = request.getfixturevalue("zk_server")
    client = request.getfixturevalue("kafka_zk_admin")
    return ZkClusterWriter(client, server, f"/kafka-{uuid.uuid4().hex[:12]}")


def _kraft(request: pytest.FixtureRequest, tmp_path: Path) -> ClusterWriter:
    return KRaftClusterWriter(tmp_path)


#: backend name -> the writer of a fresh cluster
WRITERS: dict[str, Callable[[pytest.FixtureRequest, Path], ClusterWriter]] = {
    "kraft": _kraft,
    "zookeeper": _zk,
}


#: the marks of a backend's tests (deselected where its server cannot run)
MARKS = {"zookeeper": [pytest.mark.zookeeper]}


@pytest.fixture(params=[pytest.param(name, marks=MARKS.get(name, [])) for name in sorted(WRITERS)])
def writer(request: pytest.FixtureRequest, tmp_path: Path) -> ClusterWriter:
    return WRITERS[request.param](request, tmp_path)
