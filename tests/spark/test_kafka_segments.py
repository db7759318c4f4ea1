"""``spark.read.format("kafka-segments")``: Spark's Kafka columns over remote Kafka segments,
a partition per segment (split at index entries), partition/offset/timestamp pushdown."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from devservers.endpoint import S3Endpoint
from formats.kafka.batch import iter_records
from offloader.api import KafkaSettings, Offloader
from offloader.spark import register
from tests.kafka.logdir import write_partition

pytestmark = [pytest.mark.spark, pytest.mark.s3]


@pytest.fixture()
def kafka_home(tmp_path: Path, s3_endpoint: S3Endpoint, monkeypatch: pytest.MonkeyPatch) -> Any:
    """Two partitions uploaded to the current S3 server (moto, and RGW when it runs)."""
    for key, value in s3_endpoint.env().items():
        monkeypatch.setenv(key, value)
    bucket = s3_endpoint.new_bucket()
    root = tmp_path / "logs"
    layouts = [
        write_partition(root, "orders", 0, records=500, transactions=True),
        write_partition(root, "orders", 1, records=300),
    ]
    home = tmp_path / "home"
    store = f"s3://{bucket}/k"
    with Offloader.from_settings(home, store, endpoint_url=s3_endpoint.url) as off:
        assert off.kafka(KafkaSettings()).upload(root).ok
        segments = off.kafka().ctx.meta.list_segments()
    expected = []
    for layout in layouts:
        for base, _ in layout.segments[:-1]:
            data = (layout.path / f"{base:020d}.log").read_bytes()
            for h, r in iter_records(data):
                if not h.is_control:
                    expected.append(
                        (
                            "orders",
                            layout.partition,
                            r.offset,
                            r.timestamp,
                            r.key,
                            r.value,
                            r.headers,
                        )
                    )
    return home, store, s3_endpoint.url, segments, sorted(expected)


def test_columns_partitions_and_pushdown(spark: Any, kafka_home: Any) -> None:
    home, store, endpoint, segments, expected = kafka_home
    register(spark)
    df = (
        spark.read.format("kafka-segments")
        .option("home", str(home))
        .option("store", store)
        .option("endpoint", endpoint)
        .option("split_bytes", "7000")
        .load()
    )
    assert [(f.name, f.dataType.simpleString()) for f in df.schema.fields] == [
        ("key", "binary"), ("value", "binary"), ("topic", "string"), ("partition", "int"),
        ("offset", "bigint"), ("timestamp", "timestamp"), ("timestampType", "int"),
        ("headers", "array<struct<key:string,value:binary>>"),
    ]  # fmt: skip
    assert df.rdd.getNumPartitions() > len(segments)  # split at index entries
    rows = df.collect()
    got = sorted(
        (
            r.topic, r.partition, r.offset,
            # a naive datetime is in this process's local time, as PySpark converts it
            round(r.timestamp.timestamp() * 1000),
            r.key, r.value, tuple((h.key, h.value) for h in r.headers),
        )
        for r in rows
    )  # fmt: skip
    assert [g[:3] for g in got] == [e[:3] for e in expected]
    assert [g[3] for g in got] == [e[3] for e in expected]  # timestamps to the millisecond
    assert [g[4:] for g in got] == [e[4:] for e in expected]
    assert {r.timestampType for r in rows} == {0}
    # pushdown: partition and offset prune segments; results exact
    cutoff = next(e for e in expected if e[1] == 0 and e[2] == 160)[3]
    when = datetime.fromtimestamp(cutoff / 1000, tz=timezone.utc)
    some = df.filter("partition = 0 AND offset >= 150 AND offset < 170").filter(
        df.timestamp >= when
    )
    assert sorted(r.offset for r in some.select("offset").collect()) == [
        e[2] for e in expected if e[1] == 0 and 150 <= e[2] < 170 and e[3] >= cutoff
    ]


def test_discover_reads_the_bucket_without_a_home(spark: Any, kafka_home: Any) -> None:
    """``discover``: the home is gone; the bucket's markers plan one partition per segment
    range, and every record reads back as with the home, none twice."""
    import shutil

    home, store, endpoint, segments, expected = kafka_home
    shutil.rmtree(home)
    register(spark)
    df = (
        spark.read.format("kafka-segments")
        .option("store", store)
        .option("endpoint", endpoint)
        .option("discover", "true")
        .load()
    )
    assert df.rdd.getNumPartitions() == len([s for s in segments if s.state.endswith("FINISHED")])
    got = sorted(
        (r.topic, r.partition, r.offset, r.key, r.value, tuple((h.key, h.value) for h in r.headers))
        for r in df.collect()
    )
    assert got == [(e[0], e[1], e[2], e[4], e[5], e[6]) for e in expected]
    one = df.filter("partition = 1 AND offset >= 100 AND offset < 120").select("offset")
    assert sorted(r.offset for r in one.collect()) == [
        e[2] for e in expected if e[1] == 1 and 100 <= e[2] < 120
    ]
    with pytest.raises(Exception, match="discover"):
        spark.read.format("kafka-segments").option("discover", "true").load().collect()
