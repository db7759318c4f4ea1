"""``export run`` (Spark engine) against Spark writing the same rows to Parquet from memory.

Builds a home whose topic holds ``--total`` bytes of Pulsar-format messages (``--batch``
messages of ``--message`` bytes per entry, zstd-free, ledgers of ``--ledger`` bytes, all
offloaded to the home's file store), then, session warm, best of ``--repeat``:

* ours: ``Offloader.export_run`` to a fresh local directory (read every block, decode the
  messages, partition by publish hour, write zstd Parquet, commit the watermark);
* baseline (the floor): the same rows, already cached in Spark's memory (read back from our
  output), written by Spark's own Parquet writer with zstd, partitioned the same way.

Reports rows/s and MB/s (of the ledgers' bytes), the ratio (goal >= 0.6 on ``local[2]``), the
output's size against the input's, and the machine's busy CPU seconds of each side.

    python -m bench export [--total 16M] [--message 200] [--batch 50] [--repeat 2]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from bench import note, report
from bench.spark import _best, _session
from offloader.units import parse_size

GOAL_RATIO = 0.6
T0 = 1_750_000_000_000


def _home(root: Path, args: argparse.Namespace) -> tuple[Any, str, int, int]:
    """``(offloader, topic, messages, ledger bytes)``."""
    from offloader.api import BrokerSettings, MessageOptions, Offloader, Position

    clock = [T0]
    broker = dataclasses.replace(
        BrokerSettings(),
        max_ledger_size=parse_size(args.ledger),
        min_rollover_seconds=0,
        fsync="never",
    )
    off = Offloader.from_settings(root, clock_ms=lambda: clock[0], broker=broker)
    off.create_namespace("public/default")
    topic = "persistent://public/default/export-bench"
    pool = os.urandom(1 << 20)
    count = parse_size(args.total) // args.message

    def values() -> Any:
        for i in range(count):
            clock[0] += 10  # 360,000 messages an hour
            at = (i * 7919) % (len(pool) - args.message)
            yield pool[at : at + args.message]

    off.produce_messages(topic, values(), MessageOptions(batch_size=args.batch))
    off.roll_over(topic)
    info = off.topic_info(topic)
    last = [r for r in info.ledgers if r.state == "CLOSED"][-1]
    off.offload_prefix(topic, position=Position(last.ledger_id + 1, 0))
    size = sum(r.size_bytes for r in off.topic_info(topic).ledgers)
    return off, topic, count, size


def _du(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*.parquet"))


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench export")
    parser.add_argument("--total", default="16M")
    parser.add_argument("--message", type=int, default=200)
    parser.add_argument("--batch", type=int, default=50)
    parser.add_argument("--ledger", default="4M")
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args(argv)
    from pyspark.sql import functions as F

    from offloader.api import ExportSpec

    work = Path(tempfile.mkdtemp(prefix="bench-export-"))
    try:
        off, topic, messages, size = _home(work / "home", args)
        note(f"export: {messages} messages, {size} ledger bytes")
        spark = _session()
        runs = iter(range(1000))

        def ours() -> int:
            out = work / f"ours-{next(runs)}"
            (r,) = off.export_run([topic], ExportSpec(str(out)), spark=spark)
            return int(r.rows)

        ours()  # warm the workers
        mine = _best(args.repeat, ours)
        assert mine.value == messages, (mine.value, messages)
        exported = work / "ours-1"
        rows = (
            spark.read.option("recursiveFileLookup", "true")
            .parquet(str(exported))
            .withColumn("dt", F.date_format("publish_time", "yyyy-MM-dd"))
            .withColumn("hr", F.date_format("publish_time", "HH"))
            .cache()
        )
        assert rows.count() == messages

        def floor() -> int:
            out = work / f"floor-{next(runs)}"
            rows.write.partitionBy("dt", "hr").option("compression", "zstd").parquet(str(out))
            return messages

        base = _best(args.repeat, floor)
        mb = size / 1e6
        report(
            "export_parquet",
            messages / mine.seconds,
            messages / base.seconds,
            "rows/s",
            mb_per_s=round(mb / mine.seconds, 2),
            baseline_mb_per_s=round(mb / base.seconds, 2),
            messages=messages,
            input_bytes=size,
            output_bytes=_du(exported),
            output_vs_input=round(_du(exported) / size, 4),
            ours_s=round(mine.seconds, 3),
            ours_cpu_s=mine.cpu_s,
            baseline_s=round(base.seconds, 3),
            baseline_cpu_s=base.cpu_s,
            baseline_is="Spark writing the same rows (cached in memory) to zstd Parquet, "
            "partitioned by dt/hr",
            goal=GOAL_RATIO,
        )
        off.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0
