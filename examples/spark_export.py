"""Export Pulsar topics to Hive-partitioned Parquet, exactly once, then query it with DuckDB.

    spark-submit --conf spark.python.daemon.module=offloader.spark.daemon \\
        examples/spark_export.py --home .offloader --store s3://bucket \\
        --topics persistent://demo/manual/sensors --to /data/lake [--partition-by dt,hr]
    python -m examples.spark_export ...           # the same, on a local[2] session

Each run exports what is new since the topic's export watermark (the open ledger waits until
it is closed); a re-run after a crash writes the same file names with the same bytes. With
``--query`` (needs ``duckdb``), prints messages per partition read back from the Parquet files.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--home", default=os.environ.get("OFFLOADER_HOME", ".offloader"))
    p.add_argument("--store", default=None, help="the store URL (default: the home's)")
    p.add_argument("--endpoint-url", default=os.environ.get("AWS_ENDPOINT_URL"))
    p.add_argument("--topics", required=True, help="comma-separated topic names")
    p.add_argument("--to", required=True, help="a local directory or s3://bucket/prefix")
    p.add_argument("--partition-by", default="dt,hr", choices=["dt", "dt,hr"])
    p.add_argument("--time-field", default="publish_time")
    p.add_argument("--query", action="store_true", help="read the result back with DuckDB")
    return p.parse_args(argv)


def session() -> Any:
    """spark-submit's session when there is one, else a loopback local[2] session."""
    if "SPARK_ENV_LOADED" in os.environ or os.environ.get("SPARK_SUBMIT"):
        from pyspark.sql import SparkSession

        return SparkSession.builder.appName("offloader-export").getOrCreate()
    from offloader.spark import local_session

    return local_session("offloader-export")


def query(target: str) -> list[tuple[Any, ...]]:
    """Messages and distinct message ids per partition, through DuckDB."""
    import duckdb

    files = f"read_parquet('{target}/**/*.parquet', hive_partitioning = true)"
    con = duckdb.connect()
    try:
        return list(
            con.execute(
                f"SELECT topic, dt, count(*), count(DISTINCT message_id) FROM {files} "
                "GROUP BY ALL ORDER BY ALL"
            ).fetchall()
        )
    finally:
        con.close()


def main(argv: list[str] | None = None) -> int:
    from offloader.api import ExportSpec, Offloader

    args = parse_args(argv)
    spec = ExportSpec(
        args.to,
        partition_by=args.partition_by,
        time_field=args.time_field,
        endpoint_url=args.endpoint_url,
    )
    spark = session()
    topics = [t.strip() for t in args.topics.split(",") if t.strip()]
    with Offloader.from_settings(args.home, args.store, endpoint_url=args.endpoint_url) as off:
        for r in off.export_run(topics, spec, spark=spark):
            print(json.dumps({"topic": r.topic, "rows": r.rows, "files": r.files,
                              "watermark": list(r.watermark)}), flush=True)  # fmt: skip
    if args.query and not spec.is_s3:
        for topic, day, rows, ids in query(spec.target):
            print(f"{topic} dt={day} messages={rows} distinct_ids={ids}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
