"""The ZooKeeper writer of the view contract suite: znodes written as Kafka's controller and
``AdminZkClient`` write them (``KafkaZkClient``'s JSON, field for field)."""

from __future__ import annotations

import json

from kazoo.client import KazooClient

from devservers.zookeeper import ZkServer
from offloader.kafka_cluster.base import KafkaClusterView
from offloader.kafka_cluster.configs import BROKER_SYNONYMS
from offloader.kafka_cluster.identity import open_cluster_view

CONTROLLER_EPOCH = 3


def _json(value: object) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


class ZkClusterWriter:
    def __init__(self, client: KazooClient, server: ZkServer, chroot: str) -> None:
        self.client = client
        self.server = server
        self.chroot = chroot
        client.ensure_path(f"{chroot}/brokers/topics")
        client.ensure_path(f"{chroot}/config/topics")
        client.ensure_path(f"{chroot}/config/brokers")
        client.ensure_path(f"{chroot}/brokers/ids")
        self._defaults: dict[str, str] = {}

    @property
    def url(self) -> str:
        return self.server.url(self.chroot)

    def _put(self, path: str, data: bytes) -> None:
        full = self.chroot + path
        if self.client.exists(full):
            self.client.set(full, data)
        else:
            self.client.create(full, data, makepath=True)

    def create_topic(
        self,
        name: str,
        topic_id: str,
        partitions: dict[int, list[int]],
        config: dict[str, str] | None = None,
    ) -> None:
        # AdminZkClient.createTopicWithAssignment: the config node first, then the topic's
        self._put(f"/config/topics/{name}", _json({"version": 1, "config": config or {}}))
        self._put(
            f"/brokers/topics/{name}",
            _json(
                {
                    "partitions": {str(p): r for p, r in sorted(partitions.items())},
                    "topic_id": topic_id,
                    "adding_replicas": {},
                    "removing_replicas": {},
                    "version": 3,
                }
            ),
        )
        # then the controller elects the first live replica of each partition
        for p, replicas in sorted(partitions.items()):
            self.set_leader(name, p, replicas[0] if replicas else None, 0, list(replicas))

    def set_leader(
        self, topic: str, partition: int, leader: int | None, leader_epoch: int, isr: list[int]
    ) -> None:
        self._put(
            f"/brokers/topics/{topic}/partitions/{partition}/state",
            _json(
                {
                    "controller_epoch": CONTROLLER_EPOCH,
                    "leader": -1 if leader is None else leader,
                    "version": 1,
                    "leader_epoch": leader_epoch,
                    "isr": isr,
                }
            ),
        )

    def set_config(self, topic: str, key: str, value: str | None) -> None:
        data, _stat = self.client.get(f"{self.chroot}/config/topics/{topic}")
        config = json.loads(data)["config"]
        if value is None:
            config.pop(key, None)
        else:
            config[key] = value
        self._put(f"/config/topics/{topic}", _json({"version": 1, "config": config}))
        # AdminZkClient.changeConfigs: a change notification for the brokers
        self.client.create(
            f"{self.chroot}/config/changes/config_change_",
            _json({"version": 2, "entity_path": f"topics/{topic}"}),
            sequence=True,
            makepath=True,
        )

    def set_default_config(self, key: str, value: str | None) -> None:
        name = BROKER_SYNONYMS[key][0][0] if key in BROKER_SYNONYMS else key
        if value is None:
            self._defaults.pop(name, None)
        else:
            self._defaults[name] = value
        self._put("/config/brokers/<default>", _json({"version": 1, "config": self._defaults}))

    def delete_topic(self, name: str) -> None:
        # the controller, after /admin/delete_topics/<name>: the topic's nodes, then its config
        self.client.delete(f"{self.chroot}/brokers/topics/{name}", recursive=True)
        self.client.delete(f"{self.chroot}/config/topics/{name}")

    def open_view(self) -> KafkaClusterView:
        return open_cluster_view(self.url)
