"""The main job, end to end: ``make demo`` (moto) or ``make demo S3=ceph`` (a throwaway Ceph RGW).

    python -m examples.demo [--s3 moto|ceph] [--store s3://bucket/prefix] [--home DIR] [-v]

On the S3 server of ``examples/harness.py`` (its own moto server unless one is configured), it
drives the real ``offloader`` command and prints one line per stage:

1. produce Pulsar messages (Pulsar's entry format: metadata, checksum, lz4-compressed batches of
   100, one key per producer) to a topic whose ledgers roll over every few entries;
2. offload the closed ledgers to S3 in Pulsar's tiered-storage format;
3. read every message back from the object store, decoded, and check that each one arrives once;
4. count messages per key with Spark (``examples/spark_messages.py``, the ``pulsar-messages``
   DataFrame source; skipped, saying why, without PySpark or Java);
5. in the same Spark job, read a Pulsar cluster's topic by name: the topic's ledgers are
   described in a throwaway ZooKeeper as a broker writes them (one ``ManagedLedgerInfo``;
   ``examples/pulsar_cluster_demo.py``) and read through ``pulsar_metadata`` (skipped, saying
   why, without ZooKeeper: ``make demo`` installs it as root);
6. export the messages to an Apache Iceberg table;
7. read that table with DuckDB's own Iceberg reader (``examples/iceberg_query.py``).

``-v`` prints each command and its output as well. It exits 1 as soon as a stage fails.
``make tour`` (``examples/tour.py``) runs every capability.
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

from examples.harness import (
    Demo,
    StepFailed,
    iceberg_unavailable,
    spark_unavailable,
)
from examples.harness import main as harness_main

TOPIC = "persistent://demo/main/sensors"
TABLE = "iceberg://demo.sensors"
#: messages per producer key; each producer writes its own entries (batches of 100)
PER_KEY = {"sensor-a": 300, "sensor-b": 400, "sensor-c": 500}
ENTRIES_PER_LEDGER = 4


class Stages:
    """Numbered stage lines: ``N. name  what happened  (seconds)``."""

    def __init__(self) -> None:
        self.number = 0
        self.started = time.monotonic()

    def start(self) -> None:
        self.started = time.monotonic()

    def done(self, name: str, text: str) -> None:
        self.number += 1
        took = time.monotonic() - self.started
        print(f"{self.number}. {name:<8} {text}  ({took:.1f}s)", flush=True)
        self.started = time.monotonic()


def configure(demo: Demo) -> None:
    (demo.home / "offloader.toml").write_text(
        f'store = "{demo.target.store_url}"\n\n'
        "[broker]\n"
        f"max_entries_per_ledger = {ENTRIES_PER_LEDGER}\n"
        'min_rollover_time = "0"  # roll over as soon as a ledger is full\n'
    )
    demo.offloader("namespaces", "create", "demo/main")


def produce(demo: Demo, stages: Stages) -> int:
    """One producer per key; returns the number of entries written."""
    entries, closed = 0, []
    for key, count in PER_KEY.items():
        (record,) = demo.json(
            "topics", "produce", TOPIC, "--synthetic", str(count), "--size", "200",
            "--format", "pulsar", "--batch-size", "100", "--compression", "lz4",
            "--key", key, "--property", "site=lab",
        )  # fmt: skip
        if record["messages"] != count:
            raise StepFailed(f"{key}: {record['messages']} messages produced, not {count}")
        entries += record["entries"]
        closed += record["ledgers_closed"]
    total = sum(PER_KEY.values())
    stages.done(
        "produce",
        f"{total} Pulsar messages ({len(PER_KEY)} keys, lz4 batches of 100) to {TOPIC}: "
        f"{entries} entries, {len(closed)} ledgers closed",
    )
    return entries


def offload(demo: Demo, stages: Stages) -> list[int]:
    demo.offloader(
        "topics", "offload-prefix", TOPIC, "--size-threshold", "0", expect="Offload triggered"
    )
    ledgers = demo.ledgers(TOPIC)
    closed = [ledger["ledger_id"] for ledger in ledgers if ledger["state"] == "CLOSED"]
    offloaded = [ledger["ledger_id"] for ledger in ledgers if ledger["offloaded"]]
    if not offloaded or offloaded != closed:
        raise StepFailed(f"ledgers {offloaded} offloaded, not the closed ones {closed}")
    stages.done(
        "offload",
        f"ledgers {', '.join(map(str, offloaded))} to {demo.target.store_url} "
        "(Pulsar's tiered-storage format)",
    )
    return offloaded


def read_back(demo: Demo, stages: Stages) -> None:
    messages = demo.json("topics", "read", TOPIC, "--decode", "pulsar", show=3)
    keys = Counter(m["key"] for m in messages)
    ids = {m["message_id"] for m in messages}
    if dict(keys) != PER_KEY or len(ids) != len(messages):
        raise StepFailed(f"read back {dict(keys)} ({len(ids)} distinct ids), not {PER_KEY}")
    stages.done(
        "read",
        f"{len(messages)} messages back from {demo.target.store_url}, decoded: each key's "
        "count, every message once",
    )


def spark(demo: Demo, work: Path, stages: Stages) -> None:
    """Stages 4 and 5: one Spark job counts the topic's messages per key, then those of the
    cluster topic that ZooKeeper describes (when ZooKeeper can run here)."""
    from contextlib import nullcontext

    from devservers import zookeeper
    from examples.pulsar_cluster_demo import CLUSTER_TOPIC, described_cluster, offloaded_counts

    why_not = spark_unavailable()
    if why_not is not None:
        stages.done("spark", f"skipped: {why_not}")
        stages.done("cluster", f"skipped: {why_not}")
        return
    no_zk = zookeeper.unavailable_reason()
    window = ["--from-ms", "0", "--to-ms", str(int(time.time() * 1000) + 3_600_000)]
    args = [*demo.home_and_store(), "--topics", TOPIC, *window]
    with described_cluster(demo, work, TOPIC) if no_zk is None else nullcontext("") as url:
        if url:
            demo.offloader("--pulsar-metadata", url, "topics", "info", CLUSTER_TOPIC, show=12)
            args += ["--cluster-metadata", url, "--cluster-topics", CLUSTER_TOPIC]
        out = demo.example("spark_messages", args, "the Spark job")
    mine, _, theirs = out.partition("\ncluster: ")
    counted = _counts(mine)
    if counted != PER_KEY:
        raise StepFailed(f"Spark counted {counted} messages per key, not {PER_KEY}")
    per_key = " ".join(f"{key}={n}" for key, n in counted.items())
    stages.done("spark", f"messages per key (pulsar-messages source, groupBy): {per_key}")
    if no_zk is not None:
        stages.done("cluster", f"skipped: {no_zk} (run 'sudo make zk-deps')")
        return
    expected = offloaded_counts(demo, TOPIC)
    got = _counts(theirs)
    if got != expected or not got:
        raise StepFailed(f"Spark counted {got} messages per key of {CLUSTER_TOPIC}, not {expected}")
    per_key = " ".join(f"{key}={n}" for key, n in got.items())
    stages.done(
        "cluster",
        f"{CLUSTER_TOPIC} read by name from its ZooKeeper-described cluster, same Spark job "
        f"(pulsar_metadata option): {per_key}",
    )


def _counts(table: str) -> dict[str, int]:
    return {
        parts[0]: int(parts[1])
        for parts in (line.split() for line in table.splitlines())
        if len(parts) == 2 and parts[0] in PER_KEY
    }


def iceberg(demo: Demo, stages: Stages) -> None:
    why_not = iceberg_unavailable()
    if why_not is not None:
        stages.done("iceberg", f"skipped: {why_not}")
        stages.done("duckdb", "skipped: no Iceberg table")
        return
    from examples.iceberg_query import per_topic

    (run,) = demo.json("export", "run", TOPIC, "--to", TABLE, "--engine", "local")
    total = sum(PER_KEY.values())
    if run["rows"] != total:
        raise StepFailed(f"the export wrote {run['rows']} rows, not {total}")
    (status,) = demo.json("export", "status", TOPIC, "--to", TABLE)
    stages.done(
        "iceberg",
        f"{run['rows']} messages exported to the table {TABLE.removeprefix('iceberg://')} "
        f"({run['files']} data files, snapshot {run['snapshot_id']})",
    )
    demo.say(f"metadata_location {status['metadata_location']}")
    counted = per_topic(status["metadata_location"])
    if counted != [(TOPIC, total, total)]:
        raise StepFailed(f"DuckDB's iceberg_scan counted {counted}, not {total} messages")
    stages.done("duckdb", f"iceberg_scan reads the {total} messages, every message id once")


def run_demo(demo: Demo, work: Path) -> None:
    stages = Stages()
    configure(demo)
    stages.start()
    produce(demo, stages)
    offload(demo, stages)
    read_back(demo, stages)
    spark(demo, work, stages)
    iceberg(demo, stages)


def main(argv: list[str] | None = None) -> int:
    return harness_main(
        argv,
        prog="python -m examples.demo",
        doc=__doc__ or "",
        name="demo",
        body=run_demo,
        verbose=False,
    )


if __name__ == "__main__":
    raise SystemExit(main())
