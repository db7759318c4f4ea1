"""The DataFrame source's block reader without Spark: one streamed fetch per block, packed into
Arrow batches of at most ``batch_rows`` rows, filtered exactly, corruption refused whole."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from formats.errors import ChecksumMismatchError
from offloader.config import OffloadSettings
from offloader.ledgers.base import InMemoryLedger
from offloader.objects import block_refs, load_index
from offloader.spark_plan import BlockTask, EntryFilter, StoreSpec
from offloader.spark_source import read_block_batches
from offloader.store.local import LocalObjectStore
from offloader.writer import offload_ledger

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


def _rows(tasks: list[BlockTask], flt: EntryFilter | None, batch_rows: int) -> list[tuple]:
    rows = []
    for task in tasks:
        for batch in read_block_batches(task, flt, batch_rows):
            assert 0 < batch.num_rows <= batch_rows
            rows += list(zip(*(batch.column(i).to_pylist() for i in range(4)), strict=True))
    return rows


def test_every_entry_in_small_batches(tmp_path: Path) -> None:
    tasks, payloads, _ = _tasks(tmp_path)
    assert len(tasks) > 3
    rows = _rows(tasks, None, batch_rows=7)
    assert rows == [("persistent://t/n/x", 5, i, p) for i, p in enumerate(payloads)]


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
