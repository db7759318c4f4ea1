"""Pulsar's rollover rule (ManagedLedgerImpl.currentLedgerIsFull) as a table."""

from __future__ import annotations

import random

import pytest

from offloader.errors import ConfigError
from offloader.ledgers import RolloverPolicy

GiB = 1024**3
DEFAULT = RolloverPolicy()
NO_MIN = RolloverPolicy(min_rollover_seconds=0)
SMALL = RolloverPolicy(
    max_entries=10, max_size_bytes=1000, min_rollover_seconds=0, max_rollover_seconds=60
)


@pytest.mark.parametrize(
    ("policy", "entries", "size", "age", "roll"),
    [
        (DEFAULT, 0, 0, 0, False),
        (DEFAULT, 0, 0, 10**6, False),  # never roll an empty ledger
        (DEFAULT, 1, 1, 0, False),
        (DEFAULT, 49_999, 2 * GiB - 1, 14_399, False),
        (DEFAULT, 50_000, 0, 600, False),  # full, but min age is strict (> 600 s)
        (DEFAULT, 50_000, 0, 600.001, True),
        (DEFAULT, 50_000, 0, 599, False),
        (DEFAULT, 1, 2 * GiB, 601, True),
        (DEFAULT, 1, 2 * GiB, 10, False),
        (DEFAULT, 1, 10, 14_399.9, False),
        (DEFAULT, 1, 10, 14_400, True),  # max age reached
        (NO_MIN, 50_000, 0, 0, True),
        (NO_MIN, 1, 2 * GiB, 0, True),
        (NO_MIN, 49_999, 0, 0, False),
        (SMALL, 10, 0, 0, True),
        (SMALL, 9, 999, 59, False),
        (SMALL, 9, 1000, 0, True),
        (SMALL, 1, 0, 60, True),
        (SMALL, 0, 0, 60, False),
        (RolloverPolicy(min_rollover_seconds=30, max_rollover_seconds=30), 1, 0, 30, False),
        (RolloverPolicy(min_rollover_seconds=30, max_rollover_seconds=30), 1, 0, 31, True),
    ],
)
def test_rule(policy: RolloverPolicy, entries: int, size: int, age: float, roll: bool) -> None:
    assert policy.should_roll(entries, size, age) is roll


def test_defaults_are_pulsars() -> None:
    assert (DEFAULT.max_entries, DEFAULT.max_size_bytes) == (50_000, 2 * GiB)
    assert (DEFAULT.min_rollover_seconds, DEFAULT.max_rollover_seconds) == (600, 14_400)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"max_entries": 0},
        {"max_size_bytes": 0},
        {"min_rollover_seconds": -1},
        {"max_rollover_seconds": 0},
        {"min_rollover_seconds": 100, "max_rollover_seconds": 50},
    ],
)
def test_invalid(kwargs: dict[str, float]) -> None:
    with pytest.raises(ConfigError):
        RolloverPolicy(**kwargs)  # type: ignore[arg-type]


def test_jitter_within_five_percent() -> None:
    rng = random.Random(1)
    for _ in range(100):
        jittered = DEFAULT.with_jitter(rng).max_rollover_seconds
        assert 14_400 <= jittered < 14_400 * 1.05
