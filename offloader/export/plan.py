"""What an export run reads and what its tasks report: driver-side values, no I/O.

:func:`topic_plan` turns a topic's ledger list and its watermark into the range the run
exports: every entry after the watermark up to the last entry of the last *closed* ledger (the
open ledger is never exported, so the watermark never passes the last closed ledger).
:class:`RangeTask` is one source task (an offloaded block or a chunk of a local ledger) with the
range its rows must fall in, and the ledgers it reads on into to finish a chunked message it
begins; :class:`WrittenFile` is what a task reports for each file it wrote, :class:`Held` a
chunked message it began that cannot be completed yet; :func:`hold_back` stops each topic's
plan (its watermark) before its first held message.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

from offloader.export.naming import ExportFile
from offloader.metadata.base import LedgerRecord

__all__ = [
    "ExportRunner",
    "Held",
    "Present",
    "RangeTask",
    "TopicPlan",
    "WrittenFile",
    "before",
    "hold_back",
    "topic_plan",
]

Position = tuple[int, int]


def before(position: Position) -> Position:
    """The position just before ``position`` (``(L, -1)``: nothing of ledger L)."""
    return (position[0], position[1] - 1)


#: a file that is there, as a repair sees it: (partition value, first, last entry) of its ledger
Present = tuple[str, int, int]


@dataclass(frozen=True)
class TopicPlan:
    """Export ``topic``'s entries in ``(start, end]``; nothing when ``end <= start``.

    A repair (``present`` not None: the committed files still there, below the watermark)
    writes only the rows no present file holds (files deleted from the target), reading only
    the tasks that meet ``ranges`` (inclusive position ranges; empty: all of ``(start, end]``).
    """

    topic: str
    start: Position
    end: Position
    ledger_ids: tuple[int, ...]
    present: tuple[ExportFile, ...] | None = None
    ranges: tuple[tuple[Position, Position], ...] = ()

    @property
    def empty(self) -> bool:
        """No entry of the listed ledgers can be in ``(start, end]``."""
        return not any(self.contains(lid, 0, 1 << 62) for lid in self.ledger_ids)

    def clipped(self, end: Position) -> TopicPlan:
        """The plan cut at ``end`` (``--until``)."""
        end = min(self.end, end)
        ids = tuple(i for i in self.ledger_ids if i <= end[0])
        return replace(self, end=max(end, self.start), ledger_ids=ids)

    def contains(self, ledger_id: int, first: int, last: int) -> bool:
        """Can entries ``first..last`` of ``ledger_id`` hold a row of the plan?"""
        inside = (
            self.start < self.end
            and (ledger_id, last) > self.start
            and (ledger_id, first) <= self.end
        )
        if not inside or not self.ranges:
            return inside
        return any(a <= (ledger_id, last) and (ledger_id, first) <= b for a, b in self.ranges)

    def present_of(self, ledger_id: int) -> tuple[Present, ...] | None:
        """What a repair's task of ``ledger_id`` must not write again (None: not a repair)."""
        if self.present is None:
            return None
        return tuple(
            (f.value, f.first_entry, f.last_entry) for f in self.present if f.ledger_id == ledger_id
        )


def topic_plan(
    topic: str, ledgers: Sequence[LedgerRecord], start: Position, *, offloaded_only: bool = False
) -> TopicPlan:
    """``(start, last closed entry]``. ``offloaded_only`` (a topic another broker owns, on a
    shared store: its ledgers that are not offloaded are on the owner's disk): up to the first
    closed ledger that is not completely offloaded, so the watermark never passes messages this
    home cannot read."""
    closed = [
        r
        for r in ledgers
        if r.state == "CLOSED" and r.entries > 0 and (r.ledger_id, r.entries - 1) > start
    ]
    if offloaded_only:
        local = [i for i, r in enumerate(closed) if r.offload is None or not r.offload.complete]
        closed = closed[: local[0]] if local else closed
    if not closed:
        return TopicPlan(topic, start, start, ())
    last = closed[-1]
    return TopicPlan(
        topic, start, (last.ledger_id, last.entries - 1), tuple(r.ledger_id for r in closed)
    )


@dataclass(frozen=True)
class RangeTask:
    """One source task (``task``: a :mod:`offloader.spark.plan` descriptor, or a Kafka
    segment partition) and the range ``(start, end]`` its rows must fall in. ``topic`` is the
    watermark's key; ``directory_topic`` the topic its files are under (Kafka: the topic of
    the ``kafka:<topic>:<partition>`` key); ``ledger_id`` the first half of its positions.

    ``following``: the topic's next ledgers (source tasks) the task reads on into to finish a
    chunked message whose first chunk it holds (:func:`offloader.spark.message_chunks.
    following_ledgers`, as the ``pulsar-messages`` source gives them); ``chunks_wait``: they
    reach the run's last closed ledger, so a message still incomplete after them may finish
    in a ledger not closed yet (the task reports it :class:`Held`, not dropped).
    ``present``: a repair's task writes only rows no file of ``present`` holds (each file holds
    every row of its partition value in its range), cut as a run cuts them from the first row
    after a present file, so a deleted file comes back with its name and bytes."""

    task: Any
    topic: str
    start: Position
    end: Position
    ledger_id: int = -1
    directory_topic: str | None = None
    following: tuple[Any, ...] = ()
    chunks_wait: bool = False
    #: a repair's task (:meth:`TopicPlan.present_of`): the files of its ledger that are there
    present: tuple[Present, ...] | None = None

    @property
    def dir_topic(self) -> str:
        return self.directory_topic or self.topic


@dataclass(frozen=True)
class WrittenFile:
    """A complete file a task wrote (its name is ``path``, relative to the target root).

    ``footer``: the file's Parquet footer as pyarrow wrote it (a ``_metadata`` file's bytes:
    ``pyarrow.parquet.read_metadata`` reads it), from which an Iceberg commit builds the
    file's ``DataFile`` without reading the file back (empty: not known, the file is read)."""

    topic: str
    path: str
    ledger_id: int
    first_entry: int
    last_entry: int
    rows: int
    invalid_rows: int
    size: int
    max_publish_ms: int | None
    footer: bytes = b""


@dataclass(frozen=True)
class Held:
    """A chunked message whose first chunk is at ``(ledger_id, entry_id)``, in the task's
    range, and whose last chunk is not in a closed ledger yet: the watermark stops before it
    (the next run, once its ledger is closed, exports it)."""

    topic: str
    ledger_id: int
    entry_id: int

    @property
    def position(self) -> Position:
        return (self.ledger_id, self.entry_id)


def hold_back(
    plans: Sequence[TopicPlan], results: Sequence[WrittenFile | Held]
) -> tuple[list[TopicPlan], list[WrittenFile], list[WrittenFile]]:
    """What a run commits: each plan cut just before the first message it holds back, the
    files up to that (the tasks write no row at or after their own held message), and the
    files of other tasks wholly past it (complete, but past the watermark: removed by the run,
    written again with the same names and bytes by the next)."""
    held: dict[str, Position] = {}
    for r in results:
        if isinstance(r, Held):
            held[r.topic] = min(held.get(r.topic, r.position), r.position)
    out = [p.clipped(before(held[p.topic])) if p.topic in held else p for p in plans]
    ends = {p.topic: p.end for p in out}
    kept: list[WrittenFile] = []
    past: list[WrittenFile] = []
    for f in results:
        if isinstance(f, WrittenFile):
            late = f.topic in held and (f.ledger_id, f.last_entry) > ends[f.topic]
            (past if late else kept).append(f)
    return out, kept, past


class ExportRunner(Protocol):
    """The engine that reads and writes (Spark: :class:`offloader.spark.export_job.SparkRunner`)."""

    def first_at_or_after(self, plans: Sequence[TopicPlan], until_ms: int) -> dict[str, Position]:
        """Per topic, the first position in its plan whose message was published at or after
        ``until_ms`` (topics with none are absent)."""
        ...

    def write(self, plans: Sequence[TopicPlan]) -> Sequence[WrittenFile | Held]:
        """Write every row of the plans; return the files (all complete when it returns) and
        the chunked messages held back (:func:`hold_back`)."""
        ...
