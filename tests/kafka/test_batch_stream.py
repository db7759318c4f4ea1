"""formats.kafka.batch_stream: batches fed in pieces cut anywhere give the headers (and, on
damaged bytes, the error type and offset) of the whole-buffer walk, iter_batch_headers."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from formats.kafka.batch import BatchHeader, iter_batch_headers
from formats.kafka.batch_stream import BatchStream
from formats.kafka.encode import NewRecord, encode_batch
from formats.kafka.errors import KafkaChecksumError, KafkaFormatError, KafkaTruncatedError
from formats.kafka.spans import span_crcs


def _segment(sizes: list[int]) -> bytes:
    out, offset = b"", 0
    for n, size in enumerate(sizes):
        rows = [NewRecord(1000 + n, None, bytes([n % 251]) * size)] * (1 + n % 3)
        out += encode_batch(rows, base_offset=offset)
        offset += len(rows)
    return out


def _fed(data: bytes, cuts: list[int]) -> list[BatchHeader]:
    stream = BatchStream(source="seg.log")
    found: list[BatchHeader] = []
    last = 0
    for cut in [*sorted(c for c in cuts if 0 < c < len(data)), len(data)]:
        found += stream.feed(memoryview(data)[last:cut])
        last = cut
    stream.close()
    return found


def _walk(data: bytes) -> list[BatchHeader]:
    return list(iter_batch_headers(data, source="seg.log"))


def _error(call: object) -> tuple[type[BaseException], int | None] | None:
    try:
        call()  # type: ignore[operator]
    except KafkaFormatError as exc:
        return type(exc), getattr(exc, "offset", None)
    return None


segments = st.lists(st.integers(0, 300), min_size=1, max_size=8).map(_segment)


@settings(max_examples=150, deadline=None)
@given(data=segments, cuts=st.lists(st.integers(0, 3000), max_size=12))
def test_pieces_cut_anywhere_give_the_walk_s_headers(data: bytes, cuts: list[int]) -> None:
    assert _fed(data, cuts) == _walk(data)


@settings(max_examples=150, deadline=None)
@given(
    data=segments,
    cuts=st.lists(st.integers(0, 3000), max_size=6),
    flip=st.integers(0, 10**6),
    cut_end=st.integers(0, 80),
)
def test_damaged_bytes_give_the_walk_s_error(
    data: bytes, cuts: list[int], flip: int, cut_end: int
) -> None:
    damaged = bytearray(data)
    damaged[flip % len(damaged)] ^= 0x5A
    damaged = damaged[: len(damaged) - cut_end] if cut_end < len(damaged) else damaged
    blob = bytes(damaged)
    walked = _error(lambda: _walk(blob))
    fed = _error(lambda: _fed(blob, cuts))
    if walked is None:
        assert fed is None and _fed(blob, cuts) == _walk(blob)
    else:
        assert fed == walked


def test_a_bad_crc_and_a_cut_batch_name_their_file_offsets() -> None:
    data = bytearray(_segment([100, 100, 100]))
    second = _walk(bytes(data))[1]
    data[second.position + 70] ^= 1
    stream = BatchStream(source="seg.log")
    stream.feed(memoryview(data)[: second.position + 30])
    with pytest.raises(KafkaChecksumError, match=r"seg\.log") as info:
        stream.feed(memoryview(data)[second.position + 30 :])
    assert info.value.offset == second.position
    stream = BatchStream(source="seg.log")
    whole = _segment([100, 100])
    assert len(stream.feed(whole[:-5])) == 1 and stream.pending
    with pytest.raises(KafkaTruncatedError) as cut:
        stream.close()
    assert cut.value.offset == _walk(whole)[1].position


@settings(max_examples=120, deadline=None)
@given(
    data=segments,
    cuts=st.lists(st.integers(0, 3000), max_size=10),
    span=st.integers(1, 900),
    fast=st.booleans(),
)
def test_span_crcs_from_the_same_read_are_the_spans_crcs(
    data: bytes, cuts: list[int], span: int, fast: bool
) -> None:
    import formats.kafka.batch_stream as module

    saved = module._FAST_COMBINE
    module._FAST_COMBINE = fast and saved  # the pure path: the spans' second pass
    try:
        stream = BatchStream(source="seg.log", span=span)
        found: list[BatchHeader] = []
        spans: list[int] = []
        last = 0
        for cut in [*sorted(c for c in cuts if 0 < c < len(data)), len(data)]:
            found += stream.feed(memoryview(data)[last:cut])
            spans += stream.take_spans()
            last = cut
        stream.close()
        spans += stream.take_spans(final=True)
    finally:
        module._FAST_COMBINE = saved
    assert found == _walk(data)
    assert tuple(spans) == span_crcs(data, span)
