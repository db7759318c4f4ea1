"""ZooKeeper addresses: the ``host:port[,host:port][/chroot]`` part of a ZooKeeper URL.

Each reader parses its own scheme in front of it (``offloader.pulsar_cluster.url``,
``offloader.kafka_cluster.identity``); a malformed address is a
:class:`~offloader.errors.ConfigError` naming the part at fault. Pure: no kazoo.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from offloader.errors import ConfigError

_HOST_PORT = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+)(?::([0-9]{1,5}))?$")
DEFAULT_ZK_PORT = 2181


@dataclass(frozen=True)
class ZkAddress:
    """ZooKeeper's ``host:port`` list and the chroot (``""`` or ``/a/b``, no trailing slash)."""

    hosts: tuple[str, ...]
    chroot: str = ""

    @property
    def text(self) -> str:
        """``host:port,host:port/chroot``."""
        return f"{','.join(self.hosts)}{self.chroot}"


def parse_zk_address(text: str, url: str, what: str) -> ZkAddress:
    """``host[:port][,host[:port]...][/chroot]`` (the scheme already taken off ``text``);
    ``url`` and ``what`` ("Pulsar metadata URL") name the value in errors."""
    hosts_part, slash, chroot = text.partition("/")
    chroot = (slash + chroot).rstrip("/") if slash else ""
    if chroot and ("//" in chroot or any(p in (".", "..") for p in chroot.split("/")[1:])):
        raise ConfigError(f"{what} {url!r}: bad chroot {chroot!r}")
    hosts: list[str] = []
    for item in hosts_part.split(","):
        m = _HOST_PORT.match(item.strip())
        if m is None:
            raise ConfigError(f"{what} {url!r}: {item.strip()!r} is not host:port")
        port = int(m.group(2)) if m.group(2) else DEFAULT_ZK_PORT
        if not 0 < port < 65536:
            raise ConfigError(f"{what} {url!r}: port {port} is out of range")
        hosts.append(f"{m.group(1)}:{port}")
    return ZkAddress(tuple(hosts), chroot)
