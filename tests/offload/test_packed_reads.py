"""ReadHandle.iter_packed and iter_spans: the same entries, requests, checks and errors as
iter_entries, as packed batches or as spans of the fetched buffers."""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path

import pytest

from formats.block import PackedEntries
from formats.keys import data_key
from offloader.errors import (
    ChecksumMismatchError,
    CorruptDataError,
    EntryOutOfRange,
    IndexInconsistentError,
    OffloaderError,
    ReadError,
)
from offloader.ledgers.base import InMemoryLedger
from offloader.offload.writer import offload_ledger
from offloader.read.handle import ReadHandle
from offloader.read.offsets_cache import OffsetsCache
from offloader.store.base import ObjectStore
from offloader.store.faulty import FaultyObjectStore
from offloader.store.local import LocalObjectStore
from tests.offload.conftest import pulsar_metadata, settings_for

UUID = "0b5e6a52-52a4-4b5f-a9a4-1d8b2d7e0c11"


def _payloads(count: int, seed: int = 3) -> list[bytes]:
    rng = random.Random(seed)
    return [rng.randbytes(rng.choice((0, 1, rng.randint(0, 3000)))) for _ in range(count)]


def _offload(store: ObjectStore, kind: str, payloads: list[bytes], *, extension: bool) -> None:
    settings = settings_for(kind, 1024 * 1024, write_index_extension=extension)
    offload_ledger(InMemoryLedger(4, payloads), store, UUID, settings)


def _read(handle: ReadHandle, mode: str, first: int, last: int) -> list[bytes]:
    """Payloads ``first..last`` read the ``mode`` way (entries, packed, spans)."""
    if mode == "entries":
        return [e.payload for e in handle.iter_entries(first, last)]
    if mode == "packed":
        return [p for b in _packed(handle, first, last) for p in b.payloads()]
    batches = list(handle.iter_spans(first, last))
    expected = first
    for batch in batches:
        assert batch.count > 0 and batch.first_entry_id == expected
        expected = batch.last_entry_id + 1
    assert expected == last + 1
    return [bytes(p) for b in batches for p in b.payloads()]


MODES = ["entries", "packed", "spans"]


def _packed(handle: ReadHandle, first: int, last: int) -> list[PackedEntries]:
    batches = list(handle.iter_packed(first, last))
    expected = first
    for batch in batches:
        assert batch.count > 0 and batch.first_entry_id == expected
        assert len(batch.offsets_view()) == batch.count + 1
        expected = batch.last_entry_id + 1
    assert expected == last + 1
    return batches


@pytest.mark.parametrize("extension", [True, False], ids=["extension", "pulsar-index"])
def test_packed_reads_equal_entry_reads(
    store: ObjectStore, store_kind: str, extension: bool
) -> None:
    """Whole ledger, ranges inside and across blocks, single entries: the same payloads and
    the same number of data GETs as iter_entries, on every store."""
    payloads = _payloads(1500)  # ~2 MiB: several 1 MiB blocks (one 5 MiB block on RGW)
    _offload(store, store_kind, payloads, extension=extension)
    settings = settings_for(store_kind, 1024 * 1024, read_buffer_size=64 * 1024)
    rng = random.Random(9)
    ranges = [(0, 1499), (0, 0), (1499, 1499), (700, 710)]
    ranges += [tuple(sorted((rng.randrange(1500), rng.randrange(1500)))) for _ in range(6)]
    for first, last in ranges:
        gets = []
        for mode in MODES:
            with ReadHandle.open(store, 4, UUID, settings) as handle:
                got = _read(handle, mode, first, last)
                assert got == payloads[first : last + 1], (first, last, mode)
                gets.append(handle.data_gets)
        assert len(set(gets)) == 1, (first, last, gets)


def test_packed_batch_accessors(tmp_path: Path) -> None:
    store = LocalObjectStore(tmp_path)
    payloads = _payloads(300)
    _offload(store, "local", payloads, extension=True)
    with ReadHandle.open(store, 4, UUID) as handle:
        (batch,) = _packed(handle, 10, 19)
        (spans,) = handle.iter_spans(10, 19)
    assert len(spans) == 10 and spans.last_entry_id == 19 and spans.payload(15) == payloads[15]
    assert spans.payload_bytes == sum(map(len, payloads[10:20]))
    with pytest.raises(IndexError, match=r"not in this batch \(10..19\)"):
        spans.payload(20)
    assert len(batch) == 10 and batch.last_entry_id == 19
    assert batch.payload(15) == payloads[15]
    assert batch.payload_bytes == sum(map(len, payloads[10:20]))
    for outside in (9, 20):
        with pytest.raises(IndexError, match=r"not in this batch \(10..19\)"):
            batch.payload(outside)


def test_packed_reads_learn_like_entry_reads(tmp_path: Path) -> None:
    """Without the extension, a bulk read learns one offset per 16 KiB, the same ones either
    way; with it, a bulk read learns nothing (fine offsets place every entry); a small read
    learns every entry."""
    for extension in (False, True):
        store = LocalObjectStore(tmp_path / str(extension))
        payloads = _payloads(2000)
        _offload(store, "local", payloads, extension=extension)
        learned = []
        for mode in MODES:
            cache = OffsetsCache(100_000)
            with ReadHandle.open(store, 4, UUID, offsets_cache=cache) as handle:
                _read(handle, mode, 0, 1999)
                bulk = {e: cache.get(4, e) for e in range(2000) if cache.get(4, e) is not None}
                _read(handle, mode, 500, 509)
                assert all(cache.get(4, e) is not None for e in range(500, 510))
            learned.append(bulk)
        assert learned[0] == learned[1] == learned[2]
        if extension:
            assert learned[0] == {}
        else:
            assert 20 < len(learned[0]) < 2000 / 10


def _damage(store: ObjectStore, at: int, change: bytes) -> None:
    key = data_key(UUID, 4)
    data = bytearray(store.get(key).data)
    data[at : at + len(change)] = change
    store.put(key, bytes(data), pulsar_metadata("data"))


def _cut(store: ObjectStore, size: int) -> None:
    key = data_key(UUID, 4)
    store.put(key, store.get(key).data[:size], pulsar_metadata("data"))


ENTRY = 12 + 100  # framed size of the 100-byte payloads below
Damage = tuple[bool, Callable[[ObjectStore], None], type[OffloaderError]]
DAMAGES: dict[str, Damage] = {
    # a payload byte of entry 40 (block 1 of 4096-byte blocks): only the CRC32C catches it
    "crc": (
        True,
        lambda s: _damage(s, 4096 + 128 + 5 * ENTRY + 12 + 50, b"\xff"),
        ChecksumMismatchError,
    ),
    "entry-id": (
        False,
        lambda s: _damage(s, 128 + 5 * ENTRY + 4, (500).to_bytes(8, "big")),
        CorruptDataError,
    ),
    "padding": (
        False,
        lambda s: _damage(s, 128 + 10 * ENTRY, b"\xfe\xdc\xde\xad"),
        CorruptDataError,
    ),
    "length": (  # the span CRC32C catches it before the framing does
        True,
        lambda s: _damage(s, 128 + 7 * ENTRY, (5000).to_bytes(4, "big")),
        ChecksumMismatchError,
    ),
    "truncated": (True, lambda s: _cut(s, 5000), IndexInconsistentError),
}


@pytest.mark.parametrize("damage", list(DAMAGES))
def test_packed_reads_fail_like_entry_reads(tmp_path: Path, damage: str) -> None:
    extension, apply, error = DAMAGES[damage]
    payloads = [bytes([i]) * 100 for i in range(100)]
    store = LocalObjectStore(tmp_path)
    settings = settings_for("local", 4096, write_index_extension=extension)
    offload_ledger(InMemoryLedger(4, payloads), store, UUID, settings)
    apply(store)
    messages = []
    for mode in MODES:
        with ReadHandle.open(store, 4, UUID) as handle, pytest.raises(error) as caught:
            _read(handle, mode, 0, 99)
        messages.append(str(caught.value))
    assert len(set(messages)) == 1, messages


def test_packed_range_checks(tmp_path: Path) -> None:
    store = LocalObjectStore(tmp_path)
    _offload(store, "local", _payloads(50), extension=True)
    handle = ReadHandle.open(store, 4, UUID)
    for first, last in [(-1, 3), (3, 2), (0, 50)]:
        for read in (handle.iter_packed, handle.iter_spans):
            with pytest.raises(EntryOutOfRange):
                read(first, last)
    handle.close()
    for read in (handle.iter_packed, handle.iter_spans):
        with pytest.raises(ReadError, match="closed"):
            read(0, 0)


def test_a_packed_single_entry_read_costs_one_get(tmp_path: Path) -> None:
    store = LocalObjectStore(tmp_path)
    payloads = _payloads(1500)
    _offload(store, "local", payloads, extension=True)
    counted = FaultyObjectStore(store)
    settings = settings_for("local", 1024 * 1024, read_buffer_size=64 * 1024)
    with ReadHandle.open(counted, 4, UUID, settings) as handle:
        for entry_id in (3, 777, 1499):
            handle.offsets_cache.clear()
            counted.reset_counts()
            (batch,) = _packed(handle, entry_id, entry_id)
            assert batch.payload(entry_id) == payloads[entry_id]
            assert counted.calls["get_range"] + counted.calls["open_range"] <= 1
            handle.offsets_cache.clear()
            counted.reset_counts()
            (spans,) = handle.iter_spans(entry_id, entry_id)
            assert spans.payload(entry_id) == payloads[entry_id]
            assert counted.calls["get_range"] + counted.calls["open_range"] <= 1
