"""The ExportMetadataStore Protocol and its record: the per-topic export watermark.

An export (``offloader export run``) copies a topic's messages into Parquet files under a target
(a local directory or ``s3://bucket/prefix``). Per ``(target, topic, generation)`` the store keeps
one :class:`ExportWatermark`: the position ``(ledger_id, entry_id)`` up to which every message is
in a complete file (``(-1, -1)``: nothing yet), the newest publish time exported, the settings
the files were written with, and running totals.

The rules every backend follows (``tests/metadata/test_export_metadata_contract.py``):

* ``advance`` is a compare-and-set on the position the caller read (``expected``; None: no row
  yet), and it never moves the position backwards (:class:`~offloader.errors.InvalidLedgerState`);
  a lost race is :class:`~offloader.errors.OffloadConflict`;
* ``reset`` moves it back only (or keeps it), never forward;
* the store never reads a clock (callers pass ``updated_ms``).

The SQL is in :mod:`offloader.metadata.export_schema` (schema version 6) and
:mod:`offloader.metadata.export`.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

#: the position of a watermark that has exported nothing
NOTHING = (-1, -1)


@dataclass(frozen=True)
class ExportWatermark:
    """Everything up to ``(ledger_id, entry_id)`` (inclusive) of ``topic`` is exported."""

    target: str
    topic: str
    generation: int
    ledger_id: int = -1
    entry_id: int = -1
    #: the newest publish time (epoch ms) of an exported message; None before the first
    publish_time_ms: int | None = None
    #: the export settings the files were written with (JSON text; "" before the first run)
    settings: str = ""
    rows: int = 0
    files: int = 0
    invalid_rows: int = 0
    updated_ms: int = 0

    @property
    def position(self) -> tuple[int, int]:
        return (self.ledger_id, self.entry_id)


@runtime_checkable
class ExportMetadataStore(Protocol):
    """Durable export watermarks (see the module docstring for the rules)."""

    def get_watermark(self, target: str, topic: str, generation: int) -> ExportWatermark | None:
        """The watermark, or None when this export never committed."""
        ...

    def list_watermarks(
        self, target: str | None = None, topic: str | None = None
    ) -> list[ExportWatermark]:
        """Every watermark (of ``target`` / ``topic`` when given), by target, topic,
        generation."""
        ...

    def advance(self, new: ExportWatermark, expected: tuple[int, int] | None) -> ExportWatermark:
        """Store ``new`` if the current position is ``expected`` (None: no row yet) and
        ``new`` is not behind it; returns ``new``."""
        ...

    def reset(self, new: ExportWatermark) -> ExportWatermark:
        """Move the watermark back to ``new`` (at or behind the current one); creates the row
        when there is none."""
        ...

    def close(self) -> None: ...


@runtime_checkable
class SharedExportLocks(Protocol):
    """What a store shared by several homes adds (PostgreSQL): a lock per export that every
    process on the store sees, beside the home's file lock (:mod:`offloader.export.lock`), so
    that a run from one home never removes another home's files before they are committed."""

    def export_lock(
        self, target: str, topic: str, generation: int, *, timeout: float
    ) -> AbstractContextManager[None]:
        """Held for the body; :class:`~offloader.errors.ExportBusy` after ``timeout`` s."""
        ...
