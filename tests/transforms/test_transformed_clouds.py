"""Transformed (zstd + AES-256-GCM) offloads on Google Cloud Storage (fake-gcs-server) and
Azure Blob Storage (Azurite): offload, read back, one data GET per single-entry read, verify with
checksums, re-key."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from offloader.api import Offloader, Position, TransformPolicy, create_key
from offloader.read.handle import ReadHandle
from tests.cloud_env import cloud_root
from tests.transforms.helpers import (
    NS,
    TOPIC,
    CountingStore,
    broker,
    json_payloads,
    random_payloads,
)


@pytest.fixture(
    params=[
        pytest.param("gcs", marks=pytest.mark.gcs),
        pytest.param("azure", marks=pytest.mark.azure),
    ]
)
def cloud_off(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Offloader]:
    url = cloud_root(request.param, request, monkeypatch) + "/offload"
    monkeypatch.delenv("OFFLOADER_KEY_RING", raising=False)
    off = Offloader.from_settings(tmp_path / "home", url, broker=broker(entries_per_ledger=1500))
    off.create_namespace(NS)
    create_key(off.runtime.home, "k1")
    off.set_offload_transform(NS, TransformPolicy("zstd", None, "aes-256-gcm", None))
    yield off
    off.close()


def test_transformed_offload_read_verify_rekey(cloud_off: Offloader) -> None:
    off = cloud_off
    noise = random_payloads(1500)
    text = json_payloads(200)
    off.produce(TOPIC, noise)
    off.produce(TOPIC, text)
    off.roll_over(TOPIC)
    off.offload_prefix(TOPIC, position=Position(2, 0))
    assert [e.payload for e in off.read(TOPIC, count=1700)] == noise + text
    record = off.runtime.meta.get_ledger(0)
    assert record.offload is not None
    counting = CountingStore(off.runtime.store)
    settings = off.runtime.broker.offload
    for entry in random.Random(3).sample(range(1500), 4):
        before = counting.data_gets
        with ReadHandle.open(counting, 0, record.offload.uuid, settings) as handle:  # type: ignore[arg-type]
            assert handle.read_entry(entry) == noise[entry]
        assert counting.data_gets - before == 1
    assert all(r.ok for r in off.verify(checksums=True))
    create_key(off.runtime.home, "k2", activate=True)
    assert [o.action for o in off.rekey("k2")] == ["rekeyed", "rekeyed"]
    assert all(r.ok for r in off.verify(checksums=True))
    assert [e.payload for e in off.read(TOPIC, start=Position(1, 0), count=200)] == text
