"""Transformed objects on real HTTP S3 servers (moto, and Ceph RGW when it can run here):
256 KiB blocks joined into parts of at least 5 MiB (RGW enforces S3's minimum), reads with one
data GET per single entry, verification with checksums, re-keying."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from devservers.endpoint import S3Endpoint
from offloader.api import Offloader, Position, TransformPolicy, create_key
from offloader.read.handle import ReadHandle
from tests.transforms.helpers import (
    NS,
    TOPIC,
    CountingStore,
    broker,
    json_payloads,
    random_payloads,
)

pytestmark = pytest.mark.s3


@pytest.fixture()
def s3_off(
    tmp_path: Path, s3_endpoint: S3Endpoint, s3_bucket: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Offloader]:
    for name, value in s3_endpoint.env().items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("OFFLOADER_KEY_RING", raising=False)
    off = Offloader.from_settings(
        tmp_path / "home",
        f"s3://{s3_bucket}/offload",
        endpoint_url=s3_endpoint.url,
        region=s3_endpoint.region,
        broker=broker(entries_per_ledger=6000),
    )
    off.create_namespace(NS)
    create_key(off.runtime.home, "k1")
    off.set_offload_transform(NS, TransformPolicy("zstd", None, "aes-256-gcm", None))
    yield off
    off.close()


def test_transformed_offload_read_verify_rekey_on_s3(s3_off: Offloader) -> None:
    off = s3_off
    # ledger 0: 6000 incompressible entries (~6 MiB stored: two parts); ledger 1: JSON
    noise = random_payloads(6000)
    text = json_payloads(300)
    off.produce(TOPIC, noise)
    off.produce(TOPIC, text)
    off.roll_over(TOPIC)
    off.offload_prefix(TOPIC, position=Position(2, 0))
    assert [e.payload for e in off.read(TOPIC, count=6300)] == noise + text
    record = off.runtime.meta.get_ledger(0)
    assert record.offload is not None
    assert (record.offload.data_size or 0) > 5 * 1024 * 1024  # more than one part
    counting = CountingStore(off.runtime.store)
    settings = off.runtime.broker.offload
    for entry in random.Random(3).sample(range(6000), 6):
        before = counting.data_gets
        with ReadHandle.open(counting, 0, record.offload.uuid, settings) as handle:  # type: ignore[arg-type]
            assert handle.read_entry(entry) == noise[entry]
        assert counting.data_gets - before == 1
    assert all(r.ok for r in off.verify(checksums=True))
    create_key(off.runtime.home, "k2", activate=True)
    assert [o.action for o in off.rekey("k2")] == ["rekeyed", "rekeyed"]
    assert all(r.ok for r in off.verify(checksums=True))
    assert [e.payload for e in off.read(TOPIC, start=Position(1, 0), count=300)] == text
