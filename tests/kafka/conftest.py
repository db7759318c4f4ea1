"""Fixtures of the Kafka-tier tests: a log directory (kafka-python batches) and a KafkaTier."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from devservers.endpoint import S3Endpoint
from offloader.api import KafkaSettings, KafkaTier, Offloader, TransformPolicy
from offloader.keyring import KEY_RING_ENV, KeyRing
from offloader.store import open_store
from tests.kafka.logdir import PartitionLayout, write_log_dir, write_partition

#: small parts so that multipart uploads happen on test-sized segments
SMALL = KafkaSettings(part_size=4096, enforce_min_part_size=False, stale_attempt_ms=0)


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000_000

    def __call__(self) -> int:
        return self.now


@pytest.fixture()
def log_dir(tmp_path: Path) -> tuple[Path, dict[tuple[str, int], PartitionLayout]]:
    root = tmp_path / "kafka-logs"
    return root, write_log_dir(root)


@pytest.fixture()
def clock() -> Clock:
    return Clock()


@pytest.fixture()
def make_tier(tmp_path: Path, clock: Clock) -> Iterator[Callable[..., KafkaTier]]:
    """KafkaTiers on ``tmp_path/home`` (a local store unless ``store_url`` says otherwise)."""
    opened: list[Offloader] = []

    def make(
        store_url: str | None = None,
        settings: KafkaSettings = SMALL,
        endpoint_url: str | None = None,
    ) -> KafkaTier:
        off = Offloader.from_settings(
            tmp_path / "home", store_url, endpoint_url=endpoint_url, clock_ms=clock
        )
        opened.append(off)
        return off.kafka(settings)

    yield make
    for off in opened:
        off.close()


@pytest.fixture()
def s3_tier(
    moto_endpoint: S3Endpoint,
    make_tier: Callable[..., KafkaTier],
    monkeypatch: pytest.MonkeyPatch,
) -> KafkaTier:
    for name, value in moto_endpoint.env().items():
        monkeypatch.setenv(name, value)
    bucket = moto_endpoint.new_bucket()
    return make_tier(f"s3://{bucket}/tier", endpoint_url=moto_endpoint.url)


@dataclass(frozen=True)
class TransformedTier:
    """A tier on a moto bucket holding topic ``secret`` (zstd+AES-GCM, 1 KiB chunks) and topic
    ``plain`` (no transform), both uploaded; ``ring`` holds the key, ``url`` the store."""

    tier: KafkaTier
    ring: KeyRing
    url: str
    endpoint: S3Endpoint
    home: Path


@pytest.fixture()
def transformed_moto_tier(
    tmp_path: Path,
    moto_endpoint: S3Endpoint,
    make_tier: Callable[..., KafkaTier],
    monkeypatch: pytest.MonkeyPatch,
) -> TransformedTier:
    root = tmp_path / "logs"
    write_partition(root, "secret", 0, records=900, per_batch=30, codecs=(0,), pad=200)
    write_partition(root, "plain", 0, records=300, per_batch=30, codecs=(0,), pad=200)
    ring = KeyRing(tmp_path / "ring")
    ring.create("k1", activate=True)
    monkeypatch.setenv(KEY_RING_ENV, str(ring.path))
    for name, value in moto_endpoint.env().items():
        monkeypatch.setenv(name, value)
    url = f"s3://{moto_endpoint.new_bucket()}/tier"
    tier = make_tier(
        url,
        settings=KafkaSettings(
            part_size=8192, enforce_min_part_size=False, transform_chunk_size=1024
        ),
        endpoint_url=moto_endpoint.url,
    )
    tier.set_transform("secret", TransformPolicy("zstd", None, "aes-256-gcm", None))
    report = tier.upload(root)
    assert report.ok and len(report.of("uploaded")) >= 4
    return TransformedTier(tier, ring, url, moto_endpoint, tmp_path / "home")


__all__ = ["SMALL", "Clock", "open_store"]
