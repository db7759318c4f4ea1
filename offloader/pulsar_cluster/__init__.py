"""A real Pulsar cluster's managed ledgers, read-only, from its metadata store.

``base.py`` holds the :class:`PulsarClusterSource` Protocol and the values it returns,
``url.py`` parses Pulsar's metadata-store URLs, ``zookeeper.py`` is the ZooKeeper backend (the
only module that imports ``kazoo``), and :func:`open_cluster_source` chooses the backend by
URL. Nothing here ever writes to the cluster's metadata store.
"""

from __future__ import annotations

from offloader.pulsar_cluster.base import ClusterTopic, PulsarClusterSource
from offloader.pulsar_cluster.url import MetadataUrl, parse_metadata_url


def open_cluster_source(url: str, *, timeout: float = 10.0) -> PulsarClusterSource:
    """A connected, read-only source for ``url`` (Pulsar's metadata-store URL forms)."""
    parsed = parse_metadata_url(url)
    from offloader.pulsar_cluster.zookeeper import ZooKeeperSource

    return ZooKeeperSource(parsed, timeout=timeout)


__all__ = [
    "ClusterTopic",
    "MetadataUrl",
    "PulsarClusterSource",
    "open_cluster_source",
    "parse_metadata_url",
]
