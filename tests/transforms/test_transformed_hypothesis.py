"""Random ledgers offloaded through the transformed writer and read back through the view:
random entry sizes, block sizes, chunk sizes, read buffers and policies, whole and in ranges,
with the streamed (read-ahead) and the ranged read paths."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from formats.layout import max_entry_size
from offloader.config import OffloadSettings
from offloader.keyring import KeyRing
from offloader.ledgers.base import InMemoryLedger
from offloader.offload.transformed import WriteTransform
from offloader.offload.writer import offload_ledger
from offloader.read.handle import ReadHandle
from offloader.store.local import LocalObjectStore
from tests.offload.conftest import new_uuid


@st.composite
def cases(
    draw: st.DrawFn,
) -> tuple[list[bytes], OffloadSettings, WriteTransform, list[tuple[int, int]]]:
    block = draw(st.integers(300, 6000))
    biggest = min(max_entry_size(block), 2500)
    sizes = draw(st.lists(st.integers(0, biggest), min_size=1, max_size=60))
    texty = draw(st.booleans())
    payloads = [(b"abc" * n)[:n] if texty else os.urandom(n) for n in sizes]
    config = OffloadSettings(
        enforce_min_block_size=False,
        max_block_size=block,
        read_buffer_size=draw(st.sampled_from([1024, 4096, 65536])),
        read_ahead=draw(st.booleans()),
        offload_concurrency=draw(st.integers(1, 3)),
        ledger_read_batch_entries=7,
    )
    level = draw(st.sampled_from([None, 1, 3]))
    encrypt = draw(st.booleans()) or level is None
    transform = WriteTransform(
        draw(st.integers(16, 2048)), level, "k1" if encrypt else None, b"" if encrypt else None
    )
    ranges = draw(
        st.lists(
            st.tuples(st.integers(0, len(sizes) - 1), st.integers(0, len(sizes) - 1)).map(
                lambda t: (min(t), max(t))
            ),
            min_size=1,
            max_size=5,
        )
    )
    return payloads, config, transform, ranges


@settings(max_examples=40, deadline=None)
@given(cases())
def test_random_transformed_ledgers_round_trip(
    case: tuple[list[bytes], OffloadSettings, WriteTransform, list[tuple[int, int]]],
) -> None:
    payloads, config, transform, ranges = case
    with tempfile.TemporaryDirectory() as root:
        ring = KeyRing(Path(root) / "keys")
        ring.create("k1")
        config = config.replace(key_ring=str(ring.path))
        if transform.key_id is not None:
            transform = WriteTransform(
                transform.chunk_size, transform.zstd_level, "k1", ring.key("k1")
            )
        store = LocalObjectStore(Path(root) / "objects")
        uuid = new_uuid()
        result = offload_ledger(
            InMemoryLedger(42, payloads), store, uuid, config, transform=transform
        )
        assert store.head(f"{uuid}-ledger-42").size == result.data_size
        with ReadHandle.open(store, 42, uuid, config) as handle:
            assert [e.payload for e in handle.read(0, len(payloads) - 1)] == payloads
            for first, last in ranges:
                got = handle.read(first, last)
                assert [e.payload for e in got] == payloads[first : last + 1]
