"""The ZooKeeper backend of :class:`~offloader.kafka_cluster.base.KafkaClusterView` (Kafka up
to 3.x), read-only, through :class:`offloader.zk.reader.ZkReader` (the one kazoo module).

It reads the znodes Kafka's controller writes, under the URL's chroot:

* ``/brokers/topics`` (children: the topics) and ``/brokers/topics/<topic>``: JSON
  ``{"version":..,"partitions":{"0":[1,2,3],..},"topic_id":"<base64 uuid>",..}``;
* ``/brokers/topics/<topic>/partitions/<p>/state``: JSON ``{"controller_epoch":..,
  "leader":1,"version":1,"leader_epoch":4,"isr":[1,2]}`` (``leader`` -1: no leader);
* ``/config/topics/<topic>``: JSON ``{"version":1,"config":{..}}``, the topic's overrides;
* ``/config/brokers/<default>``: the dynamic broker defaults (their ``log.*`` synonyms,
  :mod:`offloader.kafka_cluster.configs`).

The first :meth:`~ZooKeeperClusterView.refresh` reads everything (pipelined) and sets a watch
on every node it read; later ones re-read only the nodes whose watch fired (after a ``sync``,
so a change made before the call is seen), and everything again after the session broke. So a
leadership check in steady state costs one ``sync`` round trip and dictionary lookups.

Errors name the znode: an unreachable ZooKeeper or a broken session is
:class:`~offloader.errors.KafkaMetadataUnavailable`; a missing chroot, a root without
``/brokers/topics``, a node the ACL refuses, or a value that is not the JSON Kafka writes is
:class:`~offloader.errors.KafkaMetadataError`.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Mapping
from typing import Any

from offloader.errors import KafkaMetadataError, KafkaMetadataUnavailable
from offloader.kafka_cluster.base import PartitionState, TopicConfig, TopicState
from offloader.kafka_cluster.configs import effective_config
from offloader.logs import get_logger
from offloader.zk.address import ZkAddress
from offloader.zk.reader import ZkReader

log = get_logger(__name__)

DEFAULT_BROKER_ENTITY = "<default>"


class ZooKeeperClusterView:
    """A Kafka cluster's ZooKeeper, read-only (see the module docstring)."""

    def __init__(self, address: ZkAddress, *, timeout: float = 10.0) -> None:
        self._address = address
        root = address.chroot
        self._topics_root = f"{root}/brokers/topics"
        self._config_root = f"{root}/config/topics"
        self._defaults_path = f"{root}/config/brokers/{DEFAULT_BROKER_ENTITY}"
        #: topic -> (topic id, partition -> replicas)
        self._assignments: dict[str, tuple[str | None, dict[int, tuple[int, ...]]]] = {}
        #: (topic, partition) -> (leader, leader epoch, isr)
        self._states: dict[tuple[str, int], tuple[int | None, int, tuple[int, ...]]] = {}
        self._overrides: dict[str, dict[str, str]] = {}
        self._defaults: dict[str, str] = {}
        self._cache: dict[str, TopicState] = {}
        self._lock = threading.Lock()
        self._dirty: set[str] = set()
        self._loaded = False
        self._breaks_seen = 0
        self._zk = ZkReader(
            address,
            self.location,
            error=KafkaMetadataError,
            unavailable=KafkaMetadataUnavailable,
            timeout=timeout,
        )
        try:
            if root and not self._zk.exists(root):
                raise KafkaMetadataError(f"{self.location}: the chroot {root} does not exist")
            if not self._zk.exists(self._topics_root):
                raise KafkaMetadataError(
                    f"{self.location}: no {self._topics_root} node: not a Kafka cluster's "
                    "ZooKeeper (or the wrong chroot)"
                )
            self.refresh()
        except BaseException:
            self._zk.close()
            raise
        log.info("kafka_metadata.connected", location=self.location)

    # --- the Protocol -------------------------------------------------------------------------

    @property
    def location(self) -> str:
        return f"zk:{self._address.text}"

    def close(self) -> None:
        self._zk.close()

    def __enter__(self) -> ZooKeeperClusterView:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def refresh(self) -> None:
        try:
            self._zk.sync(self._topics_root)
            breaks = self._zk.session_breaks
            if not self._loaded or breaks != self._breaks_seen:
                self._breaks_seen = breaks
                with self._lock:
                    self._dirty.clear()
                self._full_load()
                self._loaded = True
                return
            with self._lock:
                dirty, self._dirty = self._dirty, set()
            if dirty:
                self._reload(dirty)
        except BaseException:
            self._loaded = False  # a half-read view: the next refresh reads everything again
            self._cache.clear()
            raise

    def topics(self) -> list[str]:
        return sorted(self._assignments)

    def topic(self, name: str) -> TopicState | None:
        cached = self._cache.get(name)
        if cached is not None:
            return cached
        assignment = self._assignments.get(name)
        if assignment is None:
            return None
        topic_id, partitions = assignment
        state = TopicState(
            name=name,
            topic_id=topic_id,
            partitions={p: self._partition(name, p, r) for p, r in sorted(partitions.items())},
            config=self._config(name),
        )
        self._cache[name] = state
        return state

    def partition(self, topic: str, partition: int) -> PartitionState | None:
        state = self.topic(topic)
        return None if state is None else state.partitions.get(partition)

    # --- building the answers -----------------------------------------------------------------

    def _partition(self, topic: str, number: int, replicas: tuple[int, ...]) -> PartitionState:
        leader, epoch, isr = self._states.get((topic, number), (None, -1, ()))
        return PartitionState(topic, number, leader, epoch, replicas, isr)

    def _config(self, topic: str) -> TopicConfig:
        return effective_config(self._defaults, self._overrides.get(topic, {}))

    # --- reading -----------------------------------------------------------------------------

    def _on_watch(self, path: str) -> None:
        with self._lock:
            self._dirty.add(path)

    def _state_path(self, topic: str, partition: int) -> str:
        return f"{self._topics_root}/{topic}/partitions/{partition}/state"

    def _list_topics(self) -> list[str]:
        names = self._zk.children(self._topics_root, watch=self._on_watch)
        if names is None:
            raise KafkaMetadataError(f"{self.location}: {self._topics_root} was deleted")
        return names

    def _full_load(self) -> None:
        self._assignments.clear()
        self._states.clear()
        self._overrides.clear()
        self._defaults = {}
        self._cache.clear()
        names = self._list_topics()
        self._read([f"{self._topics_root}/{t}" for t in names])
        self._read(
            [
                *(self._state_path(t, p) for t, (_i, ps) in self._assignments.items() for p in ps),
                *(f"{self._config_root}/{t}" for t in self._assignments),
                self._defaults_path,
            ]
        )

    def _reload(self, dirty: set[str]) -> None:
        self._cache.clear()
        paths = set(dirty)
        if self._topics_root in paths:
            paths.discard(self._topics_root)
            names = set(self._list_topics())
            for gone in set(self._assignments) - names:
                self._forget(gone)
            paths.update(f"{self._topics_root}/{t}" for t in names - set(self._assignments))
        before = {t: set(ps) for t, (_i, ps) in self._assignments.items()}
        self._read(sorted(paths))
        more: list[str] = []
        for topic, (_id, partitions) in self._assignments.items():
            known = before.get(topic)
            if known is None:
                more.append(f"{self._config_root}/{topic}")
                known = set()
            more += [self._state_path(topic, p) for p in partitions if p not in known]
        if more:
            self._read(more)

    def _forget(self, topic: str) -> None:
        self._assignments.pop(topic, None)
        self._overrides.pop(topic, None)
        for key in [k for k in self._states if k[0] == topic]:
            del self._states[key]

    def _read(self, paths: Iterable[str]) -> None:
        for path, data in self._zk.get_many(paths, watch=self._on_watch):
            self._apply(path, data)

    def _apply(self, path: str, data: bytes | None) -> None:
        if path == self._defaults_path:
            self._defaults = {} if data is None else _config_of(self._json(path, data), path, self)
            return
        if path.startswith(self._config_root + "/"):
            topic = path[len(self._config_root) + 1 :]
            if data is None:
                self._overrides.pop(topic, None)
            else:
                self._overrides[topic] = _config_of(self._json(path, data), path, self)
            return
        rest = path[len(self._topics_root) + 1 :]
        if "/" not in rest:  # /brokers/topics/<topic>
            if data is None:
                self._forget(rest)
            else:
                self._assignments[rest] = self._assignment(path, self._json(path, data))
                current = self._assignments[rest][1]
                for key in [k for k in self._states if k[0] == rest and k[1] not in current]:
                    del self._states[key]
            return
        topic, _partitions, number, _state = rest.split("/")
        key = (topic, int(number))
        if data is None or topic not in self._assignments:
            self._states.pop(key, None)
            return
        self._states[key] = self._state(path, self._json(path, data))

    # --- decoding Kafka's JSON ----------------------------------------------------------------

    def _bad(self, path: str, what: str) -> KafkaMetadataError:
        return KafkaMetadataError(f"{self.location}: {path}: {what}")

    def _json(self, path: str, data: bytes) -> dict[str, Any]:
        try:
            value = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:
            raise self._bad(path, f"malformed JSON ({exc})") from None
        if not isinstance(value, dict):
            raise self._bad(path, "malformed JSON (not an object)")
        return value

    def _assignment(
        self, path: str, value: Mapping[str, Any]
    ) -> tuple[str | None, dict[int, tuple[int, ...]]]:
        raw = value.get("partitions")
        if not isinstance(raw, dict):
            raise self._bad(path, "malformed JSON (no partitions map)")
        partitions: dict[int, tuple[int, ...]] = {}
        for key, replicas in raw.items():
            if not (isinstance(key, str) and key.isdigit()) or not _ints(replicas):
                raise self._bad(path, f"malformed JSON (partition {key!r}: {replicas!r})")
            partitions[int(key)] = tuple(replicas)
        topic_id = value.get("topic_id")
        if topic_id is not None and not isinstance(topic_id, str):
            raise self._bad(path, f"malformed JSON (topic_id {topic_id!r})")
        return topic_id, partitions

    def _state(
        self, path: str, value: Mapping[str, Any]
    ) -> tuple[int | None, int, tuple[int, ...]]:
        leader, epoch, isr = value.get("leader"), value.get("leader_epoch"), value.get("isr", [])
        if not (isinstance(leader, int) and isinstance(epoch, int)) or not (
            _int(leader) and _int(epoch) and _ints(isr)
        ):
            raise self._bad(
                path, f"malformed JSON (leader {leader!r}, leader_epoch {epoch!r}, isr {isr!r})"
            )
        return (None if leader < 0 else leader), epoch, tuple(isr)


def _int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _ints(value: object) -> bool:
    return isinstance(value, list) and all(_int(v) for v in value)


def _config_of(value: Mapping[str, Any], path: str, view: ZooKeeperClusterView) -> dict[str, str]:
    config = value.get("config", {})
    if not isinstance(config, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in config.items()
    ):
        raise view._bad(path, "malformed JSON (config is not a map of strings)")
    return dict(config)
