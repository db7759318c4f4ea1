"""Helpers shared by the lifecycle tests."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from formats.manifest import MANIFEST_ROOT
from offloader.api import BrokerSettings, Offloader
from offloader.config import OffloadSettings

NS = "public/default"
TOPIC = "persistent://public/default/t1"
START_MS = 1_700_000_000_000


class FakeClock:
    """An injectable ``clock_ms``: fixed until advanced."""

    def __init__(self, now_ms: int = START_MS) -> None:
        self.now_ms = now_ms

    def __call__(self) -> int:
        return self.now_ms

    def advance(self, seconds: float) -> None:
        self.now_ms += int(seconds * 1000)


def small_broker(**changes: object) -> BrokerSettings:
    """Tiny ledgers and blocks, no minimum rollover time, no deletion (lag -1)."""
    offload = OffloadSettings(
        max_block_size=1024,
        read_buffer_size=1024,
        enforce_min_block_size=False,
        offload_concurrency=2,
    )
    base = BrokerSettings(
        max_entries_per_ledger=5,
        min_rollover_seconds=0,
        fsync="batch",
        offload=offload,
        default_deletion_lag_ms=-1,
        orphan_min_age_seconds=0,
    )
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def payloads(n: int, size: int = 100, tag: str = "e") -> list[bytes]:
    return [f"{tag}{i:06d}".encode().ljust(size, b"x") for i in range(n)]


def store_keys(off: Offloader) -> list[str]:
    """The store's Pulsar objects (data and index); the bucket manifests are
    :func:`manifest_keys`."""
    return sorted(k for k in all_keys(off) if not k.startswith(MANIFEST_ROOT))


def manifest_keys(off: Offloader) -> list[str]:
    """The completion markers and watermark objects (spec/bucket-manifests.md)."""
    return [k for k in all_keys(off) if k.startswith(MANIFEST_ROOT)]


def all_keys(off: Offloader) -> list[str]:
    return sorted(info.key for info in off.runtime.store.list())


def uploads(off: Offloader) -> list[str]:
    return [u.key for u in off.runtime.store.list_multipart_uploads()]


def local_files(off: Offloader, topic: str = TOPIC) -> list[int]:
    return off.runtime.ledgers.list_ledgers(topic)


def read_all(off: Offloader, topic: str = TOPIC) -> list[tuple[int, int, bytes, str]]:
    return [(e.ledger_id, e.entry_id, e.payload, e.tier) for e in off.read(topic)]


def home_of(off: Offloader) -> Path:
    return off.runtime.home
