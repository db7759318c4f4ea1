"""When to roll the current ledger over: Pulsar's ``ManagedLedgerImpl.currentLedgerIsFull``.

Pulsar's rule (checked against ``ManagedLedgerImpl``)::

    full = entries >= maxEntriesPerLedger or size >= maxSizePerLedgerMb * MiB
           or age_ms >= maximumRolloverTimeMs
    if full and minimumRolloverTimeMs > 0: full = age_ms > minimumRolloverTimeMs   (strict)

The minimum applies to every trigger, the maximum age included. Pulsar also only rolls a
non-empty ledger: the add path checks after adding an entry, and the periodic check
(``rollCurrentLedgerIfFull``) requires ``currentLedgerEntries > 0``; we fold that into
:meth:`RolloverPolicy.should_roll`. Defaults are Pulsar's: 50,000 entries, 2 GiB, 10 min, 240
min. Pulsar jitters the maximum by up to +5 % per ledger to spread rollovers; that is left to
the caller (:meth:`RolloverPolicy.with_jitter`).
"""

from __future__ import annotations

import dataclasses
import random
from dataclasses import dataclass

from offloader.errors import ConfigError

GiB = 1024**3


@dataclass(frozen=True)
class RolloverPolicy:
    max_entries: int = 50_000
    max_size_bytes: int = 2 * GiB
    min_rollover_seconds: float = 600.0
    max_rollover_seconds: float = 14_400.0

    def __post_init__(self) -> None:
        if self.max_entries < 1:
            raise ConfigError(f"max_entries must be at least 1, not {self.max_entries}")
        if self.max_size_bytes < 1:
            raise ConfigError(f"max_size_bytes must be at least 1, not {self.max_size_bytes}")
        if self.min_rollover_seconds < 0:
            raise ConfigError("min_rollover_seconds must not be negative")
        if self.max_rollover_seconds <= 0:
            raise ConfigError("max_rollover_seconds must be positive")
        if self.max_rollover_seconds < self.min_rollover_seconds:
            raise ConfigError("max_rollover_seconds must not be below min_rollover_seconds")

    def should_roll(self, entries: int, size: int, age_seconds: float) -> bool:
        """Whether a ledger of ``entries`` entries, ``size`` bytes, ``age_seconds`` old is full."""
        if entries <= 0:
            return False
        full = (
            entries >= self.max_entries
            or size >= self.max_size_bytes
            or age_seconds >= self.max_rollover_seconds
        )
        if full and self.min_rollover_seconds > 0:
            return age_seconds > self.min_rollover_seconds
        return full

    def with_jitter(self, rng: random.Random | None = None) -> RolloverPolicy:
        """A copy whose maximum age is stretched by a random 0-5 % (Pulsar's spread)."""
        factor = 1 + (rng or random).random() * 0.05
        return dataclasses.replace(self, max_rollover_seconds=self.max_rollover_seconds * factor)
