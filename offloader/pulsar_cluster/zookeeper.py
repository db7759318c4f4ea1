"""The ZooKeeper backend of :class:`~offloader.pulsar_cluster.base.PulsarClusterSource`.

The only module that imports ``kazoo``. It connects without a chroot and puts the URL's chroot
in front of every path itself, so every error names the full path on the server. It only
reads (``get_children``, ``get``, ``exists``): nothing here can write to the cluster's store.
kazoo's errors become :class:`~offloader.errors.PulsarMetadataError` (``NoAuthError``: the
node's ACL refuses us; a missing chroot or ``/managed-ledgers``) and
:class:`~offloader.errors.PulsarMetadataUnavailable` (no server answers, the session broke);
a value that is not a ``ManagedLedgerInfo`` is a
:class:`~formats.errors.ManagedLedgerInfoError` naming its path.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Sequence
from typing import Any
from urllib.parse import unquote_plus

from kazoo.client import KazooClient
from kazoo.exceptions import (
    ConnectionLoss,
    KazooException,
    NoAuthError,
    NoNodeError,
    SessionExpiredError,
)
from kazoo.handlers.threading import KazooTimeoutError

from formats.errors import ManagedLedgerInfoError
from formats.pulsar.managed_ledger_info import decode_managed_ledger_info
from offloader.errors import NotFound, PulsarMetadataError, PulsarMetadataUnavailable
from offloader.logs import get_logger
from offloader.naming import TopicName
from offloader.pulsar_cluster.base import MANAGED_LEDGERS_ROOT, ClusterTopic
from offloader.pulsar_cluster.url import MetadataUrl

log = get_logger(__name__)

#: pipelined reads in flight at once (bounded, so 100,000 topics do not queue 100,000 requests)
WINDOW = 512

_quiet = logging.getLogger("offloader.pulsar_cluster.kazoo")
_quiet.addHandler(logging.NullHandler())
_quiet.propagate = False


def _translate(exc: BaseException, path: str, where: str) -> Exception:
    if isinstance(exc, NoAuthError):
        return PulsarMetadataError(f"{where}: {path}: access denied by the node's ACL")
    if isinstance(exc, ConnectionLoss | SessionExpiredError | KazooTimeoutError):
        return PulsarMetadataUnavailable(f"{where}: {path}: the connection to ZooKeeper broke")
    if isinstance(exc, KazooException):
        return PulsarMetadataError(f"{where}: {path}: {type(exc).__name__} {exc}".rstrip())
    return exc if isinstance(exc, Exception) else RuntimeError(str(exc))


class ZooKeeperSource:
    """A Pulsar cluster's ZooKeeper, read-only."""

    def __init__(self, url: MetadataUrl, *, timeout: float = 10.0) -> None:
        self._url = url
        self._root = url.chroot + MANAGED_LEDGERS_ROOT
        #: full topic name -> its node, for the topics listed (bounded by the cluster's size)
        self._known: dict[str, str] = {}
        self._client = KazooClient(
            hosts=",".join(url.hosts),
            timeout=timeout,
            read_only=True,
            logger=_quiet,
            connection_retry={"max_tries": 1, "delay": 0.1, "max_delay": 1.0},
        )
        try:
            self._client.start(timeout=timeout)
        except (KazooTimeoutError, KazooException, OSError) as exc:
            self._client.close()
            raise PulsarMetadataUnavailable(
                f"cannot reach ZooKeeper at {','.join(url.hosts)} ({type(exc).__name__}, "
                f"{timeout:g} s)"
            ) from None
        try:
            if url.chroot and self._exists(url.chroot) is None:
                raise PulsarMetadataError(
                    f"{self.location}: the chroot {url.chroot} does not exist"
                )
            if self._exists(self._root) is None:
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
        try:
            self._client.stop()
        finally:
            self._client.close()

    def __enter__(self) -> ZooKeeperSource:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- raw reads, translated --------------------------------------------------------------

    def _exists(self, path: str) -> Any:
        try:
            return self._client.exists(path)
        except Exception as exc:
            raise _translate(exc, path, self.location) from None

    def _children(self, path: str) -> list[str]:
        try:
            return sorted(self._client.get_children(path))
        except NoNodeError:
            return []
        except Exception as exc:
            raise _translate(exc, path, self.location) from None

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
        try:
            data, _stat = self._client.get(path)
        except NoNodeError:
            raise NotFound(
                f"topic {TopicName.parse(topic)} has no managed ledger in {self.location} "
                f"(no {path})"
            ) from None
        except Exception as exc:
            raise _translate(exc, path, self.location) from None
        return self._decode(topic, path, data)

    def managed_ledgers(self, topics: Sequence[str]) -> list[ClusterTopic]:
        # a sliding window of requests in flight: ZooKeeper answers the next ones while this
        # thread decodes the values already in
        out: list[ClusterTopic] = []
        pending: deque[tuple[str, str, Any]] = deque()
        names = iter(topics)
        for topic in names:
            path = self._path(topic)
            pending.append((topic, path, self._client.get_async(path)))
            if len(pending) >= WINDOW:
                break
        while pending:
            topic, path, result = pending.popleft()
            nxt = next(names, None)
            if nxt is not None:
                nxt_path = self._path(nxt)
                pending.append((nxt, nxt_path, self._client.get_async(nxt_path)))
            try:
                data, _stat = result.get()
            except NoNodeError:
                continue
            except Exception as exc:
                raise _translate(exc, path, self.location) from None
            out.append(self._decode(topic, path, data))
        return out
