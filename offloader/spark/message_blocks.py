"""A block task's entries for the ``pulsar-messages`` reader, most of them staged by C.

:func:`block_records` fetches a task's block whole and packed (one streamed GET on the task's
thread into one of the worker's reused block buffers, length and CRC32C checked, the payloads
as one Arrow-style binary column: :func:`offloader.read.objects.read_block_packed`, as the
``offloaded-ledger`` source reads) and hands runs of its entries to
:meth:`~offloader.spark.message_columns.MessageColumns.add_packed`: one C call per run checks
each entry's CRC32C, decodes its MessageMetadata and splits its batch straight into the column
buffers, with no Python object per entry or message. What it yields is what the reader's
per-entry loop still does: ``None`` when the staged rows make an Arrow batch (flush them), or
``(ledger_id, entry_id, payload)`` for an entry the C walk left aside (compressed, encrypted,
chunked, a marker, a single message, malformed: the per-entry path decodes it or raises the
typed error). Entries the task's entry filter drops are skipped in runs. Local ledgers (no
block) and builds without the C extension go entry by entry through
:func:`offloader.spark.tasks.read_task`, with the same rows.
"""

from __future__ import annotations

from collections.abc import Iterator

from formats.block import PackedEntries
from offloader.spark.entry_filter import EntryFilter
from offloader.spark.message_columns import MessageColumns
from offloader.spark.plan import BlockTask, Task
from offloader.spark.tasks import read_packed_block, read_task

__all__ = ["EntryRecord", "block_records", "kept_runs", "packed_records"]

#: an entry left to the per-entry path: ``(ledger_id, entry_id, payload)``
EntryRecord = tuple[int, int, bytes]


def block_records(
    task: Task, entry_filter: EntryFilter | None, rows: MessageColumns
) -> Iterator[EntryRecord | None]:
    """The task's entries: staged into ``rows`` in C where it can, else yielded (see the
    module's docstring); ``None``: ``rows`` is :attr:`~MessageColumns.full`, flush it."""
    if not isinstance(task, BlockTask) or not rows.takes_packed:
        for _topic, ledger_id, entry_id, payload in read_task(task, entry_filter):
            yield ledger_id, entry_id, payload
        return
    yield from packed_records(read_packed_block(task), task.ref.ledger_id, entry_filter, rows)


def packed_records(
    packed: PackedEntries,
    ledger_id: int,
    entry_filter: EntryFilter | None,
    rows: MessageColumns,
) -> Iterator[EntryRecord | None]:
    """:func:`block_records` for a block already packed (in memory; no I/O)."""
    first = packed.first_entry_id
    ends = packed.offsets_view()
    for start, stop in kept_runs(first, packed.count, entry_filter):
        i = start
        while i < stop:
            i = rows.add_packed(packed.data, packed.offsets, i, stop, first, ledger_id)
            if rows.full:
                yield None
            elif i < stop:  # left aside: the per-entry path
                yield ledger_id, first + i, bytes(packed.data[ends[i] : ends[i + 1]])
                i += 1


def kept_runs(
    first_entry_id: int, count: int, entry_filter: EntryFilter | None
) -> list[tuple[int, int]]:
    """The index ranges ``[start, stop)`` of the ``count`` entries from ``first_entry_id`` on
    that ``entry_filter`` keeps: runs of consecutive kept entries (one run without a filter)."""
    if entry_filter is None or not entry_filter.filters_entries:
        return [(0, count)] if count else []
    keep = [i for i in range(count) if entry_filter.keeps_entry(first_entry_id + i)]
    runs: list[tuple[int, int]] = []
    for i in keep:
        if runs and runs[-1][1] == i:
            runs[-1] = (runs[-1][0], i + 1)
        else:
            runs.append((i, i + 1))
    return runs
