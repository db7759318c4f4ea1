"""Records per topic-partition of remote Kafka segments, with Spark's ``kafka-segments`` source.

    python -m examples.kafka_spark --home .offloader --store s3://bucket/prefix [--endpoint-url URL]

Prints ``topic  partition  records  min offset  max offset`` lines (from ``groupBy``), and the
records of partition 0 with offsets 100..104 (offset and timestamp pushed down).
"""

from __future__ import annotations

import argparse
import os


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m examples.kafka_spark", description=__doc__)
    parser.add_argument("--home", required=True)
    parser.add_argument("--store", required=True)
    parser.add_argument("--endpoint-url", default=os.environ.get("AWS_ENDPOINT_URL"))
    args = parser.parse_args(argv)

    from pyspark.sql import functions as F

    from offloader.spark import local_session, register

    spark = local_session("offloader-kafka-spark")
    try:
        register(spark)
        reader = spark.read.format("kafka-segments").option("home", args.home)
        reader = reader.option("store", args.store)
        if args.endpoint_url:
            reader = reader.option("endpoint", args.endpoint_url)
        df = reader.load()
        rows = (
            df.groupBy("topic", "partition")
            .agg(F.count("*").alias("n"), F.min("offset").alias("lo"), F.max("offset").alias("hi"))
            .orderBy("topic", "partition")
            .collect()
        )
        print(f"{df.rdd.getNumPartitions()} Spark partitions (one per remote segment)")
        for r in rows:
            print(f"{r['topic']}  {r['partition']}  {r['n']}  {r['lo']}  {r['hi']}")
        some = df.filter("partition = 0 AND offset BETWEEN 100 AND 104").orderBy("offset")
        for r in some.select("offset", "timestamp", "key").collect():
            print(f"  offset {r['offset']} at {r['timestamp']} key {r['key'].decode()}")
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
