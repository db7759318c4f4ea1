"""The tour of every capability: ``make tour`` (moto) or ``make tour S3=ceph`` (Ceph RGW).

    python -m examples.tour [--s3 moto|ceph] [--store s3://bucket/prefix] [--home DIR]

On the S3 server of ``examples/harness.py`` (its own moto server unless one is configured), it
drives the real ``offloader`` command, printing each command and its output: creates namespaces
(one with an automatic offload threshold), produces enough data for several ledgers, runs
``offload-prefix`` and an automatic offload, shows ``offload-status`` and ``topics info``, reads
every entry back from S3 and checks it, verifies the objects' checksums, runs the Spark jobs
(``examples/spark_count.py``, ``spark_messages.py``, ``spark_export.py``) when PySpark and Java
are available, exports to Parquet and to an Iceberg table read back with DuckDB, deletes the
local copies with a deletion lag of 0, compresses and encrypts a namespace and re-keys it, runs
the Kafka tier (``examples/kafka_demo.py``), shows ``objects orphans`` reporting nothing
orphaned, and ends with two brokers on one PostgreSQL metadata store
(``examples/cluster_demo.py``; skipped, saying why, where PostgreSQL cannot run), then a
Pulsar cluster's topic read from its ZooKeeper and, on the same ZooKeeper, ``kafka status``
with each partition's role from ``--kafka-metadata``. It exits 1 as
soon as a step fails. ``make demo`` (``examples/demo.py``) is the short main job.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import json
import random
import time
from pathlib import Path

from examples.harness import (
    REPO_ROOT,
    Demo,
    check,
    iceberg_unavailable,
    spark_unavailable,
)
from examples.harness import main as harness_main

MANUAL_TOPIC = "persistent://demo/manual/orders"
AUTO_TOPIC = "persistent://demo/auto/events"
SECURE_TOPIC = "persistent://demo/secure/payments"
MESSAGES_TOPIC = "persistent://demo/manual/sensors"
SENSOR_KEYS = ("sensor-a", "sensor-b", "sensor-c")
ENTRIES = 9000  # 6 ledgers of 1500 entries
ENTRY_SIZE = 4000  # bytes per entry: about 6 MB per ledger, two 5M blocks
MAX_ENTRIES_PER_LEDGER = 1500


def write_entries(path: Path) -> list[str]:
    """ENTRIES lines of ENTRY_SIZE printable bytes; returns each line's SHA-256."""
    rng = random.Random(42)
    digests = []
    with path.open("wb") as out:
        for n in range(ENTRIES):
            body = base64.b64encode(rng.randbytes(ENTRY_SIZE))[: ENTRY_SIZE - 16]
            line = f"order-{n:09d} ".encode() + body
            line = line.ljust(ENTRY_SIZE, b".")
            digests.append(hashlib.sha256(line).hexdigest())
            out.write(line + b"\n")
    return digests


# --- the steps -----------------------------------------------------------------------------
def configure(demo: Demo) -> None:
    demo.step("Configure the home directory (offloader.toml)")
    config = (
        f'store = "{demo.target.store_url}"\n\n'
        "[broker]\n"
        f"max_entries_per_ledger = {MAX_ENTRIES_PER_LEDGER}\n"
        'min_rollover_time = "0"  # roll over as soon as a ledger is full\n'
        'max_block_size = "5M"\n'
        "offload_concurrency = 4\n"
    )
    (demo.home / "offloader.toml").write_text(config)
    print(f"  OFFLOADER_HOME={demo.home}   (S3: {demo.target.description})")
    for line in config.splitlines():
        print(f"  {line}")


def namespaces(demo: Demo) -> None:
    demo.step("Create namespaces; demo/auto offloads automatically above 8M")
    demo.offloader("namespaces", "create", "demo/manual")
    demo.offloader("namespaces", "create", "demo/auto")
    demo.offloader("namespaces", "set-offload-threshold", "demo/auto", "--size", "8M")
    demo.offloader(
        "namespaces",
        "get-offload-threshold",
        "demo/auto",
        expect="offloadThresholdInBytes: 8388608",
    )


def produce_and_offload_prefix(demo: Demo, data_file: Path) -> None:
    demo.step(f"Produce {ENTRIES} entries of {ENTRY_SIZE} bytes to {MANUAL_TOPIC}")
    demo.offloader("topics", "produce", MANUAL_TOPIC, "--file", str(data_file), expect="Produced")
    ledgers = demo.ledgers(MANUAL_TOPIC)
    check(len(ledgers) >= 5, f"{len(ledgers)} ledgers")

    demo.step("Offload all but the newest 10M (pulsar-admin topics offload -s 10M)")
    demo.offloader(
        "topics",
        "offload-prefix",
        MANUAL_TOPIC,
        "--size-threshold",
        "10M",
        expect="Offload triggered for",
    )
    demo.offloader("topics", "offload-status", MANUAL_TOPIC, expect="Offload was a success")
    offloaded = demo.offloaded(MANUAL_TOPIC, show=True)
    check(len(offloaded) >= 3, f"{len(offloaded)} ledgers offloaded to S3")


def automatic_offload(demo: Demo) -> None:
    demo.step(f"Automatic offload: produce 6000 entries of 4K to {AUTO_TOPIC}")
    demo.offloader(
        "topics",
        "produce",
        AUTO_TOPIC,
        "--synthetic",
        "6000",
        "--size",
        "4K",
        expect="Offloaded automatically",
    )
    ledgers = demo.ledgers(AUTO_TOPIC, show=True)
    kept_local = sum(
        ledger["size_bytes"]
        for ledger in ledgers
        if not ledger["offloaded"] and ledger["state"] == "CLOSED"
    )
    offloaded = [ledger["ledger_id"] for ledger in ledgers if ledger["offloaded"]]
    check(bool(offloaded), f"ledgers {offloaded} offloaded by the 8M threshold")
    check(kept_local <= 8 * 1024 * 1024, f"{kept_local} bytes of closed ledgers kept local")


def read_back(demo: Demo, digests: list[str]) -> None:
    demo.step("Read the entries back (offloaded ledgers come from S3) and check them")
    first_offloaded = demo.offloaded(MANUAL_TOPIC)[0]
    demo.offloader(
        "topics",
        "read",
        MANUAL_TOPIC,
        "--from",
        f"{first_offloaded['ledger_id']}:0",
        "--count",
        "3",
    )
    entries = demo.json("topics", "read", MANUAL_TOPIC, show=2)
    check(len(entries) == ENTRIES, f"{len(entries)} entries read back")
    mismatched = [e for e, d in zip(entries, digests, strict=False) if e["sha256"] != d]
    check(not mismatched, "every entry's SHA-256 matches what was produced")
    from_s3 = sum(1 for e in entries if e["tier"] == "offloaded")
    check(from_s3 > 0, f"{from_s3} entries were read from S3")

    demo.step("Verify the stored objects: sizes, index, every block's CRC32C")
    demo.offloader("objects", "verify", "--verify-checksums", expect="all ok")


def spark(demo: Demo) -> None:
    demo.step("Count entries per ledger with Spark (examples/spark_count.py)")
    script = REPO_ROOT / "examples" / "spark_count.py"
    if not script.exists():
        print("  skipped: examples/spark_count.py does not exist yet")
        return
    why_not = spark_unavailable()
    if why_not is not None:
        print(f"  skipped: {why_not}")
        return
    args = [*demo.home_and_store(), "--topics", MANUAL_TOPIC, AUTO_TOPIC]
    demo.example("spark_count", args, "the Spark job")


def pulsar_messages(demo: Demo) -> None:
    demo.step(f"Produce Pulsar-format messages to {MESSAGES_TOPIC} in three rounds")
    marks: list[int] = []
    per_round = {key: 300 + 100 * i for i, key in enumerate(SENSOR_KEYS)}
    for round_number in range(3):
        marks.append(int(time.time() * 1000))
        for key in SENSOR_KEYS:
            demo.offloader(
                "topics", "produce", MESSAGES_TOPIC, "--synthetic", str(per_round[key]),
                "--size", "200", "--format", "pulsar", "--batch-size", "100",
                "--compression", "lz4", "--key", key, "--property", f"round={round_number}",
                "--max-entries-per-ledger", "4", expect="messages in",
                quiet=round_number > 0,
            )  # fmt: skip
        time.sleep(1.1)  # the rounds' publish times do not overlap
    marks.append(int(time.time() * 1000))
    demo.offloader(
        "topics", "offload-prefix", MESSAGES_TOPIC, "--size-threshold", "0",
        expect="Offload triggered for",
    )  # fmt: skip
    demo.offloader("topics", "read", MESSAGES_TOPIC, "--decode", "pulsar", "--count", "3")

    demo.step("Spark: messages per key published in round 2 (examples/spark_messages.py)")
    if spark_unavailable() is not None:
        print("  skipped: needs PySpark and Java")
        return
    args = [
        *demo.home_and_store(), "--topics", MESSAGES_TOPIC,
        "--from-ms", str(marks[1]), "--to-ms", str(marks[2] - 1),
    ]  # fmt: skip
    out = demo.example("spark_messages", args, "the Spark job")
    got = {
        parts[0]: int(parts[1])
        for parts in (line.split() for line in out.splitlines())
        if len(parts) == 2 and parts[0] in SENSOR_KEYS
    }
    check(got == per_round, f"round 2's messages per key: {got}")


def export_parquet(demo: Demo, work: Path) -> None:
    demo.step("Export the messages to Hive-partitioned Parquet, query with DuckDB")
    if importlib.util.find_spec("pyspark") is None or importlib.util.find_spec("duckdb") is None:
        print("  skipped: needs PySpark, Java and duckdb")
        return
    lake = work / "lake"
    args = [*demo.home_and_store(), "--topics", MESSAGES_TOPIC, "--to", str(lake), "--query"]
    # the second run finds nothing new: exactly once
    runs = [demo.example("spark_export", args, "the export job") for _ in range(2)]
    exported = json.loads(runs[0].splitlines()[0])["rows"]
    again = json.loads(runs[1].splitlines()[0])["rows"]
    counted = [
        (int(p.split("messages=")[1].split()[0]), int(p.split("distinct_ids=")[1]))
        for p in runs[1].splitlines()
        if "messages=" in p
    ]
    total = sum(c[0] for c in counted)
    check(exported > 0 and again == 0, f"{exported} messages exported, 0 on the second run")
    check(
        total == exported and all(a == b for a, b in counted),
        f"DuckDB reads {total} messages, every message id once",
    )
    demo.offloader("export", "status", MESSAGES_TOPIC, "--to", str(lake), expect="watermark")


def export_iceberg(demo: Demo) -> None:
    demo.step("Export the messages to an Apache Iceberg table, query it with DuckDB's reader")
    why_not = iceberg_unavailable()
    if why_not is not None:
        print(f"  skipped: {why_not}")
        return
    from examples.iceberg_query import per_topic

    table = "iceberg://demo.sensors"
    run = ["export", "run", MESSAGES_TOPIC, "--to", table, "--engine", "local"]
    (first,) = demo.json(*run)
    print(f"  {first['rows']} messages in {first['files']} files, snapshot {first['snapshot_id']}")
    (again,) = demo.json(*run)
    check(
        first["rows"] > 0 and again["rows"] == 0 and again["snapshot_id"] == first["snapshot_id"],
        f"{first['rows']} messages committed in one snapshot; the second run commits nothing",
    )
    (status,) = demo.json("export", "status", MESSAGES_TOPIC, "--to", table)
    print(f"  metadata_location {status['metadata_location']}")
    print(f"$ duckdb: SELECT topic, count(*) FROM iceberg_scan('{status['metadata_location']}')")
    counted = per_topic(status["metadata_location"])
    for topic, n, distinct in counted:
        print(f"  {topic} messages={n} distinct_ids={distinct}")
    check(
        counted == [(MESSAGES_TOPIC, first["rows"], first["rows"])],
        f"DuckDB's iceberg_scan reads {first['rows']} messages, every message id once",
    )


def deletion_lag(demo: Demo) -> None:
    demo.step("Delete local copies of offloaded ledgers: deletion lag 0, one service pass")
    demo.offloader("namespaces", "set-offload-deletion-lag", "demo/manual", "--lag", "0")
    demo.offloader("namespaces", "get-offload-deletion-lag", "demo/manual", expect="0 minute(s)")
    demo.offloader("service", "run", "--once", expect="local copies deleted")
    offloaded = demo.offloaded(MANUAL_TOPIC, show=True)
    check(
        all(ledger["local_deleted"] for ledger in offloaded),
        f"local copies of {len(offloaded)} offloaded ledgers deleted",
    )
    first = offloaded[0]["ledger_id"]
    entries = demo.json("topics", "read", MANUAL_TOPIC, "--from", f"{first}:0", "--count", "1")
    check(entries[0]["tier"] == "offloaded", f"ledger {first} is now read from S3 only")


def encrypted_namespace(demo: Demo) -> None:
    demo.step(f"Compression + encryption at rest: namespace demo/secure ({SECURE_TOPIC})")
    demo.offloader("keys", "create", "k1", "--activate", expect="Created key k1")
    demo.offloader("namespaces", "create", "demo/secure")
    demo.offloader(
        "namespaces",
        "set-offload-transform",
        "demo/secure",
        "--compression",
        "zstd",
        "--encryption",
        "aes-256-gcm",
        "--key-id",
        "k1",
        expect="zstd+aes-256-gcm(key k1)",
    )
    demo.offloader("topics", "produce", SECURE_TOPIC, "--synthetic", "3000", "--size", "4K")
    demo.offloader("topics", "offload-prefix", SECURE_TOPIC, "--size-threshold", "1K")
    offloaded = {ledger["ledger_id"]: ledger for ledger in demo.offloaded(SECURE_TOPIC)}
    check(len(offloaded) == 2, f"ledgers {sorted(offloaded)} offloaded, encrypted")
    first = min(offloaded)
    demo.offloader("topics", "read", SECURE_TOPIC, "--from", f"{first}:0", "--count", "2")
    results = demo.json("objects", "verify", SECURE_TOPIC, "--verify-checksums", show=2)
    check(all(r["ok"] for r in results), "encrypted objects verified (every chunk decrypted)")
    stored = sum(r["data_size"] for r in results)
    original = sum(ledger["size_bytes"] for ledger in offloaded.values())
    check(stored < original, f"{stored} bytes stored for {original} bytes of entries (zstd)")
    demo.offloader("keys", "create", "k2", "--activate")
    demo.offloader("keys", "list")
    demo.offloader("objects", "rekey", "--to-key", "k2", expect="rekeyed to key k2")
    entries = demo.json("topics", "read", SECURE_TOPIC, quiet=True)
    check(len(entries) == 3000, "all 3000 entries read back after re-keying to k2")


def orphans(demo: Demo) -> None:
    demo.step("Audit the bucket: nothing orphaned, nothing missing")
    demo.offloader("objects", "orphans", "--min-age", "0", expect="No orphaned objects")
    report = demo.json("objects", "orphans", "--min-age", "0", quiet=True)[0]
    check(report["clean"], "no orphaned objects, unfinished uploads or missing objects")


def run_tour(demo: Demo, work: Path) -> None:
    from examples.cluster_demo import cluster_part
    from examples.kafka_demo import kafka_cluster_part, kafka_part
    from examples.pulsar_cluster_demo import pulsar_cluster_part

    configure(demo)
    namespaces(demo)
    data_file = work / "orders.txt"
    digests = write_entries(data_file)
    produce_and_offload_prefix(demo, data_file)
    automatic_offload(demo)
    read_back(demo, digests)
    spark(demo)
    pulsar_messages(demo)
    export_parquet(demo, work)
    export_iceberg(demo)
    deletion_lag(demo)
    encrypted_namespace(demo)
    kafka_part(demo, work, check)
    orphans(demo)
    cluster_part(demo, work, check)
    pulsar_cluster_part(
        demo, work, check, also=lambda url: kafka_cluster_part(demo, work, check, url)
    )


def main(argv: list[str] | None = None) -> int:
    return harness_main(
        argv,
        prog="python -m examples.tour",
        doc=__doc__ or "",
        name="tour",
        body=run_tour,
        verbose=True,
    )


if __name__ == "__main__":
    raise SystemExit(main())
