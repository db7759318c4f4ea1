"""Brokers' log dirs for the leadership tests: the same partitions on several brokers (RF 3),
each dir with the ``meta.properties`` Kafka writes, and a Kafka cluster in ZooKeeper that
names their leaders."""

from __future__ import annotations

import uuid
from pathlib import Path

from formats.kafka.names import uuid_to_kafka
from tests.kafka.logdir import PartitionLayout, write_partition


def topic_id(topic: str) -> str:
    """The id ``write_partition`` gives the topic's ``partition.metadata``."""
    return uuid_to_kafka(uuid.uuid5(uuid.NAMESPACE_DNS, topic))


def write_meta_properties(log_dir: Path, broker_id: int, *, kraft: bool = False) -> None:
    log_dir.mkdir(parents=True, exist_ok=True)
    if kraft:
        text = f"node.id={broker_id}\nversion=1\ncluster.id=MkU3OEVBNTcwNTJENDM2Qk\n"
    else:
        text = f"#\n#Sat Nov 28 01:00:00 UTC 2026\nversion=0\nbroker.id={broker_id}\n"
    (log_dir / "meta.properties").write_text(text)


def write_brokers(
    root: Path,
    partitions: dict[tuple[str, int], int],
    brokers: tuple[int, ...] = (1, 2, 3),
    **kwargs: object,
) -> dict[int, Path]:
    """One log dir per broker under ``root`` (``broker-<id>``), each holding every partition
    of ``partitions`` ((topic, partition) -> records), byte for byte the same (replicas)."""
    dirs: dict[int, Path] = {}
    for broker in brokers:
        log_dir = root / f"broker-{broker}"
        write_meta_properties(log_dir, broker)
        for (topic, number), records in partitions.items():
            write_partition(log_dir, topic, number, records=records, codecs=(0,), **kwargs)  # type: ignore[arg-type]
        dirs[broker] = log_dir
    return dirs


__all__ = ["PartitionLayout", "topic_id", "write_brokers", "write_meta_properties"]
