"""ReadHandle behaviour: request counts, range checks, corruption, caches, the ranged stream."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from formats.keys import data_key, index_key
from offloader.errors import (
    ChecksumMismatchError,
    CorruptDataError,
    EntryOutOfRange,
    IndexInconsistentError,
    ReadError,
)
from offloader.ledgers.base import InMemoryLedger
from offloader.offload.writer import offload_ledger
from offloader.read.handle import ReadHandle
from offloader.read.offsets_cache import OffsetsCache
from offloader.read.ranged_stream import RangedStream
from offloader.store.base import ObjectStore
from offloader.store.faulty import FaultyObjectStore
from offloader.store.local import LocalObjectStore
from tests.offload.conftest import new_uuid, pulsar_metadata, settings_for

UUID = "6f1c5a52-52a4-4b5f-a9a4-1d8b2d7e0c11"


def _payloads(count: int = 1200, seed: int = 5) -> list[bytes]:
    rng = random.Random(seed)
    return [rng.randbytes(rng.randint(0, 900)) for _ in range(count)]


def _offload(
    store: ObjectStore, kind: str, payloads: list[bytes], *, block: int, extension: bool = True
) -> None:
    settings = settings_for(kind, block, write_index_extension=extension)
    offload_ledger(InMemoryLedger(9, payloads), store, UUID, settings)


def test_random_single_entry_reads_cost_one_get(store: ObjectStore, store_kind: str) -> None:
    """With the extension: one data GET per random entry (index GET only at open). Without it
    (Pulsar's algorithm), an entry deep in a block costs a scan of buffer-sized GETs."""
    payloads = _payloads(3000)  # ~1.4 MB: 2 blocks of 1 MiB (one of 5 MiB on RGW)
    _offload(store, store_kind, payloads, block=1024 * 1024)
    settings = settings_for(store_kind, 1024 * 1024, read_buffer_size=64 * 1024)
    counted = FaultyObjectStore(store)
    rng = random.Random(1)
    ids = [rng.randrange(len(payloads)) for _ in range(10)] + [900, 1500, 1999]
    with ReadHandle.open(counted, 9, UUID, settings) as handle:
        # the index: one GET (ranged: at most its recorded size, or a bound, is read)
        assert handle.has_extension and counted.calls["get"] + counted.calls["get_range"] == 1
        for entry_id in ids:
            handle.offsets_cache.clear()
            counted.reset_counts()
            assert handle.read_entry(entry_id) == payloads[entry_id]
            requests = counted.calls["get_range"] + counted.calls["open_range"]
            assert requests <= 1, (entry_id, dict(counted.calls))
    pulsar_gets = []
    for entry_id in ids:  # a fresh handle each time: nothing buffered or cached
        with ReadHandle.open(counted, 9, UUID, settings, emulate_pulsar=True) as handle:
            counted.reset_counts()
            assert handle.read_entry(entry_id) == payloads[entry_id]
            assert counted.calls["open_range"] == 0  # Pulsar's I/O: buffer-sized GETs
            pulsar_gets.append(counted.calls["get_range"])
    deep = [g for e, g in zip(ids, pulsar_gets, strict=True) if 800 <= e < 2000]
    assert len(deep) >= 3 and min(deep) > 2, pulsar_gets
    assert sum(pulsar_gets) > 2 * len(ids)


def test_offsets_cache_makes_a_reread_exact(tmp_path: Path) -> None:
    store = LocalObjectStore(tmp_path)
    payloads = _payloads()
    _offload(store, "local", payloads, block=256 * 1024, extension=False)
    counted = FaultyObjectStore(store)
    shared = OffsetsCache(10_000)
    settings = settings_for("local", 256 * 1024, read_buffer_size=4096)
    with ReadHandle.open(counted, 9, UUID, settings, offsets_cache=shared) as handle:
        handle.read(0, len(payloads) - 1)  # bulk: one learned offset per 16 KiB
        assert 0 < len(shared) < len(payloads) / 10
        handle.read(770, 780)  # small read: every entry's offset
    assert len(shared) >= 11
    with ReadHandle.open(counted, 9, UUID, settings, offsets_cache=shared) as handle:
        counted.reset_counts()
        assert handle.read_entry(777) == payloads[777]
        assert counted.calls["get_range"] == 1  # landed exactly on the entry


def test_offsets_cache_is_bounded_lru() -> None:
    cache = OffsetsCache(3)
    cache.put_many(1, [(0, 10), (1, 20), (2, 30)])
    assert cache.get(1, 0) == 10  # now most recent
    cache.put(1, 3, 40)
    assert len(cache) == 3 and cache.get(1, 1) is None and cache.get(1, 0) == 10
    assert cache.probe_back(1, 9, lowest=0) == (3, 40)
    assert cache.probe_back(1, 9, lowest=4) is None
    disabled = OffsetsCache(0)
    disabled.put(1, 1, 1)
    assert len(disabled) == 0 and disabled.get(1, 1) is None


def test_range_checks_and_close(tmp_path: Path) -> None:
    store = LocalObjectStore(tmp_path)
    payloads = _payloads(50)
    _offload(store, "local", payloads, block=4096)
    handle = ReadHandle.open(store, 9, UUID)
    for first, last in [(-1, 3), (3, 2), (0, 50), (50, 50)]:
        with pytest.raises(EntryOutOfRange):
            handle.read(first, last)
    assert handle.read(49, 49)[0].payload == payloads[49]
    handle.close()
    with pytest.raises(ReadError, match="closed"):
        handle.read(0, 0)


def _rewrite_data(
    store: ObjectStore, change: bytes | None = None, *, at: int = 0, cut: int | None = None
) -> None:
    key = data_key(UUID, 9)
    data = bytearray(store.get(key).data)
    if change is not None:
        data[at : at + len(change)] = change
    if cut is not None:
        del data[cut:]
    store.put(key, bytes(data), pulsar_metadata("data"))


def test_block_crc_mismatch(tmp_path: Path) -> None:
    store = LocalObjectStore(tmp_path)
    payloads = [bytes([i]) * 100 for i in range(100)]
    _offload(store, "local", payloads, block=4096)
    # flip one payload byte of entry 40 (block 1): framing stays valid, the CRC does not
    _rewrite_data(store, b"\xff", at=4096 + 128 + 5 * 112 + 12 + 50)
    with ReadHandle.open(store, 9, UUID) as handle:
        assert handle.verifies_spans
        assert handle.read(0, 10)[3].payload == payloads[3]  # block 0 is fine
        # the span holding the flipped byte is checked before any of its entries is returned
        with pytest.raises(ChecksumMismatchError, match=r"\(span 1\) have CRC32C"):
            handle.read(0, 99)
        # a partial read of block 1 too (issue 21, item 6)
        with pytest.raises(ChecksumMismatchError, match=r"\(span 1\)"):
            handle.read(40, 40)
    # without span CRC32Cs (an older object): the block CRC32C, and partial reads unchecked
    with ReadHandle.open(store, 9, UUID, use_extension=False) as handle:
        assert not handle.verifies_spans


def test_truncated_data_object(tmp_path: Path) -> None:
    store = LocalObjectStore(tmp_path)
    _offload(store, "local", _payloads(100), block=4096)
    _rewrite_data(store, cut=5000)
    with (
        ReadHandle.open(store, 9, UUID) as handle,
        pytest.raises(IndexInconsistentError, match="the index says"),
    ):
        handle.read(0, 99)


def test_wrong_entry_id_gives_up_after_bounded_reseeks(tmp_path: Path) -> None:
    store = LocalObjectStore(tmp_path)
    payloads = [bytes([i]) * 100 for i in range(30)]
    _offload(store, "local", payloads, block=4096, extension=False)
    # entry 5's id field says 500
    _rewrite_data(store, (500).to_bytes(8, "big"), at=128 + 5 * 112 + 4)
    with ReadHandle.open(store, 9, UUID) as handle:
        assert [e.payload for e in handle.read(0, 4)] == payloads[:5]
        # the re-seek through the index lands on the same bad bytes: one error at once, not
        # Pulsar's n / 4 re-seeks (issue 21, item 10)
        with pytest.raises(CorruptDataError, match="the data object is corrupt"):
            handle.read(0, 29)
        with pytest.raises(CorruptDataError):
            handle.read(7, 7)  # skipping over entry 5 hits it too


def test_padding_inside_promised_entries(tmp_path: Path) -> None:
    store = LocalObjectStore(tmp_path)
    payloads = [bytes([i]) * 100 for i in range(30)]
    _offload(store, "local", payloads, block=4096, extension=False)
    _rewrite_data(store, b"\xfe\xdc\xde\xad", at=128 + 10 * 112)  # "end of block" at entry 10
    with (
        ReadHandle.open(store, 9, UUID) as handle,
        pytest.raises(CorruptDataError, match=r"ends at .* before entry 10"),
    ):
        handle.read(0, 29)


def test_foreign_data_index_pair_with_extension_gone(tmp_path: Path) -> None:
    """An index without extension (as Pulsar writes) next to our data object reads fine."""
    store = LocalObjectStore(tmp_path)
    payloads = _payloads(300)
    _offload(store, "local", payloads, block=8192, extension=False)
    assert store.head(index_key(UUID, 9)).size < 1000
    with ReadHandle.open(store, 9, UUID) as handle:
        assert not handle.has_extension
        assert [e.payload for e in handle.read(0, 299)] == payloads


def test_ranged_stream_seek_inside_buffer_is_free(tmp_path: Path) -> None:
    store = FaultyObjectStore(LocalObjectStore(tmp_path))
    blob = bytes(range(256)) * 64  # 16 KiB
    store.put("blob", blob, {})
    stream = RangedStream(
        store,
        "blob",
        object_length=len(blob),
        buffer_size=4096,
        read_ahead=True,
        single_get_max=4096,
    )
    assert stream.read(10) == blob[:10]
    stream.seek(3000)
    assert stream.read(100) == blob[3000:3100]
    # the window (the whole object) is longer than single_get_max: one streamed GET
    assert store.calls["open_range"] == 1 and store.calls["get_range"] == 0
    stream.seek(4096)  # read ahead by the stream
    assert stream.read(5000) == blob[4096:9096]
    assert stream.gets == store.calls["open_range"] == 1
    stream.seek(0)
    stream.crc_begin()
    stream.read(len(blob))
    from formats.extension import crc32c

    assert stream.crc_end() == crc32c(blob)
    stream.close()


def test_size_mismatch_detected_on_first_get(tmp_path: Path) -> None:
    store = LocalObjectStore(tmp_path)
    store.put("blob", b"x" * 100, {})
    stream = RangedStream(store, "blob", object_length=120, buffer_size=1024, read_ahead=False)
    with pytest.raises(IndexInconsistentError, match="100 bytes, the index says 120"):
        stream.read(1)


def test_other_uuid_has_no_objects(tmp_path: Path) -> None:
    store = LocalObjectStore(tmp_path)
    _offload(store, "local", _payloads(10), block=4096)
    with pytest.raises(Exception, match="not found"):
        ReadHandle.open(store, 9, new_uuid())
