"""Messages per key in a publish-time window, with Spark over Pulsar-format topics.

    python -m examples.spark_messages --home .offloader --store s3://bucket \\
        --topics persistent://demo/manual/sensors --from-ms 1700000000000 --to-ms 1700000060000

Reads through the ``pulsar-messages`` DataFrame source (entries decoded into messages; blocks
whose zone maps lie outside the window are never fetched) and prints the table of
``groupBy("key")`` over ``publish_time BETWEEN from AND to`` (ms since the epoch, inclusive).
With ``--cluster-metadata URL --cluster-topics ...`` the same session then counts a real Pulsar
cluster's topics too (read by name through its metadata store), printed as a second table after
a ``cluster:`` line: one JVM for both (``make demo`` does that).
"""

from __future__ import annotations

import argparse
import datetime as dt
from typing import Any


def count_by_key(
    spark: Any, options: dict[str, str], from_ms: int, to_ms: int
) -> tuple[list[tuple[str, int]], int, int]:
    """``([(key, messages)], partitions read, partitions without the filter)``."""
    from pyspark.sql import functions as F

    from offloader.spark import register

    register(spark)
    reader = spark.read.format("pulsar-messages")
    for key, value in options.items():
        reader = reader.option(key, value)
    df = reader.load()
    total = df.rdd.getNumPartitions()  # before any filtered query on df
    lo = dt.datetime.fromtimestamp(from_ms / 1000, tz=dt.timezone.utc)
    hi = dt.datetime.fromtimestamp(to_ms / 1000, tz=dt.timezone.utc)
    window = df.filter(F.col("publish_time").between(lo, hi))
    rows = window.groupBy("key").agg(F.count("*").alias("messages")).orderBy("key").collect()
    table = [(r["key"] or "-", int(r["messages"])) for r in rows]
    return table, window.rdd.getNumPartitions(), total


def format_table(rows: list[tuple[str, int]]) -> str:
    width = max([len("key"), *(len(k) for k, _ in rows)])
    out = [f"{'key':<{width}}  {'messages':>8}", f"{'-' * width}  {'-' * 8}"]
    out += [f"{k:<{width}}  {n:>8}" for k, n in rows]
    out += [f"{'-' * width}  {'-' * 8}", f"{'TOTAL':<{width}}  {sum(n for _, n in rows):>8}"]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m examples.spark_messages",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--store", required=True, help="s3://bucket[/prefix] or file:///dir")
    parser.add_argument("--endpoint-url", default=None)
    parser.add_argument("--home", default=".offloader", help="metadata store home")
    parser.add_argument(
        "--pulsar-metadata",
        default=None,
        help="a real Pulsar cluster's metadata store (zk:host:port/chroot): TOPICS are its "
        "topics by name, instead of the home's",
    )
    parser.add_argument("--topics", nargs="+", required=True)
    parser.add_argument(
        "--cluster-metadata",
        default=None,
        help="also count these topics of a real Pulsar cluster (its metadata store URL), in "
        "the same Spark session",
    )
    parser.add_argument("--cluster-topics", nargs="+", default=None)
    parser.add_argument("--from-ms", type=int, required=True)
    parser.add_argument("--to-ms", type=int, required=True)
    args = parser.parse_args(argv)
    options = {"store": args.store, "topics": ",".join(args.topics), "home": args.home}
    if args.pulsar_metadata:
        del options["home"]
        options["pulsar_metadata"] = args.pulsar_metadata
    if args.endpoint_url:
        options["endpoint"] = args.endpoint_url

    from offloader.spark import local_session

    if bool(args.cluster_metadata) != bool(args.cluster_topics):
        parser.error("--cluster-metadata and --cluster-topics go together")
    spark = local_session("offloader-spark-messages")
    try:
        rows, read, total = count_by_key(spark, options, args.from_ms, args.to_ms)
        print(format_table(rows))
        print(f"({read} of {total} partitions read: zone maps skip blocks outside the window)")
        if args.cluster_metadata:
            more = {
                "store": args.store,
                "topics": ",".join(args.cluster_topics),
                "pulsar_metadata": args.cluster_metadata,
            }
            if args.endpoint_url:
                more["endpoint"] = args.endpoint_url
            rows, read, total = count_by_key(spark, more, args.from_ms, args.to_ms)
            print(f"cluster: {args.cluster_metadata}")
            print(format_table(rows))
            print(f"({read} of {total} partitions read)")
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
