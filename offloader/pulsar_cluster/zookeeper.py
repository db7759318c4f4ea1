"""The ZooKeeper backend of :class:`~offloader.pulsar_cluster.base.PulsarClusterSource`.

It reads through :class:`offloader.zk.reader.ZkReader` (the one module that imports ``kazoo``,
shared with the Kafka cluster's reader), connected without a chroot: the URL's chroot is put in
front of every path here, so every error names the full path on the server. It only reads
(``get_children``, ``get``, ``exists``): nothing here can write to the cluster's store.
ZooKeeper's errors become :class:`~offloader.errors.PulsarMetadataError` (``NoAuthError``: the
node's ACL refuses us; a missing chroot or ``/managed-ledgers``) and
:class:`~offloader.errors.PulsarMetadataUnavailable` (no server answers, the session broke);
a value that is not a ``ManagedLedgerInfo`` is a
:class:`~formats.errors.ManagedLedgerInfoError` naming its path.
"""

from __future__ import annotations

from collections.abc import Sequence
from urllib.parse import unquote_plus

from formats.errors import ManagedLedgerInfoError
from formats.pulsar.managed_ledger_info import decode_managed_ledger_info, ledger_refs
from offloader.errors import NotFound, PulsarMetadataError, PulsarMetadataUnavailable
from offloader.logs import get_logger
from offloader.naming import TopicName
from offloader.pulsar_cluster.base import (
    MANAGED_LEDGERS_ROOT,
    ClusterLedgerRefs,
    ClusterTopic,
)
from offloader.pulsar_cluster.url import MetadataUrl
from offloader.zk.address import ZkAddress
from offloader.zk.reader import ZkReader

log = get_logger(__name__)


class ZooKeeperSource:
    """A Pulsar cluster's ZooKeeper, read-only."""

    def __init__(self, url: MetadataUrl, *, timeout: float = 10.0) -> None:
        self._url = url
        self._root = url.chroot + MANAGED_LEDGERS_ROOT
        #: full topic name -> its node, for the topics listed (bounded by the cluster's size)
        self._known: dict[str, str] = {}
        self._zk = ZkReader(
            ZkAddress(url.hosts, url.chroot),
            url.canonical,
            error=PulsarMetadataError,
            unavailable=PulsarMetadataUnavailable,
            timeout=timeout,
        )
        try:
            if url.chroot and not self._exists(url.chroot):
                raise PulsarMetadataError(
                    f"{self.location}: the chroot {url.chroot} does not exist"
                )
            if not self._exists(self._root):
                raise PulsarMetadataError(
                    f"{self.location}: no {self._root} node: not a Pulsar metadata store "
                    "(or the wrong chroot)"
                )
        except BaseException:
            self.close()
            raise
        log.info("pulsar_metadata.connected", location=self.location)

    @property
    def location(self) -> str:
        return self._url.canonical

    def close(self) -> None:
        self._zk.close()

    def __enter__(self) -> ZooKeeperSource:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- raw reads, translated --------------------------------------------------------------

    def _exists(self, path: str) -> bool:
        return self._zk.exists(path)

    def _children(self, path: str) -> list[str]:
        return self._zk.children(path) or []

    # --- the Protocol -----------------------------------------------------------------------

    def tenants(self) -> list[str]:
        return self._children(self._root)

    def namespaces(self, tenant: str) -> list[str]:
        out = []
        for ns in self._children(f"{self._root}/{tenant}"):
            if "persistent" in self._children(f"{self._root}/{tenant}/{ns}"):
                out.append(f"{tenant}/{ns}")
        return out

    def topics(self, namespace: str) -> list[str]:
        base = f"{self._root}/{namespace}/persistent"
        names = []
        for child in self._children(base):
            name = f"persistent://{namespace}/{unquote_plus(child)}"
            self._known[name] = f"{base}/{child}"  # the node as listed: no re-encoding
            names.append(name)
        return sorted(names)

    def _path(self, topic: str) -> str:
        path = self._known.get(topic)
        if path is None:
            path = f"{self._root}/{TopicName.parse(topic).managed_ledger_name}"
        return path

    def _canonical(self, topic: str) -> str:
        return topic if topic in self._known else str(TopicName.parse(topic))

    def _decode(self, topic: str, path: str, data: bytes) -> ClusterTopic:
        try:
            info = decode_managed_ledger_info(data)
        except ManagedLedgerInfoError as exc:
            raise ManagedLedgerInfoError(f"{self.location}: {path}: {exc}") from None
        return ClusterTopic(self._canonical(topic), path, info)

    def managed_ledger(self, topic: str) -> ClusterTopic:
        path = self._path(topic)
        data = self._zk.get(path)
        if data is None:
            raise NotFound(
                f"topic {TopicName.parse(topic)} has no managed ledger in {self.location} "
                f"(no {path})"
            )
        return self._decode(topic, path, data)

    def managed_ledgers(self, topics: Sequence[str]) -> list[ClusterTopic]:
        # pipelined: ZooKeeper answers the next ones while this thread decodes the values in
        paths = {self._path(t): t for t in topics}
        return [
            self._decode(paths[path], path, data)
            for path, data in self._zk.get_many(paths)
            if data is not None
        ]

    def ledger_refs(self, topics: Sequence[str]) -> list[ClusterLedgerRefs]:
        paths = {self._path(t): t for t in topics}
        out = []
        for path, data in self._zk.get_many(paths):
            if data is None:
                continue
            try:
                ledgers = ledger_refs(data)
            except ManagedLedgerInfoError as exc:
                raise ManagedLedgerInfoError(f"{self.location}: {path}: {exc}") from None
            out.append(ClusterLedgerRefs(self._canonical(paths[path]), path, ledgers))
        return out
