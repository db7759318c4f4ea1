"""Fixtures of the Pulsar-cluster tests: a kazoo writer on the session's ZooKeeper, and a
fresh chroot per test (the cluster a test describes lives under it)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from kazoo.client import KazooClient

from devservers.zookeeper import ZkServer
from tests.pulsar_cluster.cluster_writer import ClusterWriter


@pytest.fixture(scope="session")
def zk_admin(zk_server: ZkServer) -> Iterator[KazooClient]:
    client = KazooClient(hosts=zk_server.hosts, timeout=15)
    client.start(timeout=30)
    yield client
    client.stop()
    client.close()


@pytest.fixture()
def cluster(zk_admin: KazooClient) -> ClusterWriter:
    """A writer under a new chroot ``/t-<hex>`` (created, with ``/managed-ledgers``)."""
    chroot = f"/t-{uuid.uuid4().hex[:12]}"
    zk_admin.ensure_path(f"{chroot}/managed-ledgers")
    return ClusterWriter(zk_admin, chroot)
