"""Fixtures of the Kafka-tier tests: a log directory (kafka-python batches) and a KafkaTier."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from offloader.api import KafkaSettings, KafkaTier, Offloader
from offloader.store import open_store
from tests.kafka.logdir import PartitionLayout, write_log_dir
from tests.servers.endpoint import S3Endpoint

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


__all__ = ["SMALL", "Clock", "open_store"]
