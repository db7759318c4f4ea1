"""A Pulsar cluster's topic read by name in Spark: a stage of ``make demo`` and a step of the tour.

:func:`read_cluster_topic` (``make demo``'s ``cluster`` stage, and :func:`pulsar_cluster_part`
in the tour) starts a throwaway ZooKeeper (``devservers/zookeeper.py``,
Debian's ``zookeeper`` package: ``make demo`` installs it as root, as ``make test`` does) and
writes into it what a Pulsar broker keeps there for the demo's messages topic: one
``ManagedLedgerInfo`` (LZ4-compressed, as ``managedLedgerInfoCompressionType=LZ4`` writes it)
listing the topic's ledgers, each offloaded one with its UUID and the bucket it went to. Then
``offloader --pulsar-metadata`` shows the topic as ``topics info`` (Pulsar's stats-internal for
offload) and Spark's ``pulsar-messages`` source reads it by name from the cluster's metadata
(``examples/spark_messages.py --pulsar-metadata``), and the messages per key are checked
against the offloaded ledgers' own messages. Skipped, saying why, when ZooKeeper or Spark
cannot run here.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

CLUSTER_TOPIC = "persistent://demo/manual/sensors"


def _managed_ledger_info(ledgers: list[dict[str, Any]], bucket: str, endpoint: str) -> bytes:
    """The node value a broker writes for these ledgers (``topics info --json`` rows)."""
    from formats.pulsar import compression
    from formats.pulsar.managed_ledger_info import (
        DriverMetadata,
        LedgerInfo,
        ManagedLedgerInfo,
        OffloadContext,
        encode_managed_ledger_info,
        uuid_halves,
    )

    driver = DriverMetadata(
        "aws-s3", (("bucket", bucket), ("region", "us-east-1"), ("endpoint", endpoint))
    )
    infos = []
    for row in ledgers:
        context = None
        if row["offloaded"] and row["uuid"]:
            msb, lsb = uuid_halves(row["uuid"])
            context = OffloadContext(
                msb, lsb, complete=True, timestamp=row["offloaded_ms"], driver_metadata=driver
            )
        infos.append(
            LedgerInfo(
                row["ledger_id"],
                entries=row["entries"],
                size=row["size_bytes"],
                timestamp=row["created_ms"],
                offload_context=context,
            )
        )
    return encode_managed_ledger_info(ManagedLedgerInfo(tuple(infos)), codec=compression.LZ4)


def pulsar_cluster_part(
    demo: Any,
    work: Path,
    check: Callable[[bool, str], None],
    also: Callable[[str], None] | None = None,
) -> None:
    """The tour's step: see the module docstring. ``also(url)``: more steps run while the
    ZooKeeper is up (its ``zk:host:port/pulsar`` URL; the tour's Kafka cluster step)."""
    from devservers import zookeeper
    from examples.harness import spark_unavailable
    from examples.tour import MESSAGES_TOPIC

    demo.step("A real Pulsar cluster's topic by name: its ZooKeeper read directly, in Spark")
    reason = zookeeper.unavailable_reason() or spark_unavailable()
    if reason is not None:
        print(f"  skipped: {reason} (run 'sudo make zk-deps')")
        return
    got, expected = read_cluster_topic(demo, work, MESSAGES_TOPIC, also=also)
    check(
        got == expected,
        f"the cluster topic's messages per key, from its offloaded ledgers only: {got}",
    )


@contextmanager
def described_cluster(demo: Any, work: Path, topic: str) -> Iterator[str]:
    """A throwaway ZooKeeper holding ``topic``'s ledgers as :data:`CLUSTER_TOPIC`'s managed
    ledger (LZ4-compressed, as a broker writes it): yields its metadata-store URL."""
    from kazoo.client import KazooClient

    from devservers import zookeeper
    from offloader.naming import TopicName

    ledgers = demo.ledgers(topic)
    store = demo.target.store_url
    bucket = urlsplit(store).netloc
    endpoint = demo.target.env.get("AWS_ENDPOINT_URL", "")
    with zookeeper.start_zookeeper(work) as server:
        quiet = logging.getLogger("examples.pulsar_cluster_demo.kazoo")
        quiet.addHandler(logging.NullHandler())
        quiet.propagate = False
        client = KazooClient(hosts=server.hosts, timeout=15, logger=quiet)
        client.start(timeout=30)
        try:
            path = f"/pulsar/managed-ledgers/{TopicName.parse(CLUSTER_TOPIC).managed_ledger_name}"
            client.create(path, _managed_ledger_info(ledgers, bucket, endpoint), makepath=True)
        finally:
            client.stop()
            client.close()
        demo.say(
            f"ZooKeeper on {server.hosts} (started in {server.start_seconds:.1f}s); wrote {path}"
        )
        yield server.url("/pulsar")


def offloaded_counts(demo: Any, topic: str) -> dict[str, int]:
    """Messages per key of ``topic``'s offloaded ledgers (what the cluster's read must count)."""
    offloaded = {row["ledger_id"] for row in demo.ledgers(topic) if row["offloaded"]}
    messages = demo.json("topics", "read", topic, "--decode", "pulsar", quiet=True)
    return dict(Counter(m["key"] for m in messages if m["ledger_id"] in offloaded))


def read_cluster_topic(
    demo: Any,
    work: Path,
    topic: str,
    *,
    window_ms: int = 86_400_000,
    also: Callable[[str], None] | None = None,
) -> tuple[dict[str, int], dict[str, int]]:
    """ZooKeeper started, ``topic``'s ledgers written into it as the managed ledger of
    :data:`CLUSTER_TOPIC`, that topic read by name in Spark (``spark_messages
    --pulsar-metadata``). Returns the messages per key Spark counted, and those of ``topic``'s
    offloaded ledgers (what it must count)."""
    store = demo.target.store_url
    with described_cluster(demo, work, topic) as url:
        demo.offloader("--pulsar-metadata", url, "topics", "list")
        demo.offloader("--pulsar-metadata", url, "topics", "info", CLUSTER_TOPIC, show=12)
        # the objects are under the demo store's prefix: --store names it (the driver
        # metadata of a broker's offload names its bucket, where its keys are at the root)
        args = [
            "--pulsar-metadata", url, "--store", store, "--topics", CLUSTER_TOPIC,
            "--from-ms", "0", "--to-ms", str(int(time.time() * 1000) + window_ms),
        ]  # fmt: skip
        out = demo.example("spark_messages", args, "the Spark job over the cluster's topic")
        if also is not None:
            also(url)
    got = {
        parts[0]: int(parts[1])
        for parts in (line.split() for line in out.splitlines())
        if len(parts) == 2 and parts[0].startswith("sensor-")
    }
    return got, offloaded_counts(demo, topic)
