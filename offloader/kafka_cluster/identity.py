"""Who this broker is and where its cluster's metadata lives.

* :func:`read_broker_identity`: ``meta.properties`` in a broker's log dir, as Kafka writes it
  (a Java properties file): ``version=0`` with ``broker.id`` in ZooKeeper mode, ``version=1``
  with ``node.id`` and ``cluster.id`` in KRaft mode (``directory.id`` too, not needed here).
  A missing, unreadable or malformed file is a :class:`~offloader.errors.KafkaMetadataError`
  naming it and what is wrong.
* :func:`parse_kafka_metadata_url` and :func:`open_cluster_view`: ``zk://host:port[,host:port]
  [/chroot]`` or ``zk:host:port...`` (the ZooKeeper backend) and ``kraft:<metadata log dir>``
  (the KRaft backend, loaded only when asked for); anything else is a
  :class:`~offloader.errors.ConfigError` naming the part at fault.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from offloader.errors import ConfigError, KafkaMetadataError
from offloader.kafka_cluster.base import KafkaClusterView
from offloader.zk.address import ZkAddress, parse_zk_address

META_PROPERTIES = "meta.properties"
_WHAT = "Kafka metadata URL"


@dataclass(frozen=True)
class BrokerIdentity:
    """A broker's ``meta.properties``: its id (``broker.id`` or ``node.id``), its cluster's
    id (None when a ZooKeeper-mode file has none) and the file's version."""

    broker_id: int
    cluster_id: str | None
    version: int
    mode: Literal["zookeeper", "kraft"]
    path: Path


def parse_properties(text: str) -> dict[str, str]:
    """A Java properties file's ``key=value`` (or ``key: value``) lines; ``#``/``!`` comments."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line[0] in "#!":
            continue
        cut = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
        if cut < 0:
            out[line] = ""
            continue
        out[line[:cut].strip()] = line[cut + 1 :].strip()
    return out


def read_broker_identity(log_dir: Path) -> BrokerIdentity:
    """This broker's identity from ``<log_dir>/meta.properties``."""
    path = Path(log_dir) / META_PROPERTIES
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise KafkaMetadataError(
            f"{path}: no such file: not a Kafka broker's log dir (Kafka writes meta.properties "
            "when it first starts on a log dir)"
        ) from None
    except OSError as exc:
        raise KafkaMetadataError(f"{path}: cannot be read ({exc.strerror})") from None
    try:
        props = parse_properties(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise KafkaMetadataError(f"{path}: not a properties file (not UTF-8 text)") from None

    def number(key: str) -> int:
        value = props[key]
        try:
            parsed = int(value)
        except ValueError:
            raise KafkaMetadataError(f"{path}: {key}={value!r} is not a number") from None
        if parsed < 0:
            raise KafkaMetadataError(f"{path}: {key}={parsed} is negative")
        return parsed

    if "version" not in props:
        raise KafkaMetadataError(f"{path}: no version= line (not a Kafka meta.properties)")
    version = number("version")
    cluster_id = props.get("cluster.id") or None
    if version == 0:
        if "broker.id" not in props:
            raise KafkaMetadataError(f"{path}: version 0 (ZooKeeper mode) without broker.id")
        return BrokerIdentity(number("broker.id"), cluster_id, 0, "zookeeper", path)
    if version == 1:
        if "node.id" not in props:
            raise KafkaMetadataError(f"{path}: version 1 (KRaft mode) without node.id")
        if cluster_id is None:
            raise KafkaMetadataError(f"{path}: version 1 (KRaft mode) without cluster.id")
        return BrokerIdentity(number("node.id"), cluster_id, 1, "kraft", path)
    raise KafkaMetadataError(f"{path}: version {version} is not one Kafka writes (0 or 1)")


@dataclass(frozen=True)
class KafkaMetadataUrl:
    """``zk`` with its address, or ``kraft`` with the metadata log dir."""

    scheme: Literal["zk", "kraft"]
    zookeeper: ZkAddress | None = None
    directory: Path | None = None

    @property
    def canonical(self) -> str:
        if self.zookeeper is not None:
            return f"zk:{self.zookeeper.text}"
        return f"kraft:{self.directory}"

    def __str__(self) -> str:
        return self.canonical


def parse_kafka_metadata_url(url: str) -> KafkaMetadataUrl:
    text = url.strip()
    if not text:
        raise ConfigError(
            f"the {_WHAT} is empty (expected zk:host:port[/chroot] or kraft:<metadata log dir>)"
        )
    lowered = text.lower()
    if lowered.startswith("kraft:"):
        rest = text[len("kraft:") :]
        if rest.startswith("//"):
            rest = rest[2:]
        if not rest:
            raise ConfigError(f"{_WHAT} {url!r}: no directory after kraft:")
        return KafkaMetadataUrl("kraft", directory=Path(rest))
    if lowered.startswith("zk://"):
        rest = text[5:]
    elif lowered.startswith("zk:"):
        rest = text[3:]
    else:
        raise ConfigError(
            f"{_WHAT} {url!r}: unknown scheme (expected zk://host:port[,host:port][/chroot], "
            "zk:host:port... or kraft:<metadata log dir>)"
        )
    return KafkaMetadataUrl("zk", zookeeper=parse_zk_address(rest, url, _WHAT))


def open_cluster_view(url: str, *, timeout: float = 10.0) -> KafkaClusterView:
    """A read-only view of the cluster ``url`` names (its first ``refresh`` done)."""
    parsed = parse_kafka_metadata_url(url)
    if parsed.zookeeper is not None:
        from offloader.kafka_cluster.zookeeper import ZooKeeperClusterView

        return ZooKeeperClusterView(parsed.zookeeper, timeout=timeout)
    assert parsed.directory is not None
    # the KRaft backend is loaded only when asked for (by name: it reads the metadata log)
    name = "offloader.kafka_cluster.kraft"
    try:
        kraft = importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name != name:
            raise
        raise ConfigError(f"{url!r}: the KRaft backend is not in this build") from None
    view: KafkaClusterView = kraft.KRaftClusterView(parsed.directory)
    view.refresh()
    return view
