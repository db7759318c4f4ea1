"""The leadership check of the Kafka sidecar (``--kafka-metadata``), steady state.

``python -m bench kafka_cluster [--topics N] [--partitions P] [--passes K]``

* ``kafka_cluster.leadership_pass``: one upload pass's leadership checks on a ZooKeeper-mode
  cluster of N topics x P partitions (Kafka's znodes), nothing changed since the last pass:
  the view's ``refresh`` (a ``sync`` and an empty dirty set: the watches fired nothing) and a
  :meth:`LeadershipGate.role` per partition (leader, epoch, the topic's effective config).
  Baseline: the naive check, a pipelined ``get`` of every partition's ``state`` znode with bare
  kazoo (no decoding). Lower is better; reported with the client CPU seconds of each.
* ``kafka_cluster.segment_check``: the re-check before each segment (one ``refresh`` and one
  ``role``), against one bare kazoo ``get`` of that partition's state znode.
* ``kafka_cluster.leader_change``: a pass after one partition's leader changed (its watch
  fired: the view re-reads that one node), against the same bare full re-read.

The ZooKeeper is the tests' throwaway server (``devservers/zookeeper.py``); skipped with a
note where it cannot run.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from typing import Any

from bench import note, report

ROOT = "/bench-kafka"


def _json(value: object) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def _populate(zk: object, topics: int, partitions: int) -> list[str]:
    """Kafka's znodes for ``topics`` x ``partitions`` (RF 3), half of the topics tiered."""
    pending: list[Any] = []
    state_paths = []

    def flush(force: bool = False) -> None:
        nonlocal pending
        if force or len(pending) >= 1000:
            for p in pending:
                p.get()
            pending = []

    for path in (f"{ROOT}/brokers/topics", f"{ROOT}/config/topics", f"{ROOT}/config/brokers"):
        zk.ensure_path(path)  # type: ignore[attr-defined]
    for t in range(topics):
        name = f"topic-{t:05d}"
        config = {"remote.storage.enable": "true"} if t % 2 == 0 else {}
        pending.append(
            zk.create_async(  # type: ignore[attr-defined]
                f"{ROOT}/config/topics/{name}", _json({"version": 1, "config": config})
            )
        )
        parts = {str(p): [1 + (p + i) % 3 for i in range(3)] for p in range(partitions)}
        zk.create(  # type: ignore[attr-defined]
            f"{ROOT}/brokers/topics/{name}",
            _json({"version": 3, "partitions": parts, "topic_id": "AAAAAAAAQACAAAAAAAAAAQ"}),
        )
        for p in range(partitions):
            path = f"{ROOT}/brokers/topics/{name}/partitions/{p}/state"
            state_paths.append(path)
            zk.ensure_path(path.rsplit("/", 1)[0])  # type: ignore[attr-defined]
            pending.append(
                zk.create_async(  # type: ignore[attr-defined]
                    path,
                    _json(
                        {
                            "controller_epoch": 1,
                            "leader": 1 + p % 3,
                            "version": 1,
                            "leader_epoch": 0,
                            "isr": [1, 2, 3],
                        }
                    ),
                )
            )
            flush()
    flush(True)
    return state_paths


def _timed(fn: Callable[[], object], repeat: int) -> tuple[float, float]:
    """Best wall seconds of ``repeat`` calls, and the client CPU seconds per call."""
    best = float("inf")
    cpu0 = time.process_time()
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - started)
    return best, (time.process_time() - cpu0) / repeat


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench kafka_cluster", description=__doc__)
    parser.add_argument("--topics", type=int, default=1000, help="topics (1000)")
    parser.add_argument("--partitions", type=int, default=10, help="partitions per topic (10)")
    parser.add_argument("--passes", type=int, default=5, help="passes measured (5)")
    args = parser.parse_args(argv)
    from kazoo.client import KazooClient

    from devservers import zookeeper

    reason = zookeeper.unavailable_reason()
    if reason is not None:
        note(f"bench kafka_cluster: skipped, ZooKeeper cannot run here ({reason})")
        return 0
    from offloader.kafka.leadership import LeadershipGate
    from offloader.kafka_cluster import open_cluster_view

    with zookeeper.start_zookeeper() as server:
        client = KazooClient(hosts=server.hosts, timeout=30)
        client.start(timeout=60)
        try:
            states = _populate(client, args.topics, args.partitions)
            keys = [(p.split("/")[-4], int(p.split("/")[-2])) for p in states]
            started = time.perf_counter()
            view = open_cluster_view(server.url(ROOT))
            first_load = time.perf_counter() - started
            gate = LeadershipGate(lambda: view, None, lambda: int(time.time() * 1000))  # type: ignore[arg-type]

            def ours() -> None:
                view.refresh()
                for topic, p in keys:
                    gate.role(topic, p, 1)

            def bare() -> None:
                for start in range(0, len(states), 512):
                    window = [client.get_async(s) for s in states[start : start + 512]]
                    for r in window:
                        r.get()

            ours()
            bare()
            ours_s, ours_cpu = _timed(ours, args.passes)
            bare_s, bare_cpu = _timed(bare, args.passes)
            report(
                "kafka_cluster.leadership_pass",
                ours_s,
                bare_s,
                "s",
                higher_is_better=False,
                partitions=len(states),
                ours_client_cpu_s=round(ours_cpu, 4),
                baseline_client_cpu_s=round(bare_cpu, 4),
                per_partition_us=round(ours_s / len(states) * 1e6, 3),
                first_load_s=round(first_load, 3),
                baseline_what="bare kazoo pipelined get of every partition state znode",
            )
            topic, p = keys[len(keys) // 2]

            def one_ours() -> None:
                view.refresh()
                gate.role(topic, p, 1)

            def one_bare() -> None:
                client.get(states[len(keys) // 2])

            o, oc = _timed(one_ours, 200)
            b, bc = _timed(one_bare, 200)
            report(
                "kafka_cluster.segment_check",
                o * 1e6,
                b * 1e6,
                "us",
                higher_is_better=False,
                ours_client_cpu_s=round(oc, 6),
                baseline_client_cpu_s=round(bc, 6),
                baseline_what="one bare kazoo get of the partition's state znode",
            )
            epoch = 0

            def changed() -> None:
                nonlocal epoch
                epoch += 1
                client.set(
                    states[0],
                    _json(
                        {
                            "controller_epoch": 1,
                            "leader": 2,
                            "version": 1,
                            "leader_epoch": epoch,
                            "isr": [2],
                        }
                    ),
                )
                ours()

            c, cc = _timed(changed, args.passes)
            report(
                "kafka_cluster.leader_change",
                c,
                bare_s,
                "s",
                higher_is_better=False,
                partitions=len(states),
                ours_client_cpu_s=round(cc, 4),
                baseline_client_cpu_s=round(bare_cpu, 4),
                baseline_what="bare kazoo pipelined get of every partition state znode",
            )
            view.close()
        finally:
            client.stop()
            client.close()
    return 0
