"""Random ledgers (entry sizes including 0, random small block and buffer sizes) offloaded and
read back: whole, and in random ranges. Many on a local store, a few on moto's server."""

from __future__ import annotations

import tempfile

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from devservers.endpoint import S3Endpoint
from formats.layout import max_entry_size
from offloader.config import OffloadSettings
from offloader.ledgers.base import InMemoryLedger
from offloader.offload.writer import offload_ledger
from offloader.read.handle import ReadHandle
from offloader.store.base import ObjectStore
from offloader.store.local import LocalObjectStore
from tests.offload.conftest import new_uuid, s3_store

Case = tuple[list[bytes], int, int, bool, list[tuple[int, int]]]


@st.composite
def ledgers(draw: st.DrawFn, min_block: int = 300) -> Case:
    """Payloads, block size, read buffer, extension on/off, ranges to read."""
    block = draw(st.integers(min_value=min_block, max_value=6000))
    biggest = min(max_entry_size(block), 2500)
    sizes = draw(st.lists(st.one_of(st.just(0), st.integers(0, biggest)), min_size=1, max_size=80))
    payloads = [bytes([(i * 7 + j) % 256 for j in range(n)]) for i, n in enumerate(sizes)]
    buffer = draw(st.sampled_from([1024, 1500, 4096, 65536]))
    extension = draw(st.booleans())
    ranges = draw(
        st.lists(
            st.tuples(st.integers(0, len(sizes) - 1), st.integers(0, len(sizes) - 1)).map(
                lambda t: (min(t), max(t))
            ),
            min_size=1,
            max_size=8,
        )
    )
    return payloads, block, buffer, extension, ranges


def _round_trip(
    store: ObjectStore,
    payloads: list[bytes],
    block: int,
    buffer: int,
    extension: bool,
    ranges: list[tuple[int, int]],
) -> None:
    config = OffloadSettings(
        enforce_min_block_size=False,
        max_block_size=block,
        read_buffer_size=buffer,
        write_index_extension=extension,
        offload_concurrency=3,
        ledger_read_batch_entries=7,
    )
    uuid = new_uuid()
    offload_ledger(InMemoryLedger(42, payloads), store, uuid, config)
    with ReadHandle.open(store, 42, uuid, config) as handle:
        assert handle.last_add_confirmed == len(payloads) - 1
        assert [e.payload for e in handle.read(0, len(payloads) - 1)] == payloads
        for first, last in ranges:
            got = handle.read(first, last)
            assert [e.entry_id for e in got] == list(range(first, last + 1))
            assert [e.payload for e in got] == payloads[first : last + 1]


@settings(max_examples=60, deadline=None)
@given(ledgers())
def test_random_ledgers_local(case: Case) -> None:
    with tempfile.TemporaryDirectory() as root:
        _round_trip(LocalObjectStore(root), *case)


@pytest.mark.s3
@settings(max_examples=6, deadline=None)
@given(ledgers(min_block=1024))  # moto's test server refuses non-final parts below 1 KiB
def test_random_ledgers_moto(moto_endpoint: S3Endpoint, case: Case) -> None:
    store = s3_store(moto_endpoint)
    try:
        _round_trip(store, *case)
    finally:
        store.close()
