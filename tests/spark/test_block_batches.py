"""The DataFrame source's block reader without Spark: one streamed fetch per block, packed into
Arrow batches of at most ``batch_rows`` rows, filtered exactly, corruption refused whole."""

from __future__ import annotations

import gc
import random
from itertools import accumulate
from pathlib import Path

import pytest

from formats.errors import ChecksumMismatchError
from offloader.config import OffloadSettings
from offloader.ledgers import LedgerStore
from offloader.ledgers.base import InMemoryLedger
from offloader.offload.writer import offload_ledger
from offloader.read.objects import block_refs, load_index
from offloader.spark.buffers import BLOCK_BUFFERS
from offloader.spark.entry_filter import EntryFilter
from offloader.spark.plan import BlockTask, LocalLedgerTask, StoreSpec
from offloader.spark.source import (
    OffloadedLedgerReader,
    TaskPartition,
    batch_bounds,
    read_block_batches,
)
from offloader.spark.tasks import read_task
from offloader.store.local import LocalObjectStore

UUID = "6f1c2a3b-0000-4000-8000-000000000002"


def _tasks(tmp_path: Path) -> tuple[list[BlockTask], list[bytes], LocalObjectStore]:
    rng = random.Random(8)
    payloads = [rng.randbytes(rng.choice([0, 1, 50, 300])) for _ in range(700)]
    store = LocalObjectStore(tmp_path)
    settings = OffloadSettings(max_block_size=16 * 1024, enforce_min_block_size=False)
    offload_ledger(InMemoryLedger(5, payloads), store, UUID, settings)
    spec = StoreSpec(f"file://{tmp_path}", settings=settings.replace(read_buffer_size=1024))
    refs = block_refs(load_index(store, 5, UUID), 5, UUID)
    return [BlockTask(spec, ref, "persistent://t/n/x") for ref in refs], payloads, store


def _rows(
    tasks: list[BlockTask], flt: EntryFilter | None, batch_rows: int, batch_bytes: int = 1 << 30
) -> list[tuple]:
    rows = []
    for task in tasks:
        for batch in read_block_batches(task, flt, batch_rows, batch_bytes):
            assert 0 < batch.num_rows <= batch_rows
            size = sum(len(p) for p in batch.column(3).to_pylist())
            assert size <= batch_bytes or batch.num_rows == 1
            rows += list(zip(*(batch.column(i).to_pylist() for i in range(4)), strict=True))
    return rows


def test_every_entry_in_small_batches(tmp_path: Path) -> None:
    tasks, payloads, _ = _tasks(tmp_path)
    assert len(tasks) > 3
    rows = _rows(tasks, None, batch_rows=7)
    assert rows == [("persistent://t/n/x", 5, i, p) for i, p in enumerate(payloads)]


def test_batches_are_bounded_by_payload_bytes_too(tmp_path: Path) -> None:
    tasks, payloads, _ = _tasks(tmp_path)
    for limit in (1, 299, 300, 1000):
        rows = _rows(tasks, None, batch_rows=8192, batch_bytes=limit)
        assert rows == [("persistent://t/n/x", 5, i, p) for i, p in enumerate(payloads)]
    flt = EntryFilter.from_options(entry_range=(10, 600))
    rows = _rows(tasks, flt, batch_rows=8192, batch_bytes=500)
    assert [r[3] for r in rows] == payloads[10:601]


@pytest.mark.parametrize("limit", [0, 1, 2, 3, 50, 1000])
def test_batch_bounds_are_greedy_and_cover_every_row(limit: int) -> None:
    rng = random.Random(limit)
    sizes = [rng.choice([0, 0, 1, 7, 60, 400]) for _ in range(300)]
    ends = [0, *accumulate(sizes)]
    for max_rows in (1, 3, 1000):
        bounds = list(batch_bounds(ends, max_rows, limit))
        assert [a for a, _ in bounds] == [0, *(b for _, b in bounds[:-1])]
        assert bounds[-1][1] == len(sizes)
        for at, stop in bounds:
            rows, size = stop - at, ends[stop] - ends[at]
            assert rows <= max_rows and (size <= limit or rows == 1)
            if stop < len(sizes):  # one row more would break a limit
                assert rows == max_rows or ends[stop + 1] - ends[at] > limit
    assert list(batch_bounds([0], 5, 5)) == []


def test_a_block_buffer_is_not_reused_while_its_batches_live(tmp_path: Path) -> None:
    tasks, payloads, _ = _tasks(tmp_path)
    kept = [list(read_block_batches(t, None, 50)) for t in tasks]  # every block's batches live
    got = [p for batches in kept for b in batches for p in b.column(3).to_pylist()]
    assert got == payloads
    del kept, got
    gc.collect()
    for _ in range(3):  # one block at a time: the same buffers serve every block
        assert [
            p for t in tasks for b in read_block_batches(t, None) for p in b.column(3).to_pylist()
        ] == payloads
        assert len(BLOCK_BUFFERS) <= 2


def test_rdd_records_stay_intact_while_block_buffers_are_reused(tmp_path: Path) -> None:
    """The RDD reader fetches each block into a reused buffer: a block still being read keeps
    its buffer, and records (bytes copies) never change when a buffer serves another block."""
    tasks, payloads, _ = _tasks(tmp_path)
    first = tasks[0].ref.last_entry_id + 1
    half = read_task(tasks[0])
    early = [next(half) for _ in range(first // 2)]  # block 0 is still being read
    rest_of_ledger = [r for t in tasks[1:] for r in read_task(t)]  # other buffers serve these
    records = early + list(half) + rest_of_ledger
    assert records == [("persistent://t/n/x", 5, i, p) for i, p in enumerate(payloads)]
    assert all(type(r[3]) is bytes for r in records)
    del half
    gc.collect()
    for _ in range(2):  # one block at a time: the kept buffers serve every block
        assert [r[3] for t in tasks for r in read_task(t)] == payloads
        assert len(BLOCK_BUFFERS) <= 2
    assert [r[3] for r in records] == payloads  # unchanged by the buffers' reuse


def test_an_entry_filter_keeps_exactly_its_rows(tmp_path: Path) -> None:
    tasks, payloads, _ = _tasks(tmp_path)
    flt = EntryFilter.from_options(entry_range=(100, 450)).and_("entry_id", "in", [99, 100, 333])
    rows = _rows(tasks, flt, batch_rows=8192)
    assert [(r[2], r[3]) for r in rows] == [(100, payloads[100]), (333, payloads[333])]


def test_a_corrupt_block_yields_no_row(tmp_path: Path) -> None:
    tasks, _, store = _tasks(tmp_path)
    ref = tasks[2].ref
    data = bytearray(store.get(ref.data_key).data)
    data[ref.end - 20] ^= 0xFF  # in the block's last entry or its padding
    store.put(ref.data_key, bytes(data), store.head(ref.data_key).metadata)
    assert _rows(tasks[:2], None, 50)  # the blocks before it are fine
    with pytest.raises(ChecksumMismatchError, match="block 2 CRC32C"):
        list(read_block_batches(tasks[2], None, 50))


def test_local_ledger_batches_are_bounded_by_rows_and_bytes(tmp_path: Path) -> None:
    rng = random.Random(9)
    payloads = [rng.randbytes(rng.choice([0, 10, 200, 900])) for _ in range(200)]
    topic = "persistent://public/default/local"
    writer = LedgerStore(tmp_path).create_ledger(topic, 3)
    for p in payloads:
        writer.append(p)
    writer.close()
    task = LocalLedgerTask(str(tmp_path), topic, 3, 0, len(payloads) - 1)
    reader = OffloadedLedgerReader({"batch_rows": "5", "batch_bytes": "700"})
    got = []
    for batch in reader.read(TaskPartition(task)):
        sizes = [len(p) for p in batch.column(3).to_pylist()]
        assert 0 < len(sizes) <= 5 and (sum(sizes) <= 700 or len(sizes) == 1)
        got += batch.column(3).to_pylist()
    assert got == payloads
