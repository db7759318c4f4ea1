"""The :class:`PulsarClusterSource` Protocol: a Pulsar cluster's managed ledgers, read-only.

A source lists the cluster's tenants, namespaces and topics (a partitioned topic as its
partitions, ``<name>-partition-<n>``, each a managed ledger of its own) and reads each topic's
``ManagedLedgerInfo`` (:mod:`formats.pulsar.managed_ledger_info`). Backends (ZooKeeper today;
Pulsar's etcd and Oxia stores could follow) translate their client's errors into
:class:`~offloader.errors.PulsarMetadataError` (a path named) and
:class:`~offloader.errors.PulsarMetadataUnavailable`. :func:`select_topics` turns a user's
``topics`` selection (names, a namespace, or a regex) into topic names.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from formats.pulsar.managed_ledger_info import LedgerInfo, ManagedLedgerInfo
from offloader.errors import ConfigError, InvalidName, NotFound
from offloader.naming import TopicName

#: where Pulsar keeps its managed ledgers (under the chroot)
MANAGED_LEDGERS_ROOT = "/managed-ledgers"


@dataclass(frozen=True)
class ClusterTopic:
    """One managed ledger of the cluster: its topic name, node path and decoded value."""

    topic: str
    path: str
    info: ManagedLedgerInfo

    @property
    def offloaded(self) -> tuple[LedgerInfo, ...]:
        """The ledgers whose offload Pulsar considers complete, in the managed ledger's order."""
        return tuple(li for li in self.info.ledgers if li.offloaded)

    @property
    def not_offloaded(self) -> tuple[LedgerInfo, ...]:
        return tuple(li for li in self.info.ledgers if not li.offloaded)


class PulsarClusterSource(Protocol):
    """A Pulsar cluster's metadata store, read-only."""

    @property
    def location(self) -> str:
        """The store's canonical URL (``zk:host:port/chroot``): the cluster's identity."""
        ...

    def tenants(self) -> list[str]: ...

    def namespaces(self, tenant: str) -> list[str]:
        """``tenant/namespace`` of each namespace of ``tenant`` that has managed ledgers."""
        ...

    def topics(self, namespace: str) -> list[str]:
        """Full names (``persistent://...``) of the namespace's managed ledgers, sorted."""
        ...

    def managed_ledger(self, topic: str) -> ClusterTopic:
        """One topic's managed ledger; :class:`~offloader.errors.NotFound` when it has none."""
        ...

    def managed_ledgers(self, topics: Sequence[str]) -> list[ClusterTopic]:
        """Many topics' managed ledgers at once (pipelined reads), in the order given; a topic
        without a node is left out."""
        ...

    def close(self) -> None: ...

    def __enter__(self) -> PulsarClusterSource: ...

    def __exit__(self, *exc: object) -> None: ...


def all_topics(source: PulsarClusterSource) -> list[str]:
    """Every topic of the cluster, tenant by tenant, namespace by namespace."""
    out: list[str] = []
    for tenant in source.tenants():
        for namespace in source.namespaces(tenant):
            out.extend(source.topics(namespace))
    return out


def select_topics(source: PulsarClusterSource, selection: str) -> list[str]:
    """The topics a ``topics`` option names: comma-separated topic names (a partitioned topic's
    base name selects its partitions), a namespace ``tenant/ns``, or ``regex:PATTERN`` (a
    Python regex matched in full against full topic names). An empty result is a
    :class:`~offloader.errors.NotFound`."""
    text = selection.strip()
    if not text:
        raise ConfigError("the topics selection is empty")
    if text.startswith("regex:"):
        try:
            pattern = re.compile(text[len("regex:") :])
        except re.error as exc:
            raise ConfigError(f"bad topics regex {text!r}: {exc}") from None
        chosen = [t for t in all_topics(source) if pattern.fullmatch(t)]
        if not chosen:
            raise NotFound(f"no topic of {source.location} matches {text!r}")
        return chosen
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if len(parts) == 1 and "://" not in parts[0] and parts[0].count("/") == 1:
        topics = source.topics(parts[0])
        if not topics:
            raise NotFound(f"namespace {parts[0]} has no topics in {source.location}")
        return topics
    chosen = []
    for part in parts:
        try:
            name = str(TopicName.parse(part))
        except InvalidName as exc:
            raise ConfigError(str(exc)) from None
        chosen.extend(resolve_topic(source, name))
    return chosen


def resolve_topic(source: PulsarClusterSource, topic: str) -> list[str]:
    """``topic`` itself when it has a managed ledger, else its partitions (a partitioned
    topic's base name), else :class:`~offloader.errors.NotFound`."""
    name = TopicName.parse(topic)
    listed = source.topics(name.namespace)
    if str(name) in listed:
        return [str(name)]
    prefix = f"{name}-partition-"
    partitions = [t for t in listed if t.startswith(prefix) and t[len(prefix) :].isdigit()]
    if partitions:
        return sorted(partitions, key=lambda t: int(t[len(prefix) :]))
    raise NotFound(f"topic {name} has no managed ledger in {source.location}")
