"""The Kafka uploader against S3 servers over HTTP (moto, and Ceph RGW when it can run):
multipart .log uploads with per-part CRC32C, byte-exact objects, one-GET fetches."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from devservers.endpoint import S3Endpoint
from offloader.api import KafkaSettings, KafkaTier
from offloader.store.faulty import FaultyObjectStore
from tests.kafka.logdir import write_partition

pytestmark = pytest.mark.s3

MiB = 1024 * 1024


def test_upload_and_fetch_over_s3(
    tmp_path: Path,
    s3_endpoint: S3Endpoint,
    make_tier: Callable[..., KafkaTier],
    monkeypatch: object,
) -> None:
    # RGW enforces S3's 5 MiB minimum part: segments of ~11 MiB make 3 parts there
    rgw = s3_endpoint.name == "rgw"
    part = 5 * MiB if rgw else 16 * 1024
    root = tmp_path / "logs"
    layout = write_partition(
        root,
        "big",
        0,
        records=6000 if rgw else 1500,
        per_batch=50,
        segment_bytes=11 * MiB if rgw else 60 * 1024,
        codecs=(0,),
        pad=4000 if rgw else 0,
    )
    for name, value in s3_endpoint.env().items():
        monkeypatch.setenv(name, value)  # type: ignore[attr-defined]
    bucket = s3_endpoint.new_bucket()
    tier = make_tier(
        f"s3://{bucket}/tier",
        settings=KafkaSettings(part_size=part, enforce_min_part_size=False),
        endpoint_url=s3_endpoint.url,
    )
    counting = FaultyObjectStore(tier.ctx.store)
    tier.ctx.store = counting
    report = tier.upload(root)
    assert report.ok and report.of("uploaded")
    assert counting.calls["upload_part"] >= 3 and counting.calls["complete_multipart_upload"] >= 1
    client = s3_endpoint.client()
    for seg in tier.ctx.meta.list_segments("big", 0):
        local = (layout.path / f"{seg.base_offset:020d}.log").read_bytes()
        body = client.get_object(Bucket=bucket, Key="tier/" + seg.keys["log"])["Body"].read()
        assert body == local
    assert client.list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []
    tier.indexes._store = counting
    start = layout.segments[0][1] - 40
    list(tier.read("big", 0, from_offset=start, count=1))  # caches the index
    counting.reset_counts()
    got = [r.offset for r in tier.read("big", 0, from_offset=start, count=30)]
    assert got == list(range(start, start + 30))
    assert counting.calls["get_range"] == 1 and counting.calls["get"] == 0
