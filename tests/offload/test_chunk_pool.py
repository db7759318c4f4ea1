"""Read-ahead into reused buffers: ChunkPool hands a buffer out again only once nothing else
refers to it, so batches and views a caller keeps never change; ``readinto`` on the readers
(local file, ResumingRangeReader, and S3's body straight from the socket over HTTP)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from devservers.endpoint import S3Endpoint
from formats.keys import data_key
from offloader.errors import StoreUnavailable
from offloader.ledgers.base import InMemoryLedger
from offloader.offload.writer import offload_ledger
from offloader.read.handle import ReadHandle
from offloader.read.prefetch import ChunkPool, RangePrefetcher
from offloader.read.ranged_stream import POOL_SPARE, PREFETCH_DEPTH, RangedStream
from offloader.store.base import ObjectStore
from offloader.store.local import LocalObjectStore
from offloader.store.ranges import ResumingRangeReader
from tests.offload.conftest import s3_store, settings_for

UUID = "5d1f3a9c-7e2b-4c8d-a6f0-1b2c3d4e5f60"


def _payloads(n: int = 3000) -> list[bytes]:
    rng = random.Random(40)
    return [rng.randbytes(rng.randrange(0, 900)) for _ in range(n)]


def _offloaded(store: ObjectStore, payloads: list[bytes], block: int = 256 * 1024) -> None:
    offload_ledger(InMemoryLedger(7, payloads), store, UUID, settings_for("local", block))


def test_a_buffer_is_reused_only_once_nothing_refers_to_it() -> None:
    pool = ChunkPool(16, keep=2)
    a = pool.take()
    view = memoryview(a)[3:5].toreadonly()  # a view of a view: still holds the buffer
    del a
    b = pool.take()
    assert b is not view.obj
    del b
    c = pool.take()  # the second buffer is free again; the first is still seen
    assert c is not view.obj and pool.made == 2
    del view, c
    assert pool.take() is not None and pool.made == 2  # both free: nothing new made
    held = [pool.take() for _ in range(3)]  # the two kept ones, then a new one (not kept)
    assert len({id(b) for b in held}) == 3 and pool.made == 3
    assert len(pool._bufs) == 2


def test_kept_batches_keep_their_bytes_while_the_scan_reuses_buffers(tmp_path: Path) -> None:
    store = LocalObjectStore(tmp_path / "objects")
    payloads = _payloads()
    _offloaded(store, payloads)
    settings = settings_for("local", 256 * 1024, read_buffer_size=8192)
    with ReadHandle.open(store, 7, UUID, settings) as handle:
        last = len(payloads) - 1
        kept = list(handle.iter_spans(0, last))  # every batch kept: no buffer can be reused
        views = [bytes(b.spans.payload(i)) for b in kept for i in range(b.spans.count)]
        assert views == payloads
        del kept, views
        # a scan that keeps nothing reuses a handful of buffers across the whole ledger
        stream = handle._get_stream()
        pool = stream._pool
        assert pool is not None
        made = pool.made
        got = [
            bytes(b.spans.payload(i))
            for b in handle.iter_spans(0, last)
            for i in range(b.spans.count)
        ]
        assert got == payloads
        assert pool.made - made <= PREFETCH_DEPTH + POOL_SPARE
        entries = [e.payload for e in handle.iter_entries(0, last)]
        assert entries == payloads and all(type(p) is bytes for p in entries)
        packed = [p for batch in handle.iter_packed(0, last) for p in batch.payloads()]
        assert packed == payloads


def test_prefetched_chunks_are_read_only_views_of_pooled_buffers(tmp_path: Path) -> None:
    store = LocalObjectStore(tmp_path / "objects")
    data = random.Random(2).randbytes(100_000)
    store.put("blob", data, {})
    pool = ChunkPool(4096, keep=4)
    ahead = RangePrefetcher(store, "blob", 10, 90_010, chunk=4096, depth=2, pool=pool)
    try:
        chunks = []
        while not ahead.exhausted:
            chunk = ahead.take()
            assert isinstance(chunk, memoryview) and chunk.readonly
            chunks.append(bytes(chunk))
            del chunk
    finally:
        ahead.close()
    assert b"".join(chunks) == data[10:90_010]
    assert pool.made <= 4 + 3  # reused: about the queue's depth, not one per chunk


def test_a_stream_without_a_pool_sized_for_its_chunks_reads_bytes(tmp_path: Path) -> None:
    store = LocalObjectStore(tmp_path / "objects")
    store.put("blob", b"x" * 50_000, {})
    ahead = RangePrefetcher(store, "blob", 0, 50_000, chunk=8192, depth=2, pool=ChunkPool(100, 2))
    try:
        assert isinstance(ahead.take(), bytes)  # a pool of smaller buffers is not used
    finally:
        ahead.close()


class _ReadOnlyBody:
    """A body with ``read`` only, failing once after ``fail_after`` bytes."""

    def __init__(self, data: bytes, offset: int, fail_after: int | None) -> None:
        self.data, self.pos, self.fail_after = data, offset, fail_after

    def read(self, n: int) -> bytes:
        if self.fail_after is not None and self.fail_after <= 0:
            raise StoreUnavailable("connection reset")
        if self.fail_after is not None:
            n = min(n, self.fail_after)
            self.fail_after -= n
        out = self.data[self.pos : self.pos + n]
        self.pos += len(out)
        return out

    def close(self) -> None:
        pass


def test_resuming_readinto_resumes_and_copies_from_a_read_only_body() -> None:
    data = random.Random(5).randbytes(5000)
    fails = [1500, None]
    offsets: list[int] = []

    def opener(offset: int) -> tuple[_ReadOnlyBody, int]:
        offsets.append(offset)
        return _ReadOnlyBody(data, offset, fails.pop(0) if fails else None), len(data)

    reader = ResumingRangeReader(opener, 100, 4100, attempts=3, what="blob")
    buf = bytearray(700)
    out = bytearray()
    while got := reader.readinto(memoryview(buf)):
        out += buf[:got]
    assert bytes(out) == data[100:4100]
    assert offsets == [100, 1600]


def test_s3_bodies_are_read_into_reused_buffers(moto_endpoint: S3Endpoint) -> None:
    store = s3_store(moto_endpoint)
    payloads = _payloads(6000)
    _offloaded(store, payloads, block=1024 * 1024)
    length = store.head(data_key(UUID, 7)).size
    reader = store.open_range(data_key(UUID, 7), 5, length)
    buf = bytearray(65536)
    out = bytearray()
    try:
        while got := reader.readinto(memoryview(buf)):  # type: ignore[attr-defined]
            out += buf[:got]
    finally:
        reader.close()
    assert bytes(out) == store.get_range(data_key(UUID, 7), 5, length).data
    settings = settings_for("moto", 1024 * 1024, read_buffer_size=32 * 1024)
    with ReadHandle.open(store, 7, UUID, settings) as handle:
        got_payloads = [e.payload for e in handle.iter_entries(0, len(payloads) - 1)]
        pool = handle._get_stream()._pool
        assert pool is not None and 0 < pool.made <= PREFETCH_DEPTH + POOL_SPARE + 1
    assert got_payloads == payloads
    store.close()


@pytest.mark.parametrize("corrupt_at", [1000, 200_000])
def test_pooled_reads_still_catch_a_corrupt_byte(tmp_path: Path, corrupt_at: int) -> None:
    from formats.errors import ChecksumMismatchError

    store = LocalObjectStore(tmp_path / "objects")
    payloads = _payloads()
    _offloaded(store, payloads)
    key = data_key(UUID, 7)
    raw = bytearray(store.get_range(key, 0, store.head(key).size).data)
    raw[corrupt_at] ^= 0x40
    store.put(key, bytes(raw), metadata=dict(store.head(key).metadata))
    settings = settings_for("local", 256 * 1024, read_buffer_size=8192)
    with ReadHandle.open(store, 7, UUID, settings) as handle, pytest.raises(ChecksumMismatchError):
        for _ in handle.iter_entries(0, len(payloads) - 1):
            pass


def test_a_ranged_stream_drops_its_pool_on_close(tmp_path: Path) -> None:
    store = LocalObjectStore(tmp_path / "objects")
    store.put("blob", bytes(300_000), {})
    stream = RangedStream(store, "blob", object_length=300_000, buffer_size=4096)
    assert bytes(stream.view(100_000)[:10]) == bytes(10)
    assert stream._pool is not None
    stream.close()
    assert stream._pool is None
