"""``kafka-segments`` and the Kafka export over a transformed (zstd + AES-256-GCM) topic: the
driver loads each segment's chunk table, executors decrypt with the home's key ring."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest

from devservers.endpoint import S3Endpoint
from formats.kafka.batch import iter_records
from offloader.api import ExportSpec, KafkaSettings, Offloader, TransformPolicy, create_key
from offloader.spark import register
from tests.kafka.logdir import write_partition
from tests.spark.export_helpers import duck

pytestmark = [pytest.mark.spark, pytest.mark.s3]


def test_kafka_segments_and_export_of_a_transformed_topic(
    spark: Any, tmp_path: Path, moto_endpoint: S3Endpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OFFLOADER_KEY_RING", raising=False)
    for key, value in moto_endpoint.env().items():
        monkeypatch.setenv(key, value)
    store = f"s3://{moto_endpoint.new_bucket()}/k"
    root = tmp_path / "logs"
    layouts = [
        write_partition(root, "orders", 0, records=500, transactions=True, codecs=(0, 4)),
        write_partition(root, "orders", 1, records=300, codecs=(0,)),
    ]
    home = tmp_path / "home"
    create_key(home, "k1")
    with Offloader.from_settings(home, store, endpoint_url=moto_endpoint.url) as off:
        tier = off.kafka(KafkaSettings(transform_chunk_size=2048))
        tier.set_transform("orders", TransformPolicy("zstd", None, "aes-256-gcm", None))
        assert tier.upload(root).ok
        segments = tier.ctx.meta.list_segments()
        assert segments and all("chunks" in s.keys for s in segments)
    expected = []
    for layout in layouts:
        for base, _ in layout.segments[:-1]:
            data = (layout.path / f"{base:020d}.log").read_bytes()
            expected += [
                (layout.partition, r.offset, r.key, r.value)
                for h, r in iter_records(data)
                if not h.is_control
            ]
    expected.sort()
    register(spark)
    df = (
        spark.read.format("kafka-segments")
        .option("home", str(home))
        .option("store", store)
        .option("endpoint", moto_endpoint.url)
        .option("split_bytes", "5000")
        .load()
    )
    assert df.rdd.getNumPartitions() > len(segments)  # split at index entries, as plain
    got = sorted((r.partition, r.offset, r.key, r.value) for r in df.collect())
    assert got == expected
    some = df.filter("partition = 0 AND offset >= 120 AND offset < 140").collect()
    assert sorted(r.offset for r in some) == [
        o for p, o, _, _ in expected if p == 0 and 120 <= o < 140
    ]
    # the export reads the same tasks (local engine: in this process)
    out = tmp_path / "lake"
    with Offloader.from_settings(home, store, endpoint_url=moto_endpoint.url) as off:
        reports = off.export_run(["orders"], ExportSpec(str(out)), engine="local", kafka=True)
    assert sum(r.rows for r in reports) == len(expected)
    rows = duck(str(out), "partition, \"offset\", sha256(coalesce(value, ''::BLOB))")
    assert sorted((int(p), int(o), h) for p, o, h in rows) == sorted(
        (p, o, hashlib.sha256(v or b"").hexdigest()) for p, o, _, v in expected
    )
