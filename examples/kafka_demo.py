"""The Kafka part of ``make tour``: a broker log directory, an upload, reads, Spark.

:func:`write_log_dir` lays out a small Kafka log directory the way a broker does (two
partitions of ``demo-orders``, segments rolled at 64 KiB with their ``.index`` and
``.timeindex`` by Kafka's rule, ``partition.metadata``, ``leader-epoch-checkpoint``;
uncompressed, gzip and zstd batches), written with :mod:`formats.kafka`'s encoder.
:func:`kafka_part` drives the real ``offloader kafka`` commands over it and checks what they
print.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path

from examples.harness import Demo, spark_unavailable
from formats.kafka.batch import iter_batch_headers
from formats.kafka.encode import NewRecord, encode_batch
from formats.kafka.index import build_indexes
from formats.kafka.names import (
    encode_leader_epoch_checkpoint,
    encode_partition_metadata,
    segment_file_name,
    uuid_to_kafka,
)

TOPIC = "demo-orders"
RECORDS = 6000
PER_BATCH = 50
SEGMENT_BYTES = 64 * 1024
BASE_TS = 1_700_000_000_000


def _value(partition: int, offset: int) -> bytes:
    return (
        f"order {partition}/{offset}: ".encode()
        + uuid.uuid5(uuid.NAMESPACE_OID, f"{partition}/{offset}").hex.encode() * 4
    )


def write_log_dir(root: Path) -> dict[int, list[tuple[int, int]]]:
    """The log directory; ``{partition: [(base offset, last offset), ...]}`` (last: active)."""
    topic_id = uuid_to_kafka(uuid.uuid5(uuid.NAMESPACE_DNS, TOPIC))
    layout: dict[int, list[tuple[int, int]]] = {}
    for partition in (0, 1):
        directory = root / f"{TOPIC}-{partition}"
        directory.mkdir(parents=True)
        (directory / "partition.metadata").write_bytes(encode_partition_metadata(topic_id))
        (directory / "leader-epoch-checkpoint").write_bytes(
            encode_leader_epoch_checkpoint(((0, 0),))
        )
        segments: list[tuple[int, int]] = []
        base, data, offset = 0, bytearray(), 0
        while offset < RECORDS:
            rows = [
                NewRecord(
                    BASE_TS + (offset + i) * 100,
                    f"customer-{(offset + i) % 97}".encode(),
                    _value(partition, offset + i),
                    (("source", b"demo"),),
                )
                for i in range(PER_BATCH)
            ]
            data += encode_batch(rows, base_offset=offset, codec=(0, 1, 4)[offset // PER_BATCH % 3])
            offset += PER_BATCH
            if len(data) >= SEGMENT_BYTES or offset >= RECORDS:
                headers = list(iter_batch_headers(bytes(data)))
                offsets, times = build_indexes(headers, base, closed=offset < RECORDS)
                for kind, payload in (
                    ("log", bytes(data)),
                    ("index", offsets.encode()),
                    ("timeindex", times.encode()),
                ):
                    (directory / segment_file_name(base, kind)).write_bytes(payload)
                segments.append((base, offset - 1))
                base, data = offset, bytearray()
        layout[partition] = segments
    return layout


def kafka_part(demo: Demo, work: Path, check: Callable[[bool, str], None]) -> None:
    """Upload, status, read by offset and by time, and a Spark query (``check``: the
    harness's check function)."""
    log_dir = work / "kafka-logs"
    layout = write_log_dir(log_dir)
    closed = sum(len(s) - 1 for s in layout.values())
    demo.step(f"Kafka: store {TOPIC}'s segments compressed and encrypted (the active key)")
    demo.offloader(
        "kafka", "set-offload-transform", TOPIC, "--compression", "zstd",
        "--encryption", "aes-256-gcm", expect="zstd+aes-256-gcm",
    )  # fmt: skip
    demo.step(
        f"Kafka: upload the closed segments of a broker log directory ({TOPIC}, 2 partitions)"
    )
    out = demo.json(
        "kafka",
        "upload",
        "--log-dir",
        str(log_dir),
        "--once",
        "--part-size",
        "5M",
        "--hash-prefix",
        "2",
    )
    summary = out[-1]
    check(summary["uploaded"] == closed, f"{closed} closed segments uploaded, the active ones kept")
    demo.offloader("kafka", "status", TOPIC, "--log-dir", str(log_dir))
    status = demo.json("kafka", "status", TOPIC, "--log-dir", str(log_dir), quiet=True)
    check(all(s["upload_lag"] == 0 for s in status), "upload lag 0 on both partitions")
    rekeyed = demo.json("objects", "rekey", "--to-key", "k2", quiet=True)
    kafka_rekeyed = [r for r in rekeyed if r["topic"].startswith("kafka:")]
    check(
        len(kafka_rekeyed) == closed and all(r["action"] == "unchanged" for r in kafka_rekeyed),
        f"{closed} encrypted segments, their data keys wrapped by the active key k2",
    )

    demo.step("Kafka: fetch 5 records at offset 1234 of partition 0 (one ranged GET)")
    rows = demo.json("kafka", "read", TOPIC, "0", "--from-offset", "1234", "--count", "5", show=2)
    check([r["offset"] for r in rows] == list(range(1234, 1239)), "offsets 1234..1238, in order")
    check(rows[0]["value"].startswith("order 0/1234: "), "the value of record 1234")
    when = BASE_TS + 2500 * 100 + 50
    demo.step(f"Kafka: fetch by time (first record at or after {when} ms)")
    rows = demo.json(
        "kafka", "read", TOPIC, "1", "--from-timestamp", str(when), "--count", "2", show=1
    )
    check(rows[0]["offset"] == 2501, "the first record at or after that time is offset 2501")
    last = layout[0][-1][1]
    start = layout[0][-1][0] - 3
    demo.step("Kafka: read across the tiers (remote segments, then the active local one)")
    rows = demo.json(
        "kafka",
        "read",
        TOPIC,
        "0",
        "--from-offset",
        str(start),
        "--log-dir",
        str(log_dir),
        "--mode",
        "remote-preferred",
        show=2,
    )
    check(
        [r["offset"] for r in rows] == list(range(start, last + 1)),
        f"offsets {start}..{last} without a gap or a duplicate at the boundary",
    )
    check(rows[0]["tier"] == "remote" and rows[-1]["tier"] == "local", "remote, then local")

    demo.step("Kafka: count records per partition with Spark (kafka-segments source)")
    why_not = spark_unavailable()
    if why_not is not None:
        print(f"  skipped: {why_not}")
        return
    args = ["--home", str(demo.home), "--store", demo.target.store_url]
    counted = demo.example("kafka_spark", args, "the Kafka Spark job")
    expected = {p: segs[-1][0] for p, segs in layout.items()}  # records in closed segments
    for partition, count in expected.items():
        check(
            f"{TOPIC}  {partition}  {count}" in counted,
            f"Spark counted {count} remote records in partition {partition}",
        )


def kafka_cluster_part(
    demo: Demo, work: Path, check: Callable[[bool, str], None], zk_url: str
) -> None:
    """``kafka status`` with each partition's role from the cluster's metadata: the tour's
    ZooKeeper (``zk_url``, the Pulsar step's ``zk:host:port/pulsar``) gets a Kafka cluster
    under ``/kafka``, its znodes written as Kafka writes them, in which this log dir's broker
    (``meta.properties``: broker 1) leads partition 0 of :data:`TOPIC` and follows broker 2 on
    partition 1."""
    import json
    import logging

    from kazoo.client import KazooClient

    from formats.kafka.names import parse_partition_metadata

    demo.step("Kafka: kafka status with the cluster's roles (--kafka-metadata, the same ZooKeeper)")
    log_dir = work / "kafka-logs"
    (log_dir / "meta.properties").write_text("version=0\nbroker.id=1\n")
    metadata = (log_dir / f"{TOPIC}-0" / "partition.metadata").read_bytes()
    topic_id = parse_partition_metadata(metadata)
    hosts = zk_url.removeprefix("zk:").split("/", 1)[0]
    quiet = logging.getLogger("examples.kafka_demo.kazoo")
    quiet.addHandler(logging.NullHandler())
    quiet.propagate = False
    client = KazooClient(hosts=hosts, timeout=15, logger=quiet)
    client.start(timeout=30)
    try:
        root = "/kafka/brokers/topics/" + TOPIC
        replicas = {"0": [1, 2], "1": [2, 1]}
        topic = {"version": 3, "partitions": replicas, "topic_id": topic_id}
        client.create(root, json.dumps(topic).encode(), makepath=True)
        for p, brokers in replicas.items():
            state = {
                "controller_epoch": 1,
                "leader": brokers[0],
                "version": 1,
                "leader_epoch": 3,
                "isr": brokers,
            }
            client.create(f"{root}/partitions/{p}/state", json.dumps(state).encode(), makepath=True)
        config = {"version": 1, "config": {"remote.storage.enable": "true"}}
        client.create(f"/kafka/config/topics/{TOPIC}", json.dumps(config).encode(), makepath=True)
    finally:
        client.stop()
        client.close()
    url = f"zk:{hosts}/kafka"
    demo.say(f"wrote /kafka/brokers/topics/{TOPIC} and its partitions' state on {hosts}")
    demo.offloader("kafka", "status", TOPIC, "--log-dir", str(log_dir), "--kafka-metadata", url)
    rows = demo.json(
        "kafka", "status", TOPIC, "--log-dir", str(log_dir), "--kafka-metadata", url, quiet=True
    )
    roles = {r["partition"]: (r["role"], r["leader_epoch"]) for r in rows}
    check(
        roles == {0: ("leader", 3), 1: ("follower", 3)},
        f"broker 1 leads partition 0 and follows broker 2 on partition 1: {roles}",
    )
