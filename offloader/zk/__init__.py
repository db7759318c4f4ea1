"""ZooKeeper for the readers of a cluster's metadata (Pulsar's and Kafka's), read-only.

``address.py`` parses ``host:port[,host:port][/chroot]`` (pure); ``reader.py`` is the read-only
session (:class:`~offloader.zk.reader.ZkReader`, the only module that imports ``kazoo``),
imported by the backends that connect, so parsing a URL never loads kazoo.
"""

from __future__ import annotations

from offloader.zk.address import DEFAULT_ZK_PORT, ZkAddress, parse_zk_address

__all__ = ["DEFAULT_ZK_PORT", "ZkAddress", "parse_zk_address"]
