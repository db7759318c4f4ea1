"""Block buffers reused across the plain offloads of one process (issue 40): the second
offload frames into the first one's buffers (no fresh pages), every object stays byte for byte
what it should be, a buffer something still refers to is never reused, and the pool keeps at
most one offload's worth of buffers."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from typing import Any

import pytest

from formats.block import BlockWriter
from formats.framing import zeroed_bytearray
from formats.keys import data_key
from offloader.ledgers.base import InMemoryLedger
from offloader.offload.block_buffers import BLOCK_BUFFERS, BlockBufferPool, is_referenced
from offloader.offload.writer import offload_ledger
from offloader.read.handle import ReadHandle
from offloader.store.base import Buffer, ObjectStore, UploadedPart
from offloader.store.local import LocalObjectStore
from tests.offload.conftest import new_uuid, settings_for

BLOCK = 4096


@pytest.fixture(autouse=True)
def empty_pool() -> Iterator[None]:
    BLOCK_BUFFERS.clear()
    yield
    BLOCK_BUFFERS.clear()


def _payloads(seed: int, block: int = BLOCK) -> list[bytes]:
    """About six blocks of entries that differ from one seed to the next."""
    scale = block // BLOCK
    return [bytes([(seed * 31 + i) % 251]) * (700 + 37 * i) * scale for i in range(25)]


def _ledger(ledger_id: int, seed: int, block: int = BLOCK) -> InMemoryLedger:
    return InMemoryLedger(ledger_id, _payloads(seed, block))


def _reference(ledger: InMemoryLedger, tmp_path: Any, uuid: str, block: int) -> bytes:
    """The data object a fresh process (an empty pool) writes for ``ledger``."""
    store = LocalObjectStore(tmp_path / "reference")
    BLOCK_BUFFERS.clear()
    offload_ledger(ledger, store, uuid, settings_for("local", block))
    BLOCK_BUFFERS.clear()
    return store.get(data_key(uuid, ledger.ledger_id)).data


def test_pool_takes_back_free_buffers_up_to_keep_of_one_size() -> None:
    pool = BlockBufferPool()
    pool.give([bytearray(8) for _ in range(3)], keep=2)
    assert len(pool) == 2 and pool.dropped == 1
    assert [len(b) for b in pool.take(8, 5)] == [8, 8] and pool.reused == 2
    assert len(pool) == 0
    pool.give([bytearray(8)], keep=4)
    assert pool.take(16, 1) == []  # another size: the kept ones go
    assert len(pool) == 0
    pool.give([bytearray(8)], keep=4)
    pool.give([bytearray(16)], keep=4)  # a new size replaces the old
    assert [len(b) for b in pool.take(16, 4)] == [16]
    pool.give([bytearray(4)], keep=1)
    pool.clear()
    assert len(pool) == 0


def test_a_buffer_something_refers_to_is_never_taken_back() -> None:
    pool = BlockBufferPool()
    view = memoryview(bytearray(b"v" * 8))[2:4]  # only a view of it is left
    holder = [bytearray(b"h" * 8)]  # referred to by a list
    assert isinstance(view.obj, bytearray)
    pool.give([view.obj, holder[0], bytearray(b"f" * 8)], keep=4)
    assert pool.dropped == 2
    # only the free one comes back; the others stay as their holders left them
    assert pool.take(8, 4) == [bytearray(b"f" * 8)]
    assert bytes(view) == b"vv" and holder[0] == b"h" * 8


def test_is_referenced_sees_views_and_other_references() -> None:
    buf = bytearray(b"abc")
    assert not is_referenced(buf)
    view = memoryview(buf)
    assert is_referenced(buf)
    view.release()
    other = buf
    assert is_referenced(buf)
    assert is_referenced(other, owners=2) is False
    assert buf == b"abc"  # the probe puts the byte back
    assert not is_referenced(bytearray())


def test_released_writer_keeps_nothing_and_its_blocks_stay_valid() -> None:
    writer = BlockWriter(BLOCK)
    block = writer.write_block(0, [b"x" * 100], BLOCK)
    expected = bytes(block)
    buf = writer.release()
    assert is_referenced(buf, owners=1)  # `block` still views it
    assert bytes(block) == expected
    del block
    assert not is_referenced(buf, owners=1)
    assert len(buf) == BLOCK


# the stores whose plain offload is multipart (GCS and Azure send it in one request)
@pytest.mark.parametrize(
    "store_kind",
    [
        "local",
        pytest.param("moto", marks=pytest.mark.s3),
        pytest.param("rgw", marks=[pytest.mark.s3, pytest.mark.rgw]),
    ],
)
def test_later_offloads_reuse_the_buffers_and_write_the_same_bytes(
    store: ObjectStore, store_kind: str, tmp_path: Any
) -> None:
    block = settings_for(store_kind, BLOCK).max_block_size  # 5 MiB on RGW
    ledgers = [_ledger(10 + n, n, block) for n in range(3)]
    uuids = [new_uuid() for _ in ledgers]
    expected = [
        _reference(ledger, tmp_path, uuid, block)
        for ledger, uuid in zip(ledgers, uuids, strict=True)
    ]
    settings = settings_for(store_kind, block, offload_concurrency=2)
    for n, (ledger, uuid) in enumerate(zip(ledgers, uuids, strict=True)):
        reused = BLOCK_BUFFERS.reused
        offload_ledger(ledger, store, uuid, settings)
        # the first offload allocates; every later one frames into the kept buffers
        assert BLOCK_BUFFERS.reused - reused == (0 if n == 0 else 2)
        assert len(BLOCK_BUFFERS) == 2  # one offload's worth (offload_concurrency)
        assert store.get(data_key(uuid, ledger.ledger_id)).data == expected[n]
        with ReadHandle.open(store, ledger.ledger_id, uuid, settings) as handle:
            got = handle.read(0, handle.last_add_confirmed)
            assert [e.payload for e in got] == _payloads(n, block)


class _KeepingStore(LocalObjectStore):
    """A store that keeps the bodies it was given (as an in-memory store could)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.bodies: list[Buffer] = []

    def upload_part(
        self, key: str, upload_id: str, part_number: int, data: Buffer, crc32c: int
    ) -> UploadedPart:
        self.bodies.append(data)
        return super().upload_part(key, upload_id, part_number, data, crc32c)


def test_buffers_a_store_kept_are_not_reused(tmp_path: Any) -> None:
    store = _KeepingStore(tmp_path / "objects")
    settings = settings_for("local", BLOCK, offload_concurrency=2)
    first, second = _ledger(1, 1), _ledger(2, 2)
    offload_ledger(first, store, new_uuid(), settings)
    kept = [bytes(b) for b in store.bodies]
    assert len(BLOCK_BUFFERS) == 0  # every pooled buffer is still held by the store
    offload_ledger(second, store, new_uuid(), settings)
    assert [bytes(b) for b in store.bodies[: len(kept)]] == kept  # unchanged
    store.bodies.clear()
    gc.collect()


def test_a_failed_offload_gives_no_buffer_back(tmp_path: Any) -> None:
    class _Failing(LocalObjectStore):
        def complete_multipart_upload(self, *args: Any, **kwargs: Any) -> None:
            raise OSError("disk gone")

    with pytest.raises(Exception, match="disk gone"):
        offload_ledger(
            _ledger(3, 3), _Failing(tmp_path / "o"), new_uuid(), settings_for("local", BLOCK)
        )
    assert len(BLOCK_BUFFERS) == 0


def test_zeroed_bytearray_is_zero_with_or_without_populate() -> None:
    # large enough for the C version's madvise(MADV_POPULATE_WRITE) of its whole pages
    for size in (0, 1, 4095, 1 << 20, (1 << 20) + 123):
        buf = zeroed_bytearray(size)
        assert len(buf) == size and buf.count(0) == size
