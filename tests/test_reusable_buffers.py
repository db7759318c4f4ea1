"""ReusableBuffers hands a buffer out again only when no view of it is left."""

from __future__ import annotations

import gc

import pyarrow as pa
import pytest

from offloader.spark.buffers import ReusableBuffers, is_viewed


def test_a_buffer_is_reused_only_once_every_view_is_gone() -> None:
    pool = ReusableBuffers(keep=2)
    first = pool.take(100)
    first[:5] = b"hello"
    second = pool.take(100)  # the first is still viewed: a new buffer
    second[:5] = b"world"
    assert bytes(first[:5]) == b"hello"
    del first
    gc.collect()
    again = pool.take(50)  # the first one, with what its last user left in it
    assert bytes(again[:5]) == b"hello"
    assert len(again) == 100
    assert bytes(second[:5]) == b"world"


def test_any_export_keeps_a_buffer_busy() -> None:
    pool = ReusableBuffers(keep=1)
    view = pool.take(64)
    view[:3] = b"abc"
    arrow = pa.py_buffer(view[:3])  # Arrow holds its own export of the buffer
    sub = view[1:2]
    del view
    other = pool.take(64)
    other[:3] = b"xyz"
    assert arrow.to_pybytes() == b"abc" and bytes(sub) == b"b"
    del arrow, sub, other
    gc.collect()
    assert len(pool) == 1  # keep=1: only the newest buffer is kept


def test_a_larger_request_gets_a_larger_buffer_and_old_ones_are_forgotten() -> None:
    pool = ReusableBuffers(keep=2)
    for size in (10, 20, 30):
        assert len(pool.take(size)) == size
    assert len(pool) == 2
    assert len(pool.take(25)) == 30  # 20 is too small, 30 is free


def test_is_viewed_and_bad_arguments() -> None:
    buf = bytearray(8)
    assert not is_viewed(buf)
    view = memoryview(buf)
    assert is_viewed(buf)
    view.release()
    assert not is_viewed(buf) and len(buf) == 8
    with pytest.raises(ValueError, match="keep"):
        ReusableBuffers(keep=0)
    with pytest.raises(ValueError, match="negative"):
        ReusableBuffers().take(-1)


def test_the_probe_keeps_a_buffer_as_it_was_and_does_not_grow_it() -> None:
    buf = bytearray(b"\x01" * 1_000_000)
    buf[-1] = 7
    before = buf.__sizeof__()  # the allocation: size plus the room CPython keeps
    for _ in range(3):
        assert not is_viewed(buf)
    assert len(buf) == 1_000_000 and buf[-1] == 7 and buf[0] == 1
    assert buf.__sizeof__() == before  # no reallocation with an eighth more room
    empty = bytearray()
    assert not is_viewed(empty) and len(empty) == 0
    view = memoryview(buf)
    assert is_viewed(buf)
    assert len(buf) == 1_000_000 and buf[-1] == 7
    view.release()
    assert not is_viewed(buf)
