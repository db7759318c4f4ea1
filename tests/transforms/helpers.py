"""Helpers for the transform tests: an Offloader whose namespace has a transform policy."""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping
from typing import Any

from offloader.api import BrokerSettings
from offloader.config import OffloadSettings
from offloader.store.base import GetResult, ObjectStore, RangeReader

NS = "public/default"
TOPIC = "persistent://public/default/secret"
KIB = 1024


def broker(entries_per_ledger: int = 300, **offload: Any) -> BrokerSettings:
    """Ledgers of 300 entries, 256 KiB blocks, 64 KiB chunks (several chunks per block)."""
    settings = OffloadSettings(
        max_block_size=256 * KIB,
        enforce_min_block_size=False,
        offload_concurrency=2,
        transform_chunk_size=64 * KIB,
        **offload,
    )
    return BrokerSettings(
        max_entries_per_ledger=entries_per_ledger,
        min_rollover_seconds=0,
        fsync="never",
        offload=settings,
        default_deletion_lag_ms=-1,
        orphan_min_age_seconds=0,
    )


def json_payloads(n: int, start: int = 0) -> list[bytes]:
    """Compressible, JSON-like entries of ~1 KiB."""
    return [
        json.dumps(
            {"id": i, "user": f"user-{i % 97}", "event": "click", "tags": ["a", "b"] * 40}
        ).encode()
        for i in range(start, start + n)
    ]


def random_payloads(n: int, size: int = 1000) -> list[bytes]:
    return [os.urandom(size) for _ in range(n)]


class CountingStore:
    """A real store, counting the GETs (whole and ranged) of keys not ending in -index."""

    def __init__(self, store: ObjectStore) -> None:
        self._store = store
        self.data_gets = 0
        self.data_bytes = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def get(self, key: str) -> GetResult:
        result = self._store.get(key)
        self._count(key, len(result.data))
        return result

    def get_range(self, key: str, start: int, end: int) -> GetResult:
        result = self._store.get_range(key, start, end)
        self._count(key, len(result.data))
        return result

    def open_range(self, key: str, start: int, end: int) -> RangeReader:
        self._count(key, end - start)
        return self._store.open_range(key, start, end)

    def _count(self, key: str, size: int) -> None:
        if not key.endswith("-index"):
            self.data_gets += 1
            self.data_bytes += size


def replace_object(store: ObjectStore, key: str, data: bytes, metadata: Mapping[str, str]) -> None:
    store.delete(key)
    store.put(key, data, metadata)


def with_offload(b: BrokerSettings, **changes: Any) -> BrokerSettings:
    return dataclasses.replace(b, offload=b.offload.replace(**changes))
