"""Ranged reads into the caller's buffer (``read_into``, ``ResumingRangeReader.readinto``,
``S3Body.readinto``): the same bytes as ``read`` on every backend; on S3 straight from the
socket (no bytes object in between), the connection back in the pool at the end, a dropped
body resumed at the right offset; and a block fetched that way is checked as before."""

from __future__ import annotations

from typing import Any

import pytest

from formats.encode import encode_ledger
from formats.keys import object_user_metadata
from formats.ledger_metadata import LedgerMetadata
from offloader.errors import ChecksumMismatchError, StoreError, StoreUnavailable
from offloader.read.objects import block_refs, fetch_block, read_block
from offloader.store.base import ObjectStore
from offloader.store.ranges import Body, ResumingRangeReader, read_into
from tests.contract.backends import make_s3_store, payload
from tests.servers.endpoint import S3Endpoint

DATA = payload(10_000, seed=11)


def _drain_into(reader: Any, step: int) -> bytes:
    out = bytearray(len(DATA) + step)
    view = memoryview(out)
    filled = 0
    while n := read_into(reader, view[filled : filled + step]):
        assert 0 < n <= step
        filled += n
    return bytes(out[:filled])


def test_read_into_streams_the_bytes(store: ObjectStore) -> None:
    data = payload(300_000, seed=12)
    store.put("obj", data, {})
    reader = store.open_range("obj", 1000, 250_000)
    out = bytearray(300_000)
    view = memoryview(out)
    filled = 0
    while n := read_into(reader, view[filled : filled + 64 * 1024]):
        filled += n
    assert bytes(out[:filled]) == data[1000:250_000]
    assert read_into(reader, view[:10]) == 0  # the range is consumed
    reader.close()


# --- ResumingRangeReader.readinto over bodies with and without readinto --------------------
class _Body:
    """Serves DATA from ``offset``; raises StoreUnavailable once ``fail_after`` bytes are out."""

    def __init__(self, offset: int, fail_after: int | None) -> None:
        self.pos = offset
        self.fail_after = fail_after

    def read(self, n: int) -> bytes:
        if self.fail_after is not None:
            if self.fail_after <= 0:
                raise StoreUnavailable("connection reset")
            n = min(n, self.fail_after)
            self.fail_after -= n
        data = DATA[self.pos : self.pos + n]
        self.pos += len(data)
        return data

    def close(self) -> None:
        pass


class _IntoBody(_Body):
    def __init__(self, offset: int, fail_after: int | None) -> None:
        super().__init__(offset, fail_after)
        self.into_calls = 0

    def readinto(self, view: memoryview) -> int:
        self.into_calls += 1
        data = self.read(len(view))
        view[: len(data)] = data
        return len(data)


class _Opener:
    def __init__(self, kind: type[_Body], fails: list[int | None]) -> None:
        self.kind = kind
        self.fails = fails
        self.offsets: list[int] = []
        self.bodies: list[_Body] = []

    def __call__(self, offset: int) -> tuple[Body, int]:
        self.offsets.append(offset)
        body = self.kind(offset, self.fails.pop(0) if self.fails else None)
        self.bodies.append(body)
        return body, len(DATA)


@pytest.mark.parametrize("kind", [_Body, _IntoBody])
def test_readinto_resumes_from_the_first_byte_not_written(kind: type[_Body]) -> None:
    opener = _Opener(kind, [1500, 2000, None])
    reader = ResumingRangeReader(opener, 100, 9000, attempts=3, what="obj")
    assert _drain_into(reader, 700) == DATA[100:9000]
    assert opener.offsets == [100, 1600, 3600]
    if kind is _IntoBody:
        assert all(b.into_calls for b in opener.bodies)  # type: ignore[attr-defined]


def test_readinto_gives_up_after_the_attempts_in_a_row() -> None:
    opener = _Opener(_IntoBody, [10, 0, 0, 0])
    reader = ResumingRangeReader(opener, 0, 9000, attempts=3, what="obj")
    view = memoryview(bytearray(100))
    assert reader.readinto(view) == 10
    with pytest.raises(StoreUnavailable, match="gave up after 3 attempts at offset 10"):
        reader.readinto(view)


def test_a_body_giving_more_than_asked_is_refused_before_the_copy() -> None:
    class Greedy(_Body):
        def read(self, n: int) -> bytes:
            return DATA[: n + 5]

    reader = ResumingRangeReader(_Opener(Greedy, []), 0, 9000, attempts=3, what="obj")
    out = bytearray(b"\0" * 20)
    with pytest.raises(StoreError, match="asked for 10 bytes, got 15"):
        reader.readinto(memoryview(out)[:10])
    assert out == bytearray(20)  # nothing written
    with pytest.raises(StoreError, match="asked for 10 bytes, got 15"):
        read_into(Greedy(0, None), memoryview(out)[:10])


# --- S3: straight from the socket ------------------------------------------------------------
def _pool_connections(store: Any) -> int:
    """Connections the S3 client's urllib3 pools opened so far."""
    pools = store._client._endpoint.http_session._manager.pools
    keys = pools.keys()  # urllib3's container refuses iteration itself
    return sum(pools[key].num_connections for key in keys)


@pytest.mark.s3
def test_s3_readinto_is_direct_and_gives_the_connection_back(
    s3_endpoint: S3Endpoint, s3_bucket: str
) -> None:
    store = make_s3_store(s3_endpoint, s3_bucket)
    data = payload(3 * 1024 * 1024 + 17, seed=13)
    store.put("obj", data, {})
    out = memoryview(bytearray(len(data)))
    before = _pool_connections(store)
    for start, end in [(0, len(data)), (5, 2 * 1024 * 1024), (1000, len(data) + 50)]:
        reader = store.open_range("obj", start, end)
        body = reader._body  # type: ignore[attr-defined]
        filled, want, reads = 0, min(end, len(data)) - start, 0
        while n := read_into(reader, out[filled : filled + 1024 * 1024]):
            filled += n
            reads += 1
        assert filled == want
        assert bytes(out[:filled]) == data[start : start + want]
        assert body.direct_reads == reads >= 2  # from http.client into out, not through bytes
        reader.close()
    # every body read to its end went back to the pool: one connection served the three
    assert _pool_connections(store) - before <= 1
    store.close()


@pytest.mark.s3
def test_s3_readinto_resumes_after_a_dropped_connection(
    s3_endpoint: S3Endpoint, s3_bucket: str
) -> None:
    store = make_s3_store(s3_endpoint, s3_bucket)
    data = payload(2 * 1024 * 1024, seed=14)
    store.put("obj", data, {})
    reader = store.open_range("obj", 0, len(data))
    out = memoryview(bytearray(len(data)))
    assert read_into(reader, out[:1000]) == 1000
    reader._body._body.close()  # type: ignore[attr-defined]  # as a dropped connection
    filled = 1000
    while n := read_into(reader, out[filled : filled + 300_000]):
        filled += n
    assert bytes(out[:filled]) == data
    reader.close()
    store.close()


@pytest.mark.s3
def test_s3_block_fetched_into_a_buffer_is_checked(
    s3_endpoint: S3Endpoint, s3_bucket: str
) -> None:
    payloads = [payload(900 + i % 7, seed=i) for i in range(600)]
    enc = encode_ledger(
        payloads,
        LedgerMetadata.closed_default(
            last_entry_id=len(payloads) - 1, length=sum(len(p) for p in payloads)
        ),
        64 * 1024,
    )
    from formats.index import decode_index

    store = make_s3_store(s3_endpoint, s3_bucket)
    uuid = "5c1f2b0e-0a47-4c1e-9b5a-6f7d8e9a0b1c"
    refs = block_refs(decode_index(enc.index), 3, uuid)
    assert len(refs) > 3
    store.put(refs[0].data_key, enc.data, object_user_metadata("data"))
    out = memoryview(bytearray(max(r.end - r.start for r in refs)))
    got = []
    for ref in refs:
        block = fetch_block(store, ref, read_buffer=8192, out=out, prefetch=False)
        assert bytes(block) == enc.data[ref.start : ref.end]
        got += [bytes(e.payload) for e in read_block(store, ref, out=out, prefetch=False)]
    assert got == payloads
    corrupt = bytearray(enc.data)
    corrupt[(refs[2].start + refs[2].end) // 2] ^= 0x10
    store.put(refs[0].data_key, bytes(corrupt), object_user_metadata("data"))
    assert bytes(fetch_block(store, refs[1], out=out, prefetch=False)) == bytes(
        enc.data[refs[1].start : refs[1].end]
    )
    with pytest.raises(ChecksumMismatchError, match="block 2 CRC32C"):
        fetch_block(store, refs[2], read_buffer=8192, out=out, prefetch=False)
    store.close()
