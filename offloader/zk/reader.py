"""A read-only ZooKeeper session (:class:`ZkReader`): the one module that imports ``kazoo``.

Both readers of a cluster's ZooKeeper (Pulsar's managed ledgers, Kafka's topics) use it: a
connected kazoo client that only reads (``exists``, ``get``, ``get_children``, ``sync``), the
URL's chroot put in front of every path by the caller (so each error names the full path on the
server), pipelined reads (a bounded window in flight), one-shot watches, and kazoo's errors
translated into the caller's error pair (``error``: an ACL refusal, a server error;
``unavailable``: no server answers, the session broke). Nothing here writes to ZooKeeper.

Many unwatched reads go out as ZooKeeper's ``multiRead`` (opcode 22, servers 3.6 and later;
Pulsar's own metadata store batches its reads the same way): up to :data:`BATCH` ``getData``
operations in one request (fewer when the values are large: :data:`BATCH_BYTES`), each
answered on its own (a missing node or an ACL refusal is that
node's result, not the batch's). kazoo's cost is per request (a wake-up of its connection
thread, a select, a queue entry, a result object, a condition wait), so this costs a fraction
of one pipelined ``get`` per node. A server older than 3.6 would drop the connection on the
unknown opcode, so it is only used once the server's ``srvr`` answer names 3.6 or later
(otherwise, or when ``srvr`` is not allowed, the reads are pipelined ``get`` calls).
"""

from __future__ import annotations

import logging
import re
import struct
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import (
    EXCEPTIONS,
    ConnectionLoss,
    KazooException,
    NoAuthError,
    NoNodeError,
    SessionExpiredError,
)
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.serialization import write_string
from kazoo.protocol.states import Callback, WatchedEvent

from offloader.errors import OffloaderError
from offloader.zk.address import ZkAddress

#: pipelined reads in flight at once (bounded, so 100,000 nodes do not queue 100,000 requests)
WINDOW = 512
#: ``getData`` operations in one ``multiRead`` request (at most), and such requests in flight
BATCH = 128
BATCH_WINDOW = 4
#: the first requests' size, before any value's size is known
FIRST_BATCH = 4
#: the bytes one ``multiRead`` answer aims at: each batch holds as many nodes as the values
#: read so far say fit (large managed ledgers, up to the node limit each, go a few at a time,
#: so neither the server nor this process builds a huge answer)
BATCH_BYTES = 1 << 20
#: the first ZooKeeper version that has ``multiRead``
MULTI_READ_SINCE = (3, 6)

_quiet = logging.getLogger("offloader.zk.kazoo")
_quiet.addHandler(logging.NullHandler())
_quiet.propagate = False


Watch = Callable[[str], None]

_GET_DATA, _MULTI_READ, _NO_NODE = 4, 22, NoNodeError.code
_HEADER = struct.Struct("!iBi")  # MultiHeader {type, done, err}
_INT = struct.Struct("!i")
_STAT_SIZE = 68  # Stat: six longs, five ints
_GET_HEADER = _HEADER.pack(_GET_DATA, 0, -1)
_END = _HEADER.pack(-1, 1, -1)
_NO_WATCH = b"\x00"


class _MultiRead:
    """ZooKeeper's ``multiRead`` of ``getData`` operations, as kazoo sends a request (``type``,
    ``serialize``, ``deserialize``). Its result has one value per path: the node's bytes, or
    the error code of that operation (an ``int``)."""

    type = _MULTI_READ

    def __init__(self, paths: list[str]) -> None:
        self.paths = paths

    def serialize(self) -> bytearray:
        out = bytearray()
        for path in self.paths:
            out += _GET_HEADER
            out += write_string(path)
            out += _NO_WATCH
        out += _END
        return out

    @staticmethod
    def deserialize(buf: bytes, offset: int) -> list[bytes | int]:
        out: list[bytes | int] = []
        header, value = _HEADER.unpack_from, _INT.unpack_from
        while True:
            kind, done, _err = header(buf, offset)
            offset += 5 + 4
            if done:
                return out
            (n,) = value(buf, offset)
            offset += 4
            if kind == _GET_DATA:
                end = offset + max(n, 0)
                out.append(bytes(buf[offset:end]))  # a null value (length -1) reads as b""
                offset = end + _STAT_SIZE
            elif kind == -1:
                out.append(n)  # ErrorResponse {err}
            else:
                raise ValueError(f"unexpected operation type {kind} in a multiRead response")


def _version(srvr: str) -> tuple[int, int] | None:
    """``(major, minor)`` of a ``srvr`` answer's ``Zookeeper version: 3.8.0-...`` line."""
    found = re.search(r"Zookeeper version: (\d+)\.(\d+)", srvr)
    return None if found is None else (int(found.group(1)), int(found.group(2)))


class ZkReader:
    """A read-only ZooKeeper session. ``location`` names the cluster in every error."""

    def __init__(
        self,
        address: ZkAddress,
        location: str,
        *,
        error: type[OffloaderError],
        unavailable: type[OffloaderError],
        timeout: float = 10.0,
    ) -> None:
        self.address = address
        self.location = location
        self._error = error
        self._unavailable = unavailable
        self._client = KazooClient(
            hosts=",".join(address.hosts),
            timeout=timeout,
            read_only=True,
            logger=_quiet,
            connection_retry={"max_tries": 1, "delay": 0.1, "max_delay": 1.0},
        )
        try:
            self._client.start(timeout=timeout)
        except (KazooTimeoutError, KazooException, OSError) as exc:
            self._client.close()
            raise unavailable(
                f"cannot reach ZooKeeper at {','.join(address.hosts)} ({type(exc).__name__}, "
                f"{timeout:g} s)"
            ) from None
        self._watchers: dict[Watch, Callable[[WatchedEvent], None]] = {}
        #: bumped whenever the session was suspended or lost (watches may have been missed)
        self.session_breaks = 0
        #: whether the server has multiRead (None: not asked yet)
        self._multi_read: bool | None = None
        self._client.add_listener(self._on_state)

    def _on_state(self, state: str) -> None:
        if state != KazooState.CONNECTED:
            self.session_breaks += 1

    def close(self) -> None:
        try:
            self._client.stop()
        finally:
            self._client.close()

    def translate(self, exc: BaseException, path: str) -> Exception:
        """kazoo's error on ``path`` as the reader's typed error (anything else unchanged)."""
        where = self.location
        if isinstance(exc, NoAuthError):
            return self._error(f"{where}: {path}: access denied by the node's ACL")
        if isinstance(exc, ConnectionLoss | SessionExpiredError | KazooTimeoutError):
            return self._unavailable(f"{where}: {path}: the connection to ZooKeeper broke")
        if isinstance(exc, KazooException):
            return self._error(f"{where}: {path}: {type(exc).__name__} {exc}".rstrip())
        return exc if isinstance(exc, Exception) else RuntimeError(str(exc))

    def _watcher(self, watch: Watch | None) -> Callable[[WatchedEvent], None] | None:
        """kazoo's watcher for ``watch``: one per ``watch`` (kazoo keeps a set of watchers per
        path, so re-reading a node does not add a second call)."""
        if watch is None:
            return None
        fire = self._watchers.get(watch)
        if fire is None:

            def fire(event: WatchedEvent) -> None:
                watch(event.path)

            self._watchers[watch] = fire
        return fire

    def exists(self, path: str, watch: Watch | None = None) -> bool:
        """Whether ``path`` exists; ``watch(path)`` is called once when it is created, changed
        or deleted."""
        try:
            return self._client.exists(path, watch=self._watcher(watch)) is not None
        except Exception as exc:
            raise self.translate(exc, path) from None

    def get(self, path: str) -> bytes | None:
        """The node's value; None when there is no such node."""
        try:
            data, _stat = self._client.get(path)
        except NoNodeError:
            return None
        except Exception as exc:
            raise self.translate(exc, path) from None
        return bytes(data)

    def children(self, path: str, watch: Watch | None = None) -> list[str] | None:
        """The node's children, sorted; None when there is no such node."""
        try:
            return sorted(self._client.get_children(path, watch=self._watcher(watch)))
        except NoNodeError:
            return None
        except Exception as exc:
            raise self.translate(exc, path) from None

    def get_many(
        self, paths: Iterable[str], watch: Watch | None = None
    ) -> Iterator[tuple[str, bytes | None]]:
        """``(path, value or None)`` in ``paths``' order, :data:`WINDOW` requests in flight
        (ZooKeeper answers the next ones while the caller decodes). With ``watch``, each node
        read gets a data watch (it fires on a change or a deletion), and a missing one an
        ``exists`` watch (it fires when the node is created)."""
        fire = self._watcher(watch)
        if fire is None and self.multi_read():
            yield from self._get_batched(paths)
            return
        pending: deque[tuple[str, Any]] = deque()
        names = iter(paths)

        def send(path: str) -> None:
            pending.append((path, self._client.get_async(path, watch=fire)))

        for path in names:
            send(path)
            if len(pending) >= WINDOW:
                break
        while pending:
            path, result = pending.popleft()
            nxt = next(names, None)
            if nxt is not None:
                send(nxt)
            try:
                data, _stat = result.get()
            except NoNodeError:
                if fire is not None and self._missing_watched(path, fire):
                    yield path, self.get(path)  # created meanwhile: read it (its watch is set)
                    continue
                yield path, None
                continue
            except Exception as exc:
                raise self.translate(exc, path) from None
            yield path, bytes(data)

    def multi_read(self) -> bool:
        """Whether reads are batched in ``multiRead`` requests: the server says (in its
        ``srvr`` answer) it is ZooKeeper 3.6 or later. Asked once per session."""
        if self._multi_read is None:
            try:
                version = _version(self._client.command(b"srvr"))
            except Exception:  # no srvr (not allowed, a proxy): single reads, which always work
                version = None
            self._multi_read = version is not None and version >= MULTI_READ_SINCE
        return self._multi_read

    def _get_batched(self, paths: Iterable[str]) -> Iterator[tuple[str, bytes | None]]:
        """:meth:`get_many` without watches: up to :data:`BATCH` paths per ``multiRead`` (as
        many as :data:`BATCH_BYTES` holds at the mean size of the values read so far),
        :data:`BATCH_WINDOW` requests in flight."""
        pending: deque[tuple[list[str], Any]] = deque()
        names = iter(paths)
        size = FIRST_BATCH
        read_bytes = read_values = 0

        def send() -> bool:
            batch = [p for _, p in zip(range(size), names, strict=False)]
            if batch:
                result = self._client.handler.async_result()
                self._client._call(_MultiRead(batch), result)  # as kazoo's own *_async do
                pending.append((batch, result))
            return bool(batch)

        while len(pending) < BATCH_WINDOW and send():
            pass
        while pending:
            batch, result = pending.popleft()
            send()
            try:
                values = result.get()
            except Exception as exc:
                raise self.translate(exc, batch[0]) from None
            read_values += len(values)
            read_bytes += sum(len(v) for v in values if isinstance(v, bytes))
            size = max(1, min(BATCH, BATCH_BYTES * read_values // max(read_bytes, 1)))
            for path, value in zip(batch, values, strict=True):
                if isinstance(value, bytes):
                    yield path, value
                elif value == _NO_NODE:
                    yield path, None
                else:
                    raise self.translate(EXCEPTIONS[value](), path)

    def _missing_watched(self, path: str, fire: Callable[[WatchedEvent], None]) -> bool:
        """An ``exists`` watch on a node that was missing; True if it exists by now."""
        try:
            return self._client.exists(path, watch=fire) is not None
        except Exception as exc:
            raise self.translate(exc, path) from None

    def sync(self, path: str = "/") -> None:
        """Catch this session up with the ensemble's leader, then wait until every watch
        notification received before that has been handled: after it, a change another
        client made before the call has fired its watches here."""
        try:
            self._client.sync(path)
        except Exception as exc:
            raise self.translate(exc, path) from None
        done = threading.Event()
        # kazoo runs watch callbacks in order on one thread: one more callback is a barrier
        self._client.handler.dispatch_callback(Callback("barrier", done.set, ()))
        done.wait(10.0)
