"""Streamed reads: ResumingRangeReader (resume after a dropped body, bounded), and the
RangedStream / ReadHandle path that reads a long window as one streamed GET on a prefetch
thread (errors typed, read-ahead bounded, threads gone after close)."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Mapping
from pathlib import Path

import pytest

from formats.errors import ChecksumMismatchError, IndexInconsistentError
from formats.extension import crc32c
from formats.keys import data_key
from offloader.errors import ObjectNotFound, StoreError, StoreUnavailable
from offloader.ledgers.base import InMemoryLedger
from offloader.offload.writer import offload_ledger
from offloader.read.handle import ReadHandle
from offloader.read.ranged_stream import PREFETCH_DEPTH, RangedStream
from offloader.store.faulty import FaultPlan, FaultyObjectStore
from offloader.store.local import LocalObjectStore
from offloader.store.ranges import Body, ResumingRangeReader
from tests.offload.conftest import settings_for

UUID = "0b6c2f4e-4f3a-4c55-9d0e-1c2b3a4d5e6f"

DATA = random.Random(3).randbytes(10_000)


class _Body:
    """Serves DATA from ``offset``; fails with ``error`` once ``fail_after`` bytes are out."""

    def __init__(self, offset: int, fail_after: int | None, error: Exception) -> None:
        self.pos = offset
        self.fail_after = fail_after
        self.error = error
        self.closed = False

    def read(self, n: int) -> bytes:
        if self.fail_after is not None and self.fail_after <= 0:
            raise self.error
        if self.fail_after is not None:
            n = min(n, self.fail_after)
            self.fail_after -= n
        data = DATA[self.pos : self.pos + n]
        self.pos += len(data)
        return data

    def close(self) -> None:
        self.closed = True


class _Opener:
    def __init__(self, fails: list[int | None], error: Exception | None = None) -> None:
        self.fails = fails  # bytes each successive body serves before failing (None: never)
        self.error = error or StoreUnavailable("connection reset")
        self.offsets: list[int] = []
        self.bodies: list[_Body] = []
        self.size = len(DATA)

    def __call__(self, offset: int) -> tuple[Body, int]:
        self.offsets.append(offset)
        fail = self.fails.pop(0) if self.fails else None
        body = _Body(offset, fail, self.error)
        self.bodies.append(body)
        return body, self.size


def _drain(reader: ResumingRangeReader, chunk: int = 700) -> bytes:
    out = bytearray()
    while data := reader.read(chunk):
        out += data
    return bytes(out)


def test_resume_continues_from_the_first_byte_not_returned() -> None:
    opener = _Opener([1500, 2000, None])
    reader = ResumingRangeReader(opener, 100, 9000, attempts=3, what="obj")
    assert _drain(reader) == DATA[100:9000]
    assert opener.offsets == [100, 1600, 3600]
    assert all(b.closed for b in opener.bodies[:2])


def test_resume_gives_up_after_the_attempts_in_a_row() -> None:
    opener = _Opener([10, 0, 0, 0, 0])
    reader = ResumingRangeReader(opener, 0, 9000, attempts=3, what="obj")
    assert reader.read(100) == DATA[:10]
    with pytest.raises(StoreUnavailable, match="gave up after 3 attempts at offset 10"):
        reader.read(100)
    assert opener.offsets == [0, 10, 10]


def test_progress_resets_the_attempt_count() -> None:
    # every body fails after 50 bytes: each read still progresses, so the read completes
    opener = _Opener([50] * 300)
    reader = ResumingRangeReader(opener, 0, 5000, attempts=2, what="obj")
    assert _drain(reader, 100) == DATA[:5000]


def test_other_store_errors_are_not_retried() -> None:
    opener = _Opener([10], error=StoreError("access revoked"))
    reader = ResumingRangeReader(opener, 0, 9000, attempts=5, what="obj")
    reader.read(10)
    with pytest.raises(StoreError, match="access revoked"):
        reader.read(10)
    assert len(opener.offsets) == 1


def test_a_changed_object_size_on_resume_is_refused() -> None:
    opener = _Opener([10])
    reader = ResumingRangeReader(opener, 0, 9000, attempts=5, what="obj")
    reader.read(10)
    opener.size = 5000
    with pytest.raises(StoreError, match="changed while being read"):
        reader.read(10)


def test_a_body_ending_early_is_resumed() -> None:
    class Short(_Opener):
        def __call__(self, offset: int) -> tuple[Body, int]:
            body, size = super().__call__(offset)
            if len(self.offsets) == 1:
                body.read = lambda n: b""  # type: ignore[method-assign]
            return body, size

    opener = Short([])
    reader = ResumingRangeReader(opener, 0, 2000, attempts=2, what="obj")
    assert _drain(reader) == DATA[:2000]
    assert opener.offsets == [0, 0]


# --- RangedStream / ReadHandle over a streamed window ------------------------------------
def _ledger(tmp_path: Path, n: int = 2000) -> tuple[LocalObjectStore, list[bytes]]:
    rng = random.Random(11)
    payloads = [rng.randbytes(rng.randrange(0, 600)) for _ in range(n)]
    store = LocalObjectStore(tmp_path / "objects")
    settings = settings_for("local", 64 * 1024)
    offload_ledger(InMemoryLedger(9, payloads), store, UUID, settings)
    return store, payloads


def _prefetch_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "range-prefetch"]


def _wait_no_prefetch_threads() -> None:
    deadline = time.monotonic() + 5
    while _prefetch_threads() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not _prefetch_threads()


def test_bulk_read_is_one_streamed_get(tmp_path: Path) -> None:
    store, payloads = _ledger(tmp_path)
    counted = FaultyObjectStore(store)
    settings = settings_for("local", 64 * 1024, read_buffer_size=4096)
    with ReadHandle.open(counted, 9, UUID, settings) as handle:
        got = [e.payload for e in handle.iter_entries(0, len(payloads) - 1)]
        assert got == payloads
        assert counted.calls["open_range"] == handle.data_gets == 1
        assert counted.calls["get_range"] == 1  # the index's (a bounded ranged GET)
        assert counted.calls["range_read"] > 50  # read 4 KiB at a time
    _wait_no_prefetch_threads()


def test_a_failure_mid_stream_is_typed_and_the_handle_recovers(tmp_path: Path) -> None:
    store, payloads = _ledger(tmp_path)
    plan = FaultPlan().fail("range_read", StoreUnavailable("injected reset"), on_call=20)
    counted = FaultyObjectStore(store, plan)
    settings = settings_for("local", 64 * 1024, read_buffer_size=4096)
    with ReadHandle.open(counted, 9, UUID, settings) as handle:
        with pytest.raises(StoreUnavailable, match="injected reset"):
            handle.read(0, len(payloads) - 1)
        assert [e.payload for e in handle.read(0, len(payloads) - 1)] == payloads
    _wait_no_prefetch_threads()


def test_a_missing_data_object_is_named(tmp_path: Path) -> None:
    store, payloads = _ledger(tmp_path)
    plan = FaultPlan().fail("open_range", ObjectNotFound("no such object"))
    with (
        ReadHandle.open(
            FaultyObjectStore(store, plan),
            9,
            UUID,
            settings_for("local", 64 * 1024, read_buffer_size=4096),
        ) as handle,
        pytest.raises(ObjectNotFound, match="the data object is missing"),
    ):
        handle.read(0, len(payloads) - 1)


def test_streamed_size_mismatch_is_an_inconsistency(tmp_path: Path) -> None:
    store = LocalObjectStore(tmp_path)
    store.put("blob", b"x" * 100_000, {})
    stream = RangedStream(store, "blob", object_length=120_000, buffer_size=4096)
    with pytest.raises(IndexInconsistentError, match="100000 bytes, the index says 120000"):
        stream.read(1)
    stream.close()


def test_read_ahead_is_bounded_and_stops_on_close(tmp_path: Path) -> None:
    store = FaultyObjectStore(LocalObjectStore(tmp_path))
    blob = random.Random(4).randbytes(1024 * 1024)
    store.put("blob", blob, {})
    stream = RangedStream(store, "blob", object_length=len(blob), buffer_size=4096)
    assert stream.read(10) == blob[:10]  # the caller stops consuming here
    time.sleep(0.3)
    # the thread filled its queue and waits: the chunk taken, the queue, one in hand
    assert store.calls["range_read"] <= PREFETCH_DEPTH + 2
    stream.close()
    _wait_no_prefetch_threads()
    assert store.calls["range_read"] <= PREFETCH_DEPTH + 2


def test_a_seek_elsewhere_drops_the_stream(tmp_path: Path) -> None:
    store = FaultyObjectStore(LocalObjectStore(tmp_path))
    blob = random.Random(5).randbytes(256 * 1024)
    store.put("blob", blob, {})
    stream = RangedStream(store, "blob", object_length=len(blob), buffer_size=4096)
    assert stream.read(5000) == blob[:5000]
    stream.seek(200_000)
    assert stream.read(5000) == blob[200_000:205_000]
    stream.seek(5000)
    assert stream.read(100_000) == blob[5000:105_000]
    assert stream.gets == store.calls["open_range"] == 3
    stream.close()
    _wait_no_prefetch_threads()


# --- block CRC32Cs summed by the prefetch thread -----------------------------------------
def _crc_stream(tmp_path: Path, bounds: list[int]) -> tuple[RangedStream, bytes]:
    store = LocalObjectStore(tmp_path)
    blob = random.Random(6).randbytes(200_000)
    store.put("blob", blob, {})
    stream = RangedStream(
        store, "blob", object_length=len(blob), buffer_size=4096, crc_boundaries=bounds
    )
    return stream, blob


def test_streamed_regions_are_summed_on_the_prefetch_thread(tmp_path: Path) -> None:
    bounds = [0, 70_001, 150_000, 200_000]
    stream, blob = _crc_stream(tmp_path, bounds)
    stream.crc_begin()  # nothing fetched yet: the first streamed GET takes the run over
    assert stream.read(100) == blob[:100]
    assert stream.crc_on_prefetch_thread
    stream.read(70_001 - 100)
    assert stream.crc_end() == crc32c(blob[:70_001])
    stream.crc_begin()  # at a boundary inside the streamed window
    assert stream.crc_on_prefetch_thread
    stream.read(150_000 - 70_001)
    assert stream.crc_end() == crc32c(blob[70_001:150_000])
    stream.crc_begin()
    stream.read(10)
    assert stream.crc_end() is None  # not a region's end: cannot be checked
    stream.close()
    _wait_no_prefetch_threads()


def test_a_run_whose_stream_ends_continues_on_the_callers_thread(tmp_path: Path) -> None:
    bounds = [0, 40_000, 200_000]
    stream, blob = _crc_stream(tmp_path, bounds)
    stream.set_window(120_003)  # the streamed GET ends inside the second region
    stream.read(40_000)
    stream.crc_begin()
    assert stream.crc_on_prefetch_thread
    stream.read(120_003 - 40_000 - 7)  # a few bytes short of the stream's end
    stream.set_window(200_000)
    stream.read(200_000 - stream.position)  # the rest comes from a second streamed GET
    assert not stream.crc_on_prefetch_thread
    assert stream.crc_end() == crc32c(blob[40_000:])
    assert stream.gets == 2
    stream.close()


def test_a_run_begun_off_a_boundary_is_summed_by_the_caller(tmp_path: Path) -> None:
    stream, blob = _crc_stream(tmp_path, [0, 100_000, 200_000])
    stream.read(33)
    stream.crc_begin()
    assert not stream.crc_on_prefetch_thread
    stream.read(100_000 - 33)
    assert stream.crc_end() == crc32c(blob[33:100_000])
    stream.close()


@pytest.mark.parametrize("corrupt_block", [0, 2, -1])
def test_a_corrupt_block_is_caught_on_a_streamed_read(tmp_path: Path, corrupt_block: int) -> None:
    store, payloads = _ledger(tmp_path, n=3000)
    settings = settings_for("local", 64 * 1024, read_buffer_size=4096)
    with ReadHandle.open(store, 9, UUID, settings) as handle:
        index = handle.index
        block = corrupt_block % index.block_count
        start, end = index.block_span(block)
    key = data_key(UUID, 9)
    data = bytearray(store.get(key).data)
    # flip a byte inside a payload in the middle of the block: framing stays valid
    at = (start + end) // 2
    data[at] ^= 0x01
    store.put(key, bytes(data), store.head(key).metadata)
    with (
        ReadHandle.open(store, 9, UUID, settings) as handle,
        # the span CRC32C of the damaged span (issue 21, item 6) catches it before any of its
        # entries is returned
        pytest.raises(ChecksumMismatchError, match=r"CRC32C .* the index recorded"),
    ):
        for _ in handle.iter_entries(0, len(payloads) - 1):
            pass
    _wait_no_prefetch_threads()


# --- whole blocks (verification, Spark) ---------------------------------------------------
def test_a_block_is_one_streamed_get_read_in_read_buffer_pieces(tmp_path: Path) -> None:
    from offloader.read.objects import block_refs, fetch_block, load_index

    store, _ = _ledger(tmp_path, n=3000)
    counted = FaultyObjectStore(store)
    refs = block_refs(load_index(store, 9, UUID), 9, UUID)
    ref = refs[1]
    data = fetch_block(counted, ref, read_buffer=4096)
    assert data == store.get_range(ref.data_key, ref.start, ref.end).data
    assert counted.calls["open_range"] == 1 and counted.calls["get_range"] == 0
    assert counted.calls["range_read"] == -(-(ref.end - ref.start) // 4096)
    _wait_no_prefetch_threads()


def test_a_corrupt_or_short_block_is_refused_whole(tmp_path: Path) -> None:
    from offloader.read.objects import block_refs, fetch_block, load_index

    store, _ = _ledger(tmp_path, n=3000)
    refs = block_refs(load_index(store, 9, UUID), 9, UUID)
    key = refs[0].data_key
    data = bytearray(store.get(key).data)
    data[(refs[2].start + refs[2].end) // 2] ^= 0x40
    store.put(key, bytes(data[: refs[3].end - 10]), store.head(key).metadata)
    assert fetch_block(store, refs[1], read_buffer=4096)  # untouched
    with pytest.raises(ChecksumMismatchError, match="block 2 CRC32C"):
        fetch_block(store, refs[2], read_buffer=4096)
    with pytest.raises(IndexInconsistentError, match="block 3 runs to offset"):
        fetch_block(store, refs[3], read_buffer=4096)
    _wait_no_prefetch_threads()


class _OverlongReader:
    """A range body that hands out more bytes than asked (a misbehaving store)."""

    def __init__(self, data: bytes, size: int, metadata: Mapping[str, str]) -> None:
        self._data, self.size, self.metadata = data, size, metadata

    def read(self, n: int) -> bytes:
        out, self._data = self._data[: n + 7], self._data[n + 7 :]
        return out

    def close(self) -> None:
        pass


class _OverlongStore(LocalObjectStore):
    def open_range(self, key: str, start: int, end: int) -> _OverlongReader:  # type: ignore[override]
        whole = self.get(key).data
        return _OverlongReader(whole[start:], len(whole), self.head(key).metadata)


def test_a_block_fetched_into_a_reused_buffer_is_checked_the_same(tmp_path: Path) -> None:
    from offloader.read.objects import block_refs, fetch_block, load_index

    store, _ = _ledger(tmp_path, n=3000)
    refs = block_refs(load_index(store, 9, UUID), 9, UUID)
    size = max(r.end - r.start for r in refs)
    out = memoryview(bytearray(b"\xaa" * (size + 100)))  # dirty, larger than any block
    for ref in refs:
        got = fetch_block(store, ref, read_buffer=4096, out=out)
        assert got == fetch_block(store, ref, read_buffer=4096)
        assert got.obj is out.obj and len(got) == ref.end - ref.start  # type: ignore[union-attr]
        del got
    with pytest.raises(ValueError, match="out holds"):
        fetch_block(store, refs[0], read_buffer=4096, out=out[:10])
    key = refs[0].data_key
    data = bytearray(store.get(key).data)
    data[(refs[1].start + refs[1].end) // 2] ^= 0x40
    store.put(key, bytes(data), store.head(key).metadata)
    with pytest.raises(ChecksumMismatchError, match="block 1 CRC32C"):
        fetch_block(store, refs[1], read_buffer=4096, out=out)
    _wait_no_prefetch_threads()


@pytest.mark.parametrize("into_buffer", [False, True])
def test_a_store_that_sends_too_many_bytes_is_refused(tmp_path: Path, into_buffer: bool) -> None:
    from offloader.read.objects import block_refs, fetch_block, load_index

    _ledger(tmp_path, n=3000)
    store = _OverlongStore(tmp_path / "objects")
    ref = block_refs(load_index(store, 9, UUID), 9, UUID)[0]
    out = memoryview(bytearray(ref.end - ref.start)) if into_buffer else None
    with pytest.raises(IndexInconsistentError, match="block 0"):
        fetch_block(store, ref, read_buffer=4096, out=out)
    _wait_no_prefetch_threads()


def test_region_sums_cover_what_was_taken_even_after_close(tmp_path: Path) -> None:
    """Every chunk the consumer took is summed, also when the prefetcher is closed early; a
    region not received whole has no sum (at once: nothing waits)."""
    from offloader.read.prefetch import RangePrefetcher

    store = LocalObjectStore(tmp_path)
    blob = random.Random(4).randbytes(300_000)
    store.put("blob", blob, {})
    for _ in range(20):  # the close races with the reader: try it at different moments
        prefetch = RangePrefetcher(
            store, "blob", 0, len(blob), chunk=10_000, depth=2, crc_boundaries=(0, 20_000, 300_000)
        )
        taken = prefetch.take() + prefetch.take()
        prefetch.close()
        assert prefetch.region_crc(0, 20_000) == crc32c(taken) == crc32c(blob[:20_000])
        started = time.monotonic()
        assert prefetch.region_crc(20_000, len(blob)) is None
        assert time.monotonic() - started < 1
    _wait_no_prefetch_threads()


# --- a block read on the caller's thread (the Spark source: prefetch=False) ---------------
def test_a_packed_block_read_inline_is_the_same_without_a_thread(tmp_path: Path) -> None:
    from offloader.read.objects import block_refs, load_index, read_block_packed

    store, payloads = _ledger(tmp_path, n=3000)
    counted = FaultyObjectStore(store)
    refs = block_refs(load_index(store, 9, UUID), 9, UUID)
    seen: list[str] = []
    original = threading.Thread.start

    def spy(thread: threading.Thread) -> None:
        seen.append(thread.name)
        original(thread)

    got = []
    for ref in refs:
        threading.Thread.start = spy  # type: ignore[method-assign]
        try:
            inline = read_block_packed(counted, ref, read_buffer=4096, prefetch=False)
        finally:
            threading.Thread.start = original  # type: ignore[method-assign]
        ahead = read_block_packed(store, ref, read_buffer=4096)
        assert (inline.first_entry_id, inline.count) == (ahead.first_entry_id, ahead.count)
        assert bytes(inline.data) == bytes(ahead.data)
        assert bytes(inline.offsets) == bytes(ahead.offsets)
        ends = memoryview(inline.offsets).cast("i")
        got += [bytes(inline.data[ends[i] : ends[i + 1]]) for i in range(inline.count)]
    assert got == payloads
    assert "range-prefetch" not in seen
    assert counted.calls["open_range"] == len(refs) and counted.calls["get_range"] == 0
    _wait_no_prefetch_threads()


def test_a_corrupt_short_missing_or_overlong_block_read_inline_is_refused(
    tmp_path: Path,
) -> None:
    from offloader.read.objects import block_refs, load_index, read_block_packed

    store, _ = _ledger(tmp_path, n=3000)
    refs = block_refs(load_index(store, 9, UUID), 9, UUID)
    key = refs[0].data_key
    data = bytearray(store.get(key).data)
    data[(refs[2].start + refs[2].end) // 2] ^= 0x40
    store.put(key, bytes(data[: refs[3].end - 10]), store.head(key).metadata)
    assert read_block_packed(store, refs[1], read_buffer=4096, prefetch=False).count > 0
    with pytest.raises(ChecksumMismatchError, match="block 2 CRC32C"):
        read_block_packed(store, refs[2], read_buffer=4096, prefetch=False)
    with pytest.raises(IndexInconsistentError, match="block 3 is"):
        read_block_packed(store, refs[3], read_buffer=4096, prefetch=False)
    overlong = _OverlongStore(tmp_path / "objects")
    with pytest.raises(IndexInconsistentError, match="block 0"):
        read_block_packed(overlong, refs[0], read_buffer=4096, prefetch=False)
    store.delete(key)
    with pytest.raises(ObjectNotFound):
        read_block_packed(store, refs[1], read_buffer=4096, prefetch=False)


def test_a_block_fetched_inline_equals_the_prefetched_one(tmp_path: Path) -> None:
    from offloader.read.objects import block_refs, fetch_block, load_index, read_block

    store, payloads = _ledger(tmp_path, n=3000)
    refs = block_refs(load_index(store, 9, UUID), 9, UUID)
    out = memoryview(bytearray(max(r.end - r.start for r in refs)))
    got = []
    for ref in refs:
        assert fetch_block(store, ref, read_buffer=4096, prefetch=False) == fetch_block(
            store, ref, read_buffer=4096
        )
        got += [bytes(e.payload) for e in read_block(store, ref, out=out, prefetch=False)]
    assert got == payloads


# --- span CRC32Cs summed by the prefetch thread; block CRC32Cs combined from them --------
def test_spans_are_summed_on_the_prefetch_thread_and_blocks_combined(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A streamed read of a ledger with span CRC32Cs sums each span once, on the prefetch
    thread as it arrives (the caller compares), and no region of a whole block a second time."""
    store, payloads = _ledger(tmp_path, n=3000)
    settings = settings_for("local", 64 * 1024, read_buffer_size=4096)
    handed: list[int | None] = []
    summed = RangedStream.summed_crc

    def counting(self: RangedStream, start: int, end: int) -> int | None:
        crc = summed(self, start, end)
        handed.append(crc)
        return crc

    monkeypatch.setattr(RangedStream, "summed_crc", counting)
    with ReadHandle.open(store, 9, UUID, settings) as handle:
        got = [e.payload for e in handle.iter_entries(0, len(payloads) - 1)]
        assert got == payloads
        spans = handle._spans
        assert spans is not None and handle.index.block_count >= 3
        # every span was checked, nearly all with the thread's sum (a span that runs past
        # the end of one streamed GET window is summed by the caller)
        assert len(handed) == len(spans.starts)
        assert sum(crc is not None for crc in handed) >= len(spans.starts) - 2
    _wait_no_prefetch_threads()


@pytest.mark.parametrize("where", ["header", "padding"])
def test_a_corrupt_block_header_or_padding_is_caught_with_span_checks(
    tmp_path: Path, where: str
) -> None:
    """The block's CRC32C, combined from its header's and its spans', covers the header's
    reserved bytes (no span holds them); the padding is in the last span."""
    store, payloads = _ledger(tmp_path, n=3000)
    settings = settings_for("local", 64 * 1024, read_buffer_size=4096)
    with ReadHandle.open(store, 9, UUID, settings) as handle:
        start, end = handle.index.block_span(1)
    key = data_key(UUID, 9)
    data = bytearray(store.get(key).data)
    at = start + 100 if where == "header" else end - 1
    data[at] ^= 0x01
    store.put(key, bytes(data), store.head(key).metadata)
    message = r"block 1 CRC32C is" if where == "header" else r"\(span \d+\) have CRC32C"
    with (
        ReadHandle.open(store, 9, UUID, settings) as handle,
        pytest.raises(ChecksumMismatchError, match=message),
    ):
        for _ in handle.iter_entries(0, len(payloads) - 1):
            pass
    _wait_no_prefetch_threads()
