"""A transformed Kafka topic over HTTP S3 servers (moto, and Ceph RGW when it can run): the
chunked ``.log`` as a multipart upload of joined stored blocks, the ``.chunks`` object beside
it, records read back by offset with one ranged GET per fetch."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from devservers.endpoint import S3Endpoint
from offloader.api import KafkaSettings, KafkaTier, TransformPolicy
from offloader.keyring import KEY_RING_ENV, KeyRing
from offloader.store.faulty import FaultyObjectStore
from tests.kafka.logdir import write_partition
from tests.kafka.test_fetch import _expected, _rows

pytestmark = pytest.mark.s3

MiB = 1024 * 1024


def test_transformed_topic_over_s3(
    tmp_path: Path,
    s3_endpoint: S3Endpoint,
    make_tier: Callable[..., KafkaTier],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rgw = s3_endpoint.name == "rgw"  # RGW enforces S3's 5 MiB minimum part
    part = 5 * MiB if rgw else 16 * 1024
    root = tmp_path / "logs"
    layout = write_partition(
        root,
        "secret",
        0,
        records=6000 if rgw else 1500,
        per_batch=50,
        segment_bytes=12 * MiB if rgw else 80 * 1024,
        codecs=(0,),
        pad=4000 if rgw else 0,
    )
    ring = KeyRing(tmp_path / "keys")
    ring.create("k1", activate=True)
    monkeypatch.setenv(KEY_RING_ENV, str(ring.path))
    for name, value in s3_endpoint.env().items():
        monkeypatch.setenv(name, value)
    bucket = s3_endpoint.new_bucket()
    tier = make_tier(
        f"s3://{bucket}/tier",
        settings=KafkaSettings(
            part_size=part,
            enforce_min_part_size=False,
            transform_chunk_size=4096 if not rgw else 256 * 1024,
        ),
        endpoint_url=s3_endpoint.url,
    )
    # random-looking values with a compressible tail: zstd keeps about half
    tier.set_transform("secret", TransformPolicy("zstd", None, "aes-256-gcm", None))
    counting = FaultyObjectStore(tier.ctx.store)
    tier.ctx.store = counting
    report = tier.upload(root)
    assert report.ok and report.of("uploaded")
    # RGW: 12 MiB segments compress below one 5 MiB part; moto: many parts per segment
    assert counting.calls["upload_part"] >= (1 if rgw else 4)
    assert counting.calls["complete_multipart_upload"] >= 1
    client = s3_endpoint.client()
    for seg in tier.ctx.meta.list_segments("secret", 0):
        local = (layout.path / f"{seg.base_offset:020d}.log").read_bytes()
        body = client.get_object(Bucket=bucket, Key="tier/" + seg.keys["log"])["Body"].read()
        assert body != local and len(body) < len(local)
        head = client.head_object(Bucket=bucket, Key="tier/" + seg.keys["chunks"])
        assert head["Metadata"]["kafka-transform"] == "ledger-offloader-chunked-1"
    assert client.list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []
    expected = [r for r in _expected(layout) if r[0] <= layout.segments[-2][1]]
    tier.indexes._store = counting
    assert _rows(tier.read("secret", 0, from_offset=0)) == expected
    start = layout.segments[0][1] - 40
    counting.reset_counts()
    list(tier.read("secret", 0, from_offset=start, count=1))
    assert counting.calls["get_range"] == 1  # the index and table were cached by the full read
    counting.reset_counts()
    got = [r.offset for r in tier.read("secret", 0, from_offset=start, count=30)]
    assert got == [r[0] for r in expected if r[0] >= start][:30]
    assert counting.calls["get_range"] == 1 and counting.calls["get"] == 0
