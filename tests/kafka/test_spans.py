"""Span CRC32Cs of remote Kafka objects (formats/kafka/spans.py): joined CRC32Cs equal the
whole's, the stored text round-trips, a damaged span is found, malformed text is refused."""

from __future__ import annotations

import os

import crc32c
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from formats.errors import CorruptDataError
from formats.kafka.spans import (
    SPAN_SIZE,
    ObjectChecksums,
    crc32c_combine,
    crc32c_combine_py,
    join_crcs,
    span_size_for,
)


@settings(max_examples=60, deadline=None)
@given(st.binary(max_size=3000), st.binary(max_size=3000))
def test_combine_is_the_crc_of_the_concatenation(a: bytes, b: bytes) -> None:
    assert crc32c_combine(crc32c.crc32c(a), crc32c.crc32c(b), len(b)) == crc32c.crc32c(a + b)


@settings(max_examples=300, deadline=None)
@given(
    st.integers(0, 2**32 - 1),
    st.integers(0, 2**32 - 1),
    st.one_of(st.integers(0, 1 << 16), st.integers(0, 1 << 45)),
)
def test_the_c_combine_equals_its_pure_twin(a: int, b: int, length: int) -> None:
    from formats import _speedups  # type: ignore[attr-defined]

    assert _speedups.crc32c_combine(a, b, length) == crc32c_combine_py(a, b, length)
    assert crc32c_combine(a, b, length) == crc32c_combine_py(a, b, length)


def test_the_c_combine_refuses_what_is_not_a_crc() -> None:
    from formats import _speedups  # type: ignore[attr-defined]

    with pytest.raises(ValueError, match="not a 32-bit value"):
        _speedups.crc32c_combine(1 << 32, 0, 1)


def test_large_pieces_and_the_whole_object() -> None:
    data = os.urandom(3 * SPAN_SIZE + 12345)
    checks = ObjectChecksums.of(data)
    assert len(checks.crcs) == 4 and checks.whole_crc32c == crc32c.crc32c(data)
    pieces = [data[:SPAN_SIZE], data[SPAN_SIZE : 3 * SPAN_SIZE], data[3 * SPAN_SIZE :]]
    joined = join_crcs([crc32c.crc32c(p) for p in pieces], [len(p) for p in pieces])
    assert joined == crc32c.crc32c(data)
    assert ObjectChecksums.decode(checks.encode()) == checks
    assert span_size_for(64 << 20) == SPAN_SIZE and span_size_for(4096) == 4096


@settings(max_examples=60, deadline=None)
@given(st.binary(min_size=1, max_size=5000), st.integers(1, 700), st.data())
def test_covering_ranges_check_and_a_flipped_bit_is_found(
    data: bytes, span: int, draw: st.DataObject
) -> None:
    checks = ObjectChecksums.of(data, span)
    start = draw.draw(st.integers(0, len(data) - 1))
    end = draw.draw(st.integers(start + 1, len(data)))
    a, b = checks.covering(start, end)
    assert a % span == 0 and a <= start and end <= b and (b % span == 0 or b == len(data))
    assert checks.first_bad_span(data[a:b], a) is None
    at = draw.draw(st.integers(a, b - 1))
    bad = bytearray(data[a:b])
    bad[at - a] ^= 1 << draw.draw(st.integers(0, 7))
    assert checks.first_bad_span(bytes(bad), a) == at // span
    if (b - 1) % span:  # a read cut inside a span is a bad span too
        assert checks.first_bad_span(data[a : b - 1], a) is not None


@pytest.mark.parametrize(
    "text",
    ["", "10:4", "10:4:AAAA", "x:4:AAAAAAAAAAAAAAAA", "10:0:", "10:4:!!!!", "5:4:AAAAAA=="],
)
def test_malformed_checksums_are_refused(text: str) -> None:
    with pytest.raises(CorruptDataError):
        ObjectChecksums.decode(text)
