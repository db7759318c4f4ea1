"""BlockPacker: a block packed chunk by chunk gives exactly pack_block_entries' verdict on the
joined block (the same entries, or the same typed error at the same offset)."""

from __future__ import annotations

import random
from itertools import pairwise

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from formats.block import PackedEntries, pack_block_entries
from formats.block_packer import BlockPacker
from formats.encode import encode_ledger
from formats.errors import FormatError
from formats.index import decode_index
from formats.ledger_metadata import LedgerMetadata


def _blocks() -> list[tuple[int, bytes]]:
    rng = random.Random(2)
    sizes = [0, 1, 5, 100, 3000, 9000, 20000]
    payloads = [rng.randbytes(rng.choice(sizes)) for _ in range(300)]
    metadata = LedgerMetadata.closed_default(
        last_entry_id=len(payloads) - 1, length=sum(map(len, payloads))
    )
    enc = encode_ledger(payloads, metadata, 64 * 1024)
    index = decode_index(enc.index)
    spans = [index.block_span(b) for b in range(index.block_count)]
    return [(start, enc.data[start:end]) for start, end in spans]


BLOCKS = _blocks()


def _verdict(pieces: list[PackedEntries] | PackedEntries) -> tuple[int | None, list[bytes]]:
    if isinstance(pieces, PackedEntries):
        pieces = [pieces]
    ids = [p.first_entry_id for p in pieces if p.count]
    payloads = [bytes(x) for p in pieces for x in p.payloads()]
    return (ids[0] if ids else None), payloads


def _judge(run: object) -> tuple[str, object]:
    try:
        got = run()  # type: ignore[operator]
    except FormatError as exc:
        return "error", (type(exc), exc.offset, str(exc))
    return "entries", _verdict(got)


#: one dirty buffer, larger than any block, that the packer may be given again and again
DIRTY = bytearray(random.Random(3).randbytes(80 * 1024))


def _packed_in_chunks(
    block: bytes, start: int, cuts: list[int], out: memoryview | None = None
) -> PackedEntries:
    packer = BlockPacker(len(block), base_offset=start, out=out)
    bounds = [0, *sorted(c for c in cuts if 0 < c < len(block)), len(block)]
    for a, b in pairwise(bounds):
        packer.feed(block[a:b])
    return packer.finish()


@settings(max_examples=400, deadline=None)
@given(
    which=st.integers(0, len(BLOCKS) - 1),
    flips=st.lists(st.tuples(st.floats(0, 1), st.sampled_from([0x01, 0x80, 0xFF])), max_size=3),
    tail=st.booleans(),
    cuts=st.lists(st.integers(1, 70000), max_size=40),
    reuse=st.booleans(),
)
def test_chunked_packing_agrees_with_the_whole_block(
    which: int, flips: list[tuple[float, int]], tail: bool, cuts: list[int], reuse: bool
) -> None:
    start, block = BLOCKS[which]
    bad = bytearray(block)
    for where, mask in flips:
        # damage anywhere, or near the end (the last entries and the padding)
        low = len(bad) - 200 if tail else 0
        bad[min(len(bad) - 1, low + int(where * (len(bad) - low)))] ^= mask
    data = bytes(bad)
    out = memoryview(DIRTY)[: len(data) + 100] if reuse else None  # what the last one left
    chunked = _judge(lambda: _packed_in_chunks(data, start, cuts, out))
    whole = _judge(lambda: pack_block_entries(data, base_offset=start))
    assert chunked == whole


@pytest.mark.parametrize("chunk", [1, 7, 12, 13, 128, 4096, 1 << 20])
def test_every_chunk_size_packs_every_block(chunk: int) -> None:
    for start, block in BLOCKS:
        cuts = list(range(chunk, len(block), chunk))
        assert _verdict(_packed_in_chunks(block, start, cuts)) == _verdict(
            pack_block_entries(block, base_offset=start)
        )


def test_nothing_is_raised_before_finish_and_short_feeds_are_refused() -> None:
    start, block = BLOCKS[0]
    bad = bytearray(block)
    bad[200] ^= 0xFF  # inside the first entry's header or payload
    packer = BlockPacker(len(block), base_offset=start)
    packer.feed(bytes(bad[:5000]))
    with pytest.raises(ValueError, match="bytes fed"):
        packer.finish()


def test_a_given_buffer_receives_the_payloads_and_must_be_large_and_writable() -> None:
    start, block = BLOCKS[1]
    out = bytearray(b"\xee" * (len(block) + 7))
    packed = _packed_in_chunks(block, start, [1000, 5000], memoryview(out))
    assert _verdict(packed) == _verdict(pack_block_entries(block, base_offset=start))
    assert packed.data.obj is out  # no copy: the payloads live in the caller's buffer
    with pytest.raises(ValueError, match="writable"):
        BlockPacker(len(block), out=bytearray(len(block) - 1))
    with pytest.raises(ValueError, match="writable"):
        BlockPacker(len(block), out=memoryview(bytes(len(block))))
