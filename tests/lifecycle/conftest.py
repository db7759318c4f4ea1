"""Fixtures of the lifecycle tests: an Offloader on a temporary home with a fake clock."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from offloader.api import BrokerSettings, Offloader
from offloader.config import OffloadSettings
from tests.lifecycle.helpers import NS, FakeClock, small_broker


@pytest.fixture()
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture()
def make_offloader(tmp_path: Path, clock: FakeClock) -> Iterator[Callable[..., Offloader]]:
    """Build Offloaders on ``tmp_path/home`` (several may share it, like processes)."""
    opened: list[Offloader] = []

    def make(
        *, broker: BrokerSettings | None = None, store_url: str | None = None, **kwargs: object
    ) -> Offloader:
        off = Offloader.from_settings(
            tmp_path / "home",
            store_url,
            broker=broker or small_broker(),
            clock_ms=clock,
            **kwargs,  # type: ignore[arg-type]
        )
        opened.append(off)
        return off

    yield make
    for off in opened:
        off.close()


@pytest.fixture()
def off(make_offloader: Callable[..., Offloader]) -> Offloader:
    """An Offloader with namespace public/default created (max 5 entries per ledger)."""
    o = make_offloader()
    o.create_namespace(NS)
    return o


__all__ = ["OffloadSettings"]
