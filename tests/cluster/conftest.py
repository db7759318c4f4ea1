"""Two brokers (two homes) on one PostgreSQL metadata store and one object store."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from offloader.api import BrokerSettings, Offloader

NS = "public/default"
Broker = Callable[[str], Offloader]


def settings() -> BrokerSettings:
    """Small ledgers (5 entries) that roll over at once, so a few produces make several."""
    return BrokerSettings(max_entries_per_ledger=5, min_rollover_seconds=0)


@pytest.fixture
def shared(tmp_path: Path, pg_url: str) -> tuple[str, str]:
    """(metadata URL, store URL) shared by every broker of a test."""
    return pg_url, f"file://{tmp_path / 'objects'}"


@pytest.fixture
def broker(tmp_path: Path, shared: tuple[str, str]) -> Iterator[Broker]:
    """``broker("a")`` opens the Offloader of broker a (home ``<tmp>/a``), closed at teardown."""
    opened: list[Offloader] = []
    metadata, store = shared

    def _open(name: str) -> Offloader:
        off = Offloader.from_settings(
            tmp_path / name, store, metadata_url=metadata, broker=settings()
        )
        opened.append(off)
        return off

    yield _open
    for off in opened:
        off.close()
