"""CRC32C combine: ``crc32c_combine`` in C (``formats/_speedups.c``, ``_crc32c.h``) equals its
pure twin and the CRC32C of the joined bytes; ``crc32c_concat`` folds pieces; the
``SpanSummer`` (spans summed as a block is framed) and ``block_and_span_crcs`` give the block's
and the spans' CRC32Cs a second pass over the finished block would give."""

from __future__ import annotations

import os

import crc32c
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from formats import crc_combine
from formats.block import BlockWriter
from formats.crc_combine import crc32c_combine, crc32c_combine_py, crc32c_concat
from formats.span_crc import SpanSummer, block_and_span_crcs, block_span_crcs, span_cuts
from formats.wire import BLOCK_HEADER_LEN, ENTRY_HEADER_LEN

CRCS = st.integers(0, 0xFFFFFFFF)


def test_the_c_combine_is_built() -> None:
    """make install builds formats._speedups: the combine in use is the C one (the pure twin
    when pure Python was asked for)."""
    if os.environ.get("LEDGER_OFFLOADER_PURE_PYTHON", "") not in ("", "0"):
        assert crc32c_combine is crc32c_combine_py
        return
    assert crc_combine._C is not None
    assert crc32c_combine is crc_combine._C.crc32c_combine


@settings(max_examples=300, deadline=None)
@given(a=st.binary(max_size=300), b=st.binary(max_size=3000), seed=CRCS)
@example(a=b"12345", b=b"6789", seed=0)
@example(a=b"", b=b"", seed=7)
def test_combine_is_the_crc32c_of_the_joined_bytes(a: bytes, b: bytes, seed: int) -> None:
    crc_a = crc32c.crc32c(a, seed)  # A continuing from any earlier bytes
    expected = crc32c.crc32c(a + b, seed)
    assert crc32c_combine(crc_a, crc32c.crc32c(b), len(b)) == expected
    assert crc32c_combine_py(crc_a, crc32c.crc32c(b), len(b)) == expected


@settings(max_examples=300, deadline=None)
@given(crc1=CRCS, crc2=CRCS, len2=st.one_of(st.integers(0, 1 << 20), st.integers(0, 2**63 - 1)))
@example(crc1=0xE3069283, crc2=0, len2=0)
@example(crc1=0xFFFFFFFF, crc2=0xFFFFFFFF, len2=2**40)
def test_the_c_combine_equals_its_pure_twin(crc1: int, crc2: int, len2: int) -> None:
    assert crc32c_combine(crc1, crc2, len2) == crc32c_combine_py(crc1, crc2, len2)


def test_combine_refuses_values_that_are_not_crcs() -> None:
    for combine in (crc32c_combine, crc32c_combine_py):
        with pytest.raises((ValueError, OverflowError)):
            combine(2**32, 0, 1)
        with pytest.raises((ValueError, OverflowError)):
            combine(0, 2**32, 1)
        with pytest.raises((ValueError, OverflowError)):
            combine(0, 0, -1)
        with pytest.raises((ValueError, OverflowError)):
            combine(-1, 0, 1)


@settings(max_examples=100, deadline=None)
@given(pieces=st.lists(st.binary(max_size=500), max_size=12), head=st.binary(max_size=64))
def test_concat_folds_pieces(pieces: list[bytes], head: bytes) -> None:
    folded = crc32c_concat(((crc32c.crc32c(p), len(p)) for p in pieces), crc32c.crc32c(head))
    assert folded == crc32c.crc32c(head + b"".join(pieces))


@st.composite
def blocks(draw: st.DrawFn) -> tuple[list[bytes], int, list[int], list[list[bytes]]]:
    """Payloads cut into batches, the block size (with padding) and fine points (entry
    starts, block offsets) inside the block."""
    payloads = draw(st.lists(st.binary(max_size=300), min_size=1, max_size=30))
    framed = sum(ENTRY_HEADER_LEN + len(p) for p in payloads)
    size = BLOCK_HEADER_LEN + framed + draw(st.integers(0, 200))
    starts, pos = [], BLOCK_HEADER_LEN
    for p in payloads:
        starts.append(pos)
        pos += ENTRY_HEADER_LEN + len(p)
    points = sorted(set(draw(st.lists(st.sampled_from(starts), max_size=8))))
    cuts, batches = sorted(set(draw(st.lists(st.integers(0, len(payloads)), max_size=6)))), []
    prev = 0
    for c in [*cuts, len(payloads)]:
        batches.append(payloads[prev:c])
        prev = c
    return payloads, size, points, batches


@settings(max_examples=200, deadline=None)
@given(case=blocks(), offset=st.sampled_from([0, 5 << 20, 2**40]))
def test_span_summer_gives_a_second_pass_crcs(
    case: tuple[list[bytes], int, list[int], list[list[bytes]]], offset: int
) -> None:
    """Summed as framed, batch by batch (any batch cuts, any spans, padding or none), the
    spans' and block's CRC32Cs are those of the finished block."""
    _, size, points, batches = case
    cuts = span_cuts(offset, offset + BLOCK_HEADER_LEN, offset + size, [offset + p for p in points])
    bounds = [cuts[0][0] - offset, *(end - offset for _, end in cuts)]
    summer = SpanSummer(bounds)
    block = BlockWriter(size).write_block_batches(0, batches, size, summer)
    crc, spans = summer.finish(block)
    assert crc == crc32c.crc32c(block)
    assert spans == block_span_crcs(block, offset, cuts)
    assert block_and_span_crcs(block, offset, cuts) == (crc, spans)
    assert block_and_span_crcs(block, offset, []) == (crc, [])


def test_span_summer_refuses_bytes_out_of_order() -> None:
    summer = SpanSummer([BLOCK_HEADER_LEN, BLOCK_HEADER_LEN + 10])
    view = memoryview(bytes(BLOCK_HEADER_LEN + 10))
    with pytest.raises(ValueError, match="do not follow"):
        summer(view, BLOCK_HEADER_LEN + 1, BLOCK_HEADER_LEN + 5)
    summer(view, BLOCK_HEADER_LEN, BLOCK_HEADER_LEN + 5)
    with pytest.raises(ValueError, match="summed up to"):
        summer.finish(view)
    with pytest.raises(ValueError, match="must rise"):
        SpanSummer([BLOCK_HEADER_LEN, BLOCK_HEADER_LEN])
