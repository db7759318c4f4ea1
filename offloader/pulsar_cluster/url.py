"""Pulsar's metadata-store URLs, parsed: ``zk:host:port[,host:port][/chroot]``.

Accepted as Pulsar's ``metadataStoreUrl`` spells them: ``zk:`` (and ``metadata-store:zk:``),
``zk://`` and a bare ``host:port[,host:port][/chroot]`` all mean ZooKeeper. ``etcd:`` and
``oxia://`` are Pulsar's other stores: named, and refused as not supported yet. A malformed URL
is a :class:`~offloader.errors.ConfigError` naming the part at fault.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from offloader.errors import ConfigError

_HOST_PORT = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+)(?::([0-9]{1,5}))?$")
DEFAULT_ZK_PORT = 2181


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
    hosts_part, slash, chroot = text.partition("/")
    chroot = (slash + chroot).rstrip("/") if slash else ""
    if chroot and ("//" in chroot or any(p in (".", "..") for p in chroot.split("/")[1:])):
        raise ConfigError(f"Pulsar metadata URL {url!r}: bad chroot {chroot!r}")
    hosts: list[str] = []
    for item in hosts_part.split(","):
        m = _HOST_PORT.match(item.strip())
        if m is None:
            raise ConfigError(f"Pulsar metadata URL {url!r}: {item.strip()!r} is not host:port")
        port = int(m.group(2)) if m.group(2) else DEFAULT_ZK_PORT
        if not 0 < port < 65536:
            raise ConfigError(f"Pulsar metadata URL {url!r}: port {port} is out of range")
        hosts.append(f"{m.group(1)}:{port}")
    return MetadataUrl("zk", tuple(hosts), chroot)
