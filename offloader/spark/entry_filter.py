"""EntryFilter: the pruning logic of Spark reads, shared by the RDD reader and the DataFrame source.

A filter is a conjunction of ``=``/``>``/``>=``/``<``/``<=``/``IN`` comparisons on ``ledger_id``
and ``entry_id`` (Spark's pushed-down filters, or the RDD reader's ``ledger_ids`` and
``entry_range`` options). A block is read only when some entry in it can match
(:meth:`EntryFilter.keeps_block`); within a block, :meth:`EntryFilter.keeps_entry` drops the
entries that cannot. Comparisons with NULL match nothing; non-integral literals are rounded
the way the comparison implies (``> 1.5`` means ``>= 2``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, TypeVar

from offloader.errors import ConfigError

__all__ = ["COLUMNS", "OPS", "BlockBounds", "EntryFilter"]


class BlockBounds(Protocol):
    """What pruning needs to know of a block (or of a whole local ledger)."""

    @property
    def ledger_id(self) -> int: ...

    @property
    def first_entry_id(self) -> int: ...

    @property
    def last_entry_id(self) -> int: ...


TaskT = TypeVar("TaskT", bound=BlockBounds)

COLUMNS = ("ledger_id", "entry_id")
OPS = ("=", ">", ">=", "<", "<=", "in")


@dataclass(frozen=True)
class _Range:
    """Integers ``lo..hi`` (inclusive) intersected with an optional finite set."""

    lo: int | None = None
    hi: int | None = None
    values: frozenset[int] | None = None

    def constrain(self, op: str, value: Any) -> _Range:
        if op == "in":
            ints = frozenset(int(v) for v in value if v is not None and v == math.floor(v))
            return replace(self, values=ints if self.values is None else self.values & ints)
        if value is None:  # comparisons with NULL match nothing
            return replace(self, values=frozenset())
        # non-integral literals: > 1.5 means >= 2, < 1.5 means <= 1
        if op == "=":
            return self.constrain("in", [value])
        if op in (">", ">="):
            lo = math.floor(value) + 1 if op == ">" else math.ceil(value)
            return replace(self, lo=lo if self.lo is None else max(self.lo, lo))
        hi = math.ceil(value) - 1 if op == "<" else math.floor(value)
        return replace(self, hi=hi if self.hi is None else min(self.hi, hi))

    def overlaps(self, first: int, last: int) -> bool:
        lo = first if self.lo is None else max(first, self.lo)
        hi = last if self.hi is None else min(last, self.hi)
        if lo > hi:
            return False
        return self.values is None or any(lo <= v <= hi for v in self.values)

    def matches(self, value: int) -> bool:
        return self.overlaps(value, value)


@dataclass(frozen=True)
class EntryFilter:
    """A conjunction of comparisons on ``ledger_id`` and ``entry_id`` (empty: everything)."""

    ledger: _Range = field(default_factory=_Range)
    entry: _Range = field(default_factory=_Range)

    @property
    def is_empty(self) -> bool:
        return self == EntryFilter()

    def and_(self, column: str, op: str, value: Any) -> EntryFilter:
        """This filter AND ``column op value`` (``op`` one of :data:`OPS`)."""
        if column not in COLUMNS or op not in OPS:
            raise ConfigError(f"cannot filter on {column} {op} {value!r}")
        if column == "ledger_id":
            return replace(self, ledger=self.ledger.constrain(op, value))
        return replace(self, entry=self.entry.constrain(op, value))

    def keeps_block(self, task: BlockBounds) -> bool:
        """True when some entry of the block can match (otherwise it is never fetched)."""
        return self.ledger.matches(task.ledger_id) and self.entry.overlaps(
            task.first_entry_id, task.last_entry_id
        )

    def keeps_entry(self, entry_id: int) -> bool:
        return self.entry.matches(entry_id)

    @property
    def filters_entries(self) -> bool:
        return self.entry != _Range()

    def prune(self, tasks: Iterable[TaskT]) -> list[TaskT]:
        return [t for t in tasks if self.keeps_block(t)]

    @classmethod
    def from_options(
        cls, ledger_ids: Iterable[int] | None = None, entry_range: tuple[int, int] | None = None
    ) -> EntryFilter:
        """``ledger_id IN ledger_ids AND entry_id BETWEEN first AND last``."""
        f = cls()
        if ledger_ids is not None:
            f = f.and_("ledger_id", "in", list(ledger_ids))
        if entry_range is not None:
            f = f.and_("entry_id", ">=", entry_range[0]).and_("entry_id", "<=", entry_range[1])
        return f
