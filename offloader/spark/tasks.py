"""Executor side of Spark reads: each task reads its block (or local ledger) into records.

The driver's plan (:mod:`offloader.spark.plan`) hands every Spark task one picklable
descriptor. :func:`read_task` runs in the executor: it takes this process's cached store client
(:func:`executor_store`, created from the descriptor's :class:`~offloader.spark.plan.StoreSpec`
and the ``AWS_*`` environment, never from pickled credentials), fetches the block with one
streamed ranged GET read ``read_buffer_size`` bytes at a time on the task's own thread into
one of the worker's reused block buffers, checks its CRC32C when the index extension records
one, and yields ``(topic, ledger_id, entry_id, payload)``. A ledger still on local disk is
read through the local ledger store instead. Corrupt data raises the typed error, never a
short result.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator

from formats.block import PackedEntries
from offloader.logs import get_logger
from offloader.read.objects import read_block, read_block_packed
from offloader.read.transformed import section_view
from offloader.spark.buffers import BLOCK_BUFFERS
from offloader.spark.entry_filter import EntryFilter
from offloader.spark.plan import (
    BlockTask,
    LocalLedgerTask,
    Record,
    StoreSpec,
    Task,
    aws_environment,
)
from offloader.store.base import GetResult, ObjectStore, RangeReader

__all__ = [
    "CLIENT_CACHE_SIZE",
    "CountingStore",
    "executor_store",
    "iter_task_entries",
    "read_local_task",
    "read_packed_block",
    "read_task",
]

log = get_logger(__name__)

#: store clients an executor process keeps (one per store and credentials), reused by its tasks
CLIENT_CACHE_SIZE = 8
_clients: OrderedDict[tuple[StoreSpec, tuple[tuple[str, str], ...]], ObjectStore] = OrderedDict()
_clients_lock = threading.Lock()


def executor_store(spec: StoreSpec) -> ObjectStore:
    """This process's client for ``spec`` (created on first use; creating a boto3 client costs
    ~70 ms, more than reading a small block). Keyed by the current ``AWS_*`` environment too,
    so changed credentials get a new client. Never pickled: descriptors hold only ``spec``."""
    key = (spec, tuple(sorted(aws_environment().items())))
    with _clients_lock:
        store = _clients.get(key)
        if store is not None:
            _clients.move_to_end(key)
            return store
    store = spec.open()
    with _clients_lock:
        _clients[key] = store
        while len(_clients) > CLIENT_CACHE_SIZE:
            _clients.popitem(last=False)[1].close()
    return store


class CountingStore:
    """Delegates to a store and counts its GET requests (whole, ranged and streamed ranges);
    for tests and benchmarks."""

    def __init__(self, store: ObjectStore) -> None:
        self._store = store
        self.gets = 0

    def get(self, key: str) -> GetResult:
        self.gets += 1
        return self._store.get(key)

    def get_range(self, key: str, start: int, end: int) -> GetResult:
        self.gets += 1
        return self._store.get_range(key, start, end)

    def open_range(self, key: str, start: int, end: int) -> RangeReader:
        self.gets += 1
        return self._store.open_range(key, start, end)

    def close(self) -> None:
        """The wrapped store stays open (it may be a cached executor client)."""


def task_store(task: BlockTask, store: ObjectStore) -> ObjectStore:
    """``store``, or for a transformed ledger the view that reads it in original bytes."""
    if task.transform is None:
        return store
    settings = task.store.settings
    return section_view(
        store,
        task.transform,
        task.ref.ledger_id,
        task.ref.uuid,
        key_ring=settings.key_ring,
        cache_bytes=settings.chunk_cache_bytes,
    )


def read_packed_block(task: BlockTask) -> PackedEntries:
    """The task's block fetched whole and packed (:func:`~offloader.read.objects.read_block_packed`:
    one streamed GET read on this thread, CRC32C summed as it arrives; no read-ahead thread,
    whose hand-overs cost CPU a task cannot use) into a buffer of this worker's, reused for a
    later block once every view of it is gone (:data:`~offloader.spark.buffers.BLOCK_BUFFERS`:
    a fresh 64 MiB buffer would cost the task ~16,000 page faults)."""
    store = CountingStore(executor_store(task.store))
    try:
        return read_block_packed(
            task_store(task, store),  # type: ignore[arg-type]
            task.ref,
            read_buffer=task.store.settings.read_buffer_size,
            out=BLOCK_BUFFERS.take(task.ref.end - task.ref.start),
            prefetch=False,  # a task has nothing else to do while its bytes arrive
        )
    finally:
        store.close()  # leaves the cached client open


def iter_task_entries(
    task: BlockTask, store: ObjectStore, entry_filter: EntryFilter | None = None
) -> Iterator[tuple[int, memoryview]]:
    """``(entry_id, payload view)`` of the block's entries that pass ``entry_filter``."""
    flt = entry_filter if entry_filter is not None and entry_filter.filters_entries else None
    ref = task.ref
    # the block lands in a buffer of this worker's, reused for a later block once the caller
    # has dropped every payload view (a fresh 64 MiB buffer costs ~16,000 page faults)
    entries = read_block(
        store,
        ref,
        read_buffer=task.store.settings.read_buffer_size,
        out=BLOCK_BUFFERS.take(ref.end - ref.start),
        prefetch=False,  # a task has nothing else to do while its bytes arrive
    )
    for entry in entries:
        if flt is None or flt.keeps_entry(entry.entry_id):
            yield entry.entry_id, entry.payload


def read_local_task(
    task: LocalLedgerTask, entry_filter: EntryFilter | None = None
) -> Iterator[Record]:
    """Entries of a ledger still in the local ledger store (CRC-checked by its reader); the
    open ledger's read-only (:func:`read_open_entries`)."""
    from offloader.ledgers import LedgerStore

    flt = entry_filter if entry_filter is not None and entry_filter.filters_entries else None
    step = max(1, task.batch_entries)
    if task.open:
        for entry_id, payload in read_open_entries(task, step):
            if flt is None or flt.keeps_entry(entry_id):
                yield (task.topic, task.ledger_id, entry_id, payload)
        return
    with LedgerStore(task.home).open_reader(task.topic, task.ledger_id) as reader:
        for first in range(task.first_entry_id, task.last_entry_id + 1, step):
            last = min(first + step - 1, task.last_entry_id)
            for entry_id, payload in enumerate(reader.read(first, last), first):
                if flt is None or flt.keeps_entry(entry_id):
                    yield (task.topic, task.ledger_id, entry_id, payload)


def read_open_entries(task: LocalLedgerTask, step: int = 1000) -> Iterator[tuple[int, bytes]]:
    """Entries ``first..last`` of the open ledger's file, read-only as ``topics read`` reads
    it (no lock, nothing changed; a producer may be appending): its records are scanned, each
    CRC32C checked, up to ``last`` only (entries added after the plan are not read). A ledger
    closed meanwhile is read through its close footer. When the file holds fewer records than
    the plan counted (a producer whose writes the OS has not seen yet: the ``never`` fsync
    policy buffers them), what it holds is read, with a warning saying how many were not."""
    from offloader.errors import LedgerNotFound
    from offloader.ledgers import LedgerStore
    from offloader.ledgers.reader import read_entries
    from offloader.ledgers.scan import read_closed, scan

    path = str(LedgerStore(task.home).ledger_path(task.topic, task.ledger_id))
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        raise LedgerNotFound(
            f"open ledger {task.ledger_id} of {task.topic}: its file {path} is gone "
            "(closed, offloaded and deleted since the plan was made? run the query again)"
        ) from None
    try:
        layout = read_closed(fd, path) or scan(fd, path, limit=task.last_entry_id + 1)
        end = min(task.last_entry_id, len(layout.offsets) - 1)
        if end < task.last_entry_id:
            log.warning(
                "open ledger: entries the metadata counted are not in its file yet, not read",
                topic=task.topic,
                ledger_id=task.ledger_id,
                entries=task.last_entry_id - max(end, task.first_entry_id - 1),
                path=path,
            )
        for first in range(task.first_entry_id, end + 1, step):
            last = min(first + step - 1, end)
            got = read_entries(fd, path, layout.offsets, layout.data_end, first, last)
            yield from enumerate(got, first)
    finally:
        os.close(fd)


def read_task(
    task: Task,
    entry_filter: EntryFilter | None = None,
    *,
    on_gets: Callable[[int], None] | None = None,
) -> Iterator[Record]:
    """Read one block in an executor: its own client, ranged GETs, CRC32C check, records.

    ``on_gets`` is called with the number of GETs issued once the block has been read.
    Corrupt data raises the typed error (``ChecksumMismatchError`` ...), never a short result.
    """
    if isinstance(task, LocalLedgerTask):
        yield from read_local_task(task, entry_filter)
        return
    counting = CountingStore(executor_store(task.store))
    try:
        ledger_id, topic = task.ref.ledger_id, task.topic
        store = task_store(task, counting)  # type: ignore[arg-type]
        for entry_id, payload in iter_task_entries(task, store, entry_filter):
            yield (topic, ledger_id, entry_id, bytes(payload))
    finally:
        if on_gets is not None:
            on_gets(counting.gets)
