"""The :class:`PulsarClusterSource` Protocol: a Pulsar cluster's managed ledgers, read-only.

A source lists the cluster's tenants, namespaces and topics (a partitioned topic as its
partitions, ``<name>-partition-<n>``, each a managed ledger of its own) and reads each topic's
``ManagedLedgerInfo`` (:mod:`formats.pulsar.managed_ledger_info`). Backends (ZooKeeper today;
Pulsar's etcd and Oxia stores could follow) translate their client's errors into
:class:`~offloader.errors.PulsarMetadataError` (a path named) and
:class:`~offloader.errors.PulsarMetadataUnavailable`. :func:`select_topics` turns a user's
``topics`` selection (:mod:`offloader.selection`: names, a namespace, or a regex) into topic
names.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple, Protocol

from formats.pulsar.managed_ledger_info import LedgerInfo, LedgerRef, ManagedLedgerInfo
from offloader.errors import ConfigError, InvalidName, NotFound
from offloader.naming import TopicName
from offloader.selection import TopicSelection

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


class ClusterLedgerRefs(NamedTuple):
    """One managed ledger as an orphan audit reads it: its topic name, node path, and per
    ledger only ``(ledger id, UUID, complete, segment UUIDs)`` (:data:`LedgerRef`), equal to
    ``ledger_refs_of`` of the :class:`ClusterTopic`'s value."""

    topic: str
    path: str
    ledgers: list[LedgerRef]


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

    def ledger_refs(self, topics: Sequence[str]) -> list[ClusterLedgerRefs]:
        """:meth:`managed_ledgers` as the orphan audit needs it (no dataclass per ledger): the
        same topics, paths, ledgers and errors."""
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


def select_topics(source: PulsarClusterSource, selection: str | TopicSelection) -> list[str]:
    """The topics a ``topics`` selection names (the one form of :mod:`offloader.selection`):
    each name given (a partitioned topic's base name selects its partitions; a name with no
    managed ledger is a :class:`~offloader.errors.NotFound`), each namespace's topics, and
    every topic of the cluster a regex matches in full (full or ``t/ns/x`` names; only then is
    the whole cluster listed). An empty result is a :class:`~offloader.errors.NotFound`."""
    chosen = selection if isinstance(selection, TopicSelection) else TopicSelection.parse(selection)
    out: list[str] = []
    for part in chosen.names:
        try:
            name = str(TopicName.parse(part))
        except InvalidName as exc:
            raise ConfigError(str(exc)) from None
        out.extend(resolve_topic(source, name))
    for namespace in chosen.namespaces:
        topics = source.topics(namespace)
        if not topics:
            raise NotFound(f"namespace {namespace} has no topics in {source.location}")
        out.extend(topics)
    if chosen.patterns:
        matched = chosen.select(all_topics(source))
        if not matched:
            raise NotFound(f"no topic of {source.location} matches {chosen.text!r}")
        out.extend(matched)
    return list(dict.fromkeys(out))


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
