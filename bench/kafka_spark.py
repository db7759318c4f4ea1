"""Spark scan of remote Kafka segments (``kafka-segments``) vs the ``offloaded-ledger`` scan of
the same bytes.

Writes ``--segments`` closed Kafka segments (one per partition, ``--total`` bytes in all,
uncompressed 1 MiB batches of ``--entry``-byte records), uploads them with ``KafkaTier.upload``,
and offloads as many ledgers of the same total bytes (``--entry``-byte entries in ``--block``
blocks, ``bench.spark``'s uploader) to the same S3 server (moto, or a throwaway Ceph RGW with
``--s3 rgw``). Then, in the same ``local[2]`` session, warm, best of ``--repeat``:

* ours: ``spark.read.format("kafka-segments")``, every record's ``length(value)`` summed (one
  Spark partition per segment or per ``--split`` bytes of it, one ranged GET each);
* baseline: ``spark.read.format("offloaded-ledger")`` over the ledgers, every
  ``length(payload)`` summed (one partition per block).

Both as MB/s of stored object bytes (``.log`` bytes; data-object bytes); ratio = ours /
baseline. Beside each: the machine's busy CPU seconds during the best run (``*_cpu_s``: the S3
server, the JVM and the Python workers together) and the driver's own CPU seconds
(``*_client_cpu_s``). No goal is set by the issue: the figure says what the Kafka decoder costs
next to the ledger reader on the same Spark machinery.

    python -m bench kafka_spark [--s3 moto|rgw] [--total 256M] [--segments 4] [--entry 1K]
                                [--block 64M] [--split 64M] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import note, report
from bench.common import machine_cpu_seconds, quiet_logs, settle
from bench.kafka import write_segment
from bench.spark import _server, _session
from bench.spark import _upload as upload_ledgers
from offloader.units import parse_size


@dataclass(frozen=True)
class Timed:
    """The best run: wall seconds, machine busy CPU seconds, driver CPU seconds, value."""

    seconds: float
    cpu_s: float | None
    client_cpu_s: float
    value: int


def _best(repeat: int, fn: Callable[[], int]) -> Timed:
    best: Timed | None = None
    for _ in range(max(1, repeat)):
        settle()
        machine, client = machine_cpu_seconds(), time.process_time()
        start = time.perf_counter()
        value = fn()
        seconds = time.perf_counter() - start
        client_used = time.process_time() - client
        after = machine_cpu_seconds()
        used = round(after - machine, 2) if machine is not None and after is not None else None
        if best is None or seconds < best.seconds:
            best = Timed(seconds, used, round(client_used, 3), value)
    assert best is not None
    return best


def _sum_length(df: Any, column: str) -> int:
    from pyspark.sql import functions as F

    return int(df.agg(F.sum(F.length(column)).alias("n")).collect()[0]["n"])


def _upload_segments(
    endpoint: Any, bucket: str, home: Path, logs: Path, segments: int, size: int, entry: int
) -> tuple[int, int, int]:
    """Write and upload the segments: (their .log bytes, records, value bytes)."""
    from offloader.api import KafkaSettings, Offloader

    records = 0
    for partition in range(segments):
        _, count = write_segment(logs, size, record_size=entry, partition=partition)
        records += count
    with Offloader.from_settings(home, f"s3://{bucket}/k", endpoint_url=endpoint.url) as off:
        tier = off.kafka(KafkaSettings())
        result = tier.upload(logs)
        if not result.ok or len(result.of("uploaded")) != segments:
            raise SystemExit(f"kafka upload failed: {result}")
        log_bytes = sum(s.size_bytes for s in result.of("uploaded"))
    return log_bytes, records, records * (entry - 20)


def main(argv: list[str]) -> int:
    quiet_logs()
    parser = argparse.ArgumentParser(prog="python -m bench kafka_spark", description=__doc__)
    parser.add_argument("--s3", choices=("moto", "rgw"), default="moto")
    parser.add_argument("--total", default="256M")
    parser.add_argument("--segments", type=int, default=4)
    parser.add_argument("--entry", default="1K")
    parser.add_argument("--block", default="64M")
    parser.add_argument("--split", default="64M")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    total, entry = parse_size(args.total), parse_size(args.entry)
    block, split = parse_size(args.block), parse_size(args.split)
    per = total // max(1, args.segments)

    with _server(args.s3) as endpoint, tempfile.TemporaryDirectory(prefix="bench-ks.") as tmp:
        for key, value in endpoint.env().items():
            os.environ[key] = value
        bucket = endpoint.new_bucket()
        note(f"bench kafka_spark: {args.segments} segments and ledgers, {args.total} each kind")
        home = Path(tmp) / "home"
        log_bytes, records, value_bytes = _upload_segments(
            endpoint, bucket, home, Path(tmp) / "logs", args.segments, per, entry
        )
        ledgers = upload_ledgers(endpoint, bucket, args.segments, per, entry, block)
        data_bytes = sum(r.data_size for r in ledgers)
        payload_bytes = sum(r.payload_bytes for r in ledgers)

        spark = _session()
        try:
            from offloader.spark import register

            register(spark)
            ledgers_opt = ",".join(f"{r.ledger_id}:{r.uuid}" for r in ledgers)

            def kafka_scan() -> int:
                df = (
                    spark.read.format("kafka-segments")
                    .option("home", str(home))
                    .option("store", f"s3://{bucket}/k")
                    .option("endpoint", endpoint.url)
                    .option("split_bytes", str(split))
                    .load()
                )
                return _sum_length(df, "value")

            def ledger_scan() -> int:
                df = (
                    spark.read.format("offloaded-ledger")
                    .option("store", f"s3://{bucket}")
                    .option("endpoint", endpoint.url)
                    .option("ledgers", ledgers_opt)
                    .load()
                )
                return _sum_length(df, "payload")

            kafka_scan()  # warm: planner and reader workers, pyarrow import, clients
            ledger_scan()
            ours = _best(args.repeat, kafka_scan)
            base = _best(args.repeat, ledger_scan)
        finally:
            spark.stop()
    if ours.value != value_bytes:
        raise SystemExit(f"kafka-segments scan summed {ours.value} value bytes, not {value_bytes}")
    if base.value != payload_bytes:
        raise SystemExit(f"ledger scan summed {base.value} payload bytes, not {payload_bytes}")
    rec = report(
        "kafka.spark_scan",
        log_bytes / 1e6 / ours.seconds,
        data_bytes / 1e6 / base.seconds,
        "MB/s",
        s3=args.s3,
        bytes=log_bytes,
        baseline_bytes=data_bytes,
        records=records,
        segments=args.segments,
        split_bytes=split,
        entry=entry,
        block=block,
        ours_s=round(ours.seconds, 3),
        baseline_s=round(base.seconds, 3),
        ours_cpu_s=ours.cpu_s,
        baseline_cpu_s=base.cpu_s,
        client_cpu_s=ours.client_cpu_s,
        baseline_client_cpu_s=base.client_cpu_s,
        what="kafka-segments (sum of length(value)) vs offloaded-ledger (sum of length(payload)) "
        "over the same number of stored bytes, same session",
    )
    note(
        f"kafka spark scan {args.s3}: {rec['ours']:.1f} vs {rec['baseline']:.1f} MB/s "
        f"(ratio {rec['ratio']}; machine CPU {ours.cpu_s} s vs {base.cpu_s} s)"
    )
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main(sys.argv[1:]))
