"""Per-ledger entry counts and payload bytes of offloaded ledgers, with Spark.

    python -m examples.spark_count --store s3://bucket [--endpoint-url URL] --discover
    python -m examples.spark_count --home .offloader --topics persistent://public/default/t1
    python -m examples.spark_count --store s3://bucket --ledgers 12:<uuid>,13:<uuid>

Reads through the ``offloaded-ledger`` DataFrame source (one partition per block) and prints a
table from ``groupBy("topic", "ledger_id")``. Credentials come from the AWS environment
(``AWS_ACCESS_KEY_ID`` ...); ``AWS_ENDPOINT_URL`` works as well as ``--endpoint-url``.
"""

from __future__ import annotations

import argparse
from typing import Any


def _session() -> Any:
    from offloader.spark import local_session

    return local_session("offloader-spark-count")


def count_table(spark: Any, options: dict[str, str]) -> list[tuple[str, int, int, int, int]]:
    """``(topic, ledger_id, entries, bytes, partitions)`` rows, by topic then ledger id."""
    from pyspark.sql import functions as F

    from offloader.spark import register

    register(spark)
    reader = spark.read.format("offloaded-ledger")
    for key, value in options.items():
        reader = reader.option(key, value)
    df = reader.load()
    rows = (
        df.groupBy("topic", "ledger_id")
        .agg(F.count("*").alias("entries"), F.sum(F.length("payload")).alias("bytes"))
        .orderBy("topic", "ledger_id")
        .collect()
    )
    return [
        (
            r["topic"] or "-",
            r["ledger_id"],
            r["entries"],
            r["bytes"] or 0,
            df.rdd.getNumPartitions(),
        )
        for r in rows
    ]


def format_table(rows: list[tuple[str, int, int, int, int]]) -> str:
    header = ("topic", "ledger", "entries", "bytes")
    body = [(t, str(lid), str(n), str(b)) for t, lid, n, b, _ in rows]
    total = ("TOTAL", str(len(rows)), str(sum(r[2] for r in rows)), str(sum(r[3] for r in rows)))
    widths = [max(len(x[i]) for x in [header, *body, total]) for i in range(4)]
    fmt = f"{{:<{widths[0]}}}  {{:>{widths[1]}}}  {{:>{widths[2]}}}  {{:>{widths[3]}}}"
    out = [fmt.format(*header), fmt.format(*("-" * w for w in widths))]
    out += [fmt.format(*r) for r in body]
    out += [fmt.format(*("-" * w for w in widths)), fmt.format(*total)]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m examples.spark_count",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--store", help="s3://bucket[/prefix] or file:///dir")
    parser.add_argument("--endpoint-url", default=None)
    parser.add_argument("--home", default=None, help="metadata store home (with --topics)")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--topics", nargs="+", help="topic names (needs --home)")
    source.add_argument("--discover", action="store_true", help="every *-index key")
    source.add_argument("--ledgers", help="id:uuid,id:uuid")
    args = parser.parse_args(argv)

    options: dict[str, str] = {}
    if args.store:
        options["store"] = args.store
    if args.endpoint_url:
        options["endpoint"] = args.endpoint_url
    if args.topics:
        options["topics"] = ",".join(args.topics)
        options["home"] = args.home or ".offloader"
    elif args.discover:
        options["discover"] = "true"
    else:
        options["ledgers"] = args.ledgers
    if not args.topics and not args.store:
        parser.error("--store is required with --discover and --ledgers")

    spark = _session()
    try:
        rows = count_table(spark, options)
    finally:
        spark.stop()
    print(format_table(rows))
    print(f"({rows[0][4] if rows else 0} partitions, one per block)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
