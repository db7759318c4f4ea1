"""Pulsar's metadata-store URLs, parsed: ``zk:host:port[,host:port][/chroot]``.

Accepted as Pulsar's ``metadataStoreUrl`` spells them: ``zk:`` (and ``metadata-store:zk:``),
``zk://`` and a bare ``host:port[,host:port][/chroot]`` all mean ZooKeeper. ``etcd:`` and
``oxia://`` are Pulsar's other stores: named, and refused as not supported yet. A malformed URL
is a :class:`~offloader.errors.ConfigError` naming the part at fault (the ``host:port`` list
and chroot are parsed by :func:`offloader.zk.address.parse_zk_address`, shared with the Kafka
reader).
"""

from __future__ import annotations

from dataclasses import dataclass

from offloader.errors import ConfigError
from offloader.zk.address import DEFAULT_ZK_PORT, parse_zk_address

__all__ = ["DEFAULT_ZK_PORT", "MetadataUrl", "parse_metadata_url"]


@dataclass(frozen=True)
class MetadataUrl:
    """A parsed metadata-store URL: the backend, its ``host:port`` list and the chroot."""

    scheme: str
    hosts: tuple[str, ...]
    chroot: str = ""

    @property
    def canonical(self) -> str:
        """``zk:host:port,host:port/chroot``: the cluster's identity in watermarks and logs."""
        return f"{self.scheme}:{','.join(self.hosts)}{self.chroot}"

    def __str__(self) -> str:
        return self.canonical


def parse_metadata_url(url: str) -> MetadataUrl:
    text = url.strip()
    if not text:
        raise ConfigError("the Pulsar metadata URL is empty (expected zk:host:port[/chroot])")
    if text.startswith("metadata-store:"):
        text = text[len("metadata-store:") :]
    lowered = text.lower()
    for other in ("etcd:", "oxia:", "rocksdb:", "memory:"):
        if lowered.startswith(other):
            raise ConfigError(
                f"Pulsar metadata URL {url!r}: the {other[:-1]} metadata store is not supported "
                "yet (only ZooKeeper: zk:host:port[/chroot])"
            )
    if lowered.startswith("zk://"):
        text = text[5:]
    elif lowered.startswith("zk:"):
        text = text[3:]
    elif "://" in text:
        raise ConfigError(
            f"Pulsar metadata URL {url!r}: unknown scheme (expected zk:host:port[/chroot])"
        )
    address = parse_zk_address(text, url, "Pulsar metadata URL")
    return MetadataUrl("zk", address.hosts, address.chroot)
