"""Span batches: ``EntrySpans``, ``frame_spans`` (C and its Python twin give the bytes
``frame_entries`` gives for the same payloads), the C CRC32C (the ``crc32c`` package's values),
``record_spans`` (C and twin alike on valid, damaged and nonsensical input), and
``BlockWriter`` framing span batches."""

from __future__ import annotations

import os
import struct
from array import array
from pathlib import Path
from typing import Any

import crc32c
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from formats import framing
from formats.block import BlockWriter, encode_block
from formats.errors import CorruptDataError
from formats.spans import EntrySpans, SpanBatch

try:
    from formats import _speedups  # type: ignore[attr-defined]
except ImportError:  # tests/formats/test_framing.py::test_the_c_loops_are_built says why
    _speedups = None


def _built() -> Any:
    """The C module; these parity tests fail (not skip) when it was not built."""
    assert _speedups is not None, "formats._speedups is not built: run `make install`"
    return _speedups


def _q(values: list[int]) -> array[int]:
    return array("q", values)


def _outcome(call: Any) -> tuple[str, Any]:
    """("ok", result) or ("error", (exception type, message))."""
    try:
        return "ok", call()
    except (ValueError, TypeError) as exc:
        return "error", (type(exc), str(exc))


# --- EntrySpans ---------------------------------------------------------------------------
def test_entry_spans_checks_its_arrays() -> None:
    data = b"hello world"
    spans = EntrySpans(data, _q([0, 6, 11]), _q([5, 5, 0]))
    assert spans.count == 3
    assert [bytes(spans.payload(i)) for i in range(3)] == [b"hello", b"world", b""]
    assert EntrySpans(memoryview(bytearray(data))[2:], _q([0]), _q([3])).payload(0) == b"llo"
    with pytest.raises(TypeError, match=r"array\('q'\)"):
        EntrySpans(data, array("i", [0]), _q([1]))
    with pytest.raises(TypeError, match=r"array\('q'\)"):
        EntrySpans(data, [0], _q([1]))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="2 starts but 1 lengths"):
        EntrySpans(data, _q([0, 1]), _q([1]))
    bad = EntrySpans(data, _q([8, -1, 0]), _q([4, 1, -1]))
    for i in range(3):
        with pytest.raises(ValueError, match=f"span {i}"):
            bad.payload(i)


# --- frame_spans --------------------------------------------------------------------------
@st.composite
def span_cases(draw: st.DrawFn, *, in_bounds: bool) -> tuple[bytes, list[int], list[int]]:
    """(data, starts, lengths): spans inside ``data``, or also anywhere at all."""
    data = draw(st.binary(max_size=600))
    starts: list[int] = []
    lengths: list[int] = []
    for _ in range(draw(st.integers(0, 25))):
        if in_bounds or draw(st.integers(0, 5)):
            start = draw(st.integers(0, len(data)))
            length = draw(st.integers(0, len(data) - start))
        else:
            wild = st.integers(-(2**62), 2**62) | st.integers(-3, len(data) + 3)
            start, length = draw(wild), draw(wild)
        starts.append(start)
        lengths.append(length)
    return data, starts, lengths


def _frame_spans(
    impl: Any, size: int, pos: int, spans: Any, index: int, count: int, limit: int
) -> tuple[tuple[str, Any], bytes]:
    data, starts, lengths = spans
    out = bytearray(b"\xee" * size)
    result = _outcome(
        lambda: impl(out, pos, 1000, data, _q(starts), _q(lengths), index, count, limit)
    )
    return result, bytes(out)


@settings(max_examples=300)
@given(
    spans=span_cases(in_bounds=True),
    pos=st.integers(0, 20),
    slack=st.integers(-200, 100),
    window=st.tuples(st.integers(0, 30), st.integers(0, 30)),
)
def test_frame_spans_frames_what_frame_entries_frames(
    spans: tuple[bytes, list[int], list[int]],
    pos: int,
    slack: int,
    window: tuple[int, int],
) -> None:
    """In-bounds spans: C, the twin and frame_entries on the payload list write the same bytes
    and stop at the same entry (limit cut-offs, empty payloads included)."""
    data, starts, lengths = spans
    index = min(window[0], len(starts))
    count = min(window[1], len(starts) - index)
    payloads = [data[s : s + n] for s, n in zip(starts, lengths, strict=True)]
    framed = sum(12 + n for n in lengths[index : index + count])
    size = pos + max(0, framed + slack) + 5
    limit = size - 5
    out = bytearray(b"\xee" * size)
    expected = framing.frame_entries_py(out, pos, 1000, payloads[index : index + count], limit)
    out_c = bytearray(b"\xee" * size)
    assert _built().frame_entries(out_c, pos, 1000, payloads[index : index + count], limit) == (
        expected
    )
    assert out_c == out
    results = {
        name: _frame_spans(impl, size, pos, spans, index, count, limit)
        for name, impl in (("c", _built().frame_spans), ("python", framing.frame_spans_py))
    }
    for result, written in results.values():
        assert result == ("ok", expected)
        assert written == bytes(out)


@settings(max_examples=300)
@given(
    spans=span_cases(in_bounds=False),
    pos=st.integers(-2, 20),
    size=st.integers(0, 2000),
    index=st.integers(-2, 30),
    count=st.integers(-2, 30),
    limit=st.integers(-2, 2002),
)
@example(spans=(b"abc", [0, 2], [1, 2]), pos=0, size=100, index=0, count=2, limit=100)
@example(spans=(b"abc", [0, 0], [1, -1]), pos=0, size=100, index=0, count=2, limit=100)
def test_c_and_python_frame_spans_alike_on_any_input(
    spans: tuple[bytes, list[int], list[int]],
    pos: int,
    size: int,
    index: int,
    count: int,
    limit: int,
) -> None:
    """Any spans, window and limit: the same result or the same ValueError, the same bytes
    written (a span outside the data raises, nothing past it is read)."""
    c = _frame_spans(_built().frame_spans, size, pos, spans, index, count, limit)
    py = _frame_spans(framing.frame_spans_py, size, pos, spans, index, count, limit)
    assert c == py


@pytest.mark.parametrize(
    "impl",
    [pytest.param(framing.frame_spans_py, id="python"), pytest.param(None, id="c")],
)
def test_frame_spans_refuses_bad_arguments(impl: Any) -> None:
    frame = impl or _built().frame_spans
    out, data = bytearray(100), b"x" * 10
    with pytest.raises(ValueError, match="span 1 is outside the data"):
        frame(out, 0, 0, data, _q([0, 5]), _q([1, 6]), 0, 2, 100)
    with pytest.raises(ValueError, match="span 0 is outside the data"):
        frame(out, 0, 0, data, _q([-1]), _q([1]), 0, 1, 100)
    with pytest.raises(ValueError, match="differ in length"):
        frame(out, 0, 0, data, _q([0, 1]), _q([1]), 0, 1, 100)
    with pytest.raises(ValueError, match="index/count"):
        frame(out, 0, 0, data, _q([0]), _q([1]), 1, 1, 100)
    with pytest.raises(ValueError, match="pos/limit"):
        frame(out, 0, 0, data, _q([0]), _q([1]), 0, 1, 101)
    with pytest.raises(TypeError, match="8-byte integers"):
        frame(out, 0, 0, data, array("i", [0]), _q([1]), 0, 1, 100)
    with pytest.raises(TypeError):
        frame(bytes(100), 0, 0, data, _q([0]), _q([1]), 0, 1, 100)  # not writable


# --- the C CRC32C -------------------------------------------------------------------------
@settings(max_examples=400)
@given(
    data=st.binary(max_size=5000),
    value=st.integers(0, 2**32 - 1),
    skip=st.integers(0, 15),
)
@example(data=b"123456789", value=0, skip=0)
def test_c_crc32c_is_the_crc32c_packages(data: bytes, value: int, skip: int) -> None:
    """Hardware (when the CPU has SSE4.2) and table paths, any seed, unaligned starts."""
    view = memoryview(bytearray(data))[min(skip, len(data)) :]
    expected = crc32c.crc32c(view, value)
    assert _built().crc32c_c(view, value) == expected
    assert _built().crc32c_c(view, value, True) == expected


def test_c_crc32c_on_a_large_buffer_and_known_values() -> None:
    big = os.urandom(3 * 1024 * 1024 + 5)
    for skip in range(9):
        view = memoryview(big)[skip:]
        assert _built().crc32c_c(view, 7) == crc32c.crc32c(view, 7)
        assert _built().crc32c_c(view, 7, True) == crc32c.crc32c(view, 7)
    assert _built().crc32c_c(b"123456789") == 0xE3069283  # the CRC-32C check value
    assert _built().crc32c_c(b"") == 0
    with pytest.raises(ValueError):
        _built().crc32c_c(b"x", 2**32)
    cpuinfo = Path("/proc/cpuinfo")
    if os.uname().machine == "x86_64" and "sse4_2" in cpuinfo.read_text():
        assert _built().CRC32C_HARDWARE


# --- record_spans -------------------------------------------------------------------------
def _record(payload: bytes) -> bytes:
    length = struct.pack(">I", len(payload))
    return length + struct.pack(">I", crc32c.crc32c(payload, crc32c.crc32c(length))) + payload


@st.composite
def record_cases(draw: st.DrawFn) -> tuple[bytes, list[int], int, int]:
    """(bytes read, file offsets of the records, file offset of those bytes, end): valid
    records, then maybe damaged, cut, or described by offsets that make no sense."""
    payloads = draw(st.lists(st.binary(max_size=200), max_size=15))
    base = draw(st.sampled_from([0, 32, 2**40]))
    buf = bytearray()
    offsets = []
    for payload in payloads:
        offsets.append(base + len(buf))
        buf += _record(payload)
    end = base + len(buf)
    for at, value in draw(
        st.lists(st.tuples(st.integers(0, 5000), st.integers(0, 255)), max_size=4)
    ):
        if buf:
            buf[at % len(buf)] = value
    if draw(st.booleans()):
        del buf[draw(st.integers(0, len(buf))) :]
    if draw(st.integers(0, 4)) == 0:
        offsets = draw(st.lists(st.integers(-5, base + len(buf) + 20), max_size=15))
        end = draw(st.integers(-5, base + len(buf) + 20))
    return bytes(buf), offsets, base, end


def _record_spans(impl: Any, case: tuple[bytes, list[int], int, int]) -> Any:
    buf, offsets, base, end = case
    return _outcome(lambda: impl(buf, array("q", offsets), base, end))


@settings(max_examples=500)
@given(case=record_cases())
def test_c_and_python_record_spans_alike(case: tuple[bytes, list[int], int, int]) -> None:
    c = _record_spans(_built().record_spans, case)
    py = _record_spans(framing.record_spans_py, case)
    assert c == py
    kind, (starts, lengths, bad, reason) = py
    assert kind == "ok"
    assert len(starts) == len(lengths) == 8 * (bad if bad >= 0 else len(case[1]))
    assert (bad == -1) == (reason is None)
    assert reason in (None, "header", "length", "crc")


def test_record_spans_finds_each_payload_and_each_kind_of_damage() -> None:
    payloads = [b"abc", b"", os.urandom(50)]
    buf = b"".join(map(_record, payloads))
    offsets = array("Q", [100, 111, 119])  # the writer's offsets are array('Q')
    for impl in (_built().record_spans, framing.record_spans_py):
        starts, lengths, bad, reason = impl(buf, offsets, 100, 100 + len(buf))
        assert (list(array("q", starts)), list(array("q", lengths))) == ([8, 19, 27], [3, 0, 50])
        assert (bad, reason) == (-1, None)
        damaged = bytearray(buf)
        damaged[30] ^= 1  # a payload byte of record 2
        assert impl(bytes(damaged), offsets, 100, 100 + len(buf))[2:] == (2, "crc")
        assert impl(buf, offsets, 100, 101 + len(buf))[2:] == (2, "length")
        assert impl(buf[:-1], offsets, 100, 100 + len(buf))[2:] == (2, "length")
        assert impl(buf[:5], offsets, 100, 100 + len(buf))[2:] == (0, "header")
        assert impl(buf[:19], offsets, 100, 100 + len(buf))[2:] == (2, "header")
        assert impl(buf, array("q", [100, 99]), 100, 100 + len(buf))[2:] == (0, "length")
        assert impl(buf, offsets, 101, 100 + len(buf))[2:] == (0, "header")
        with pytest.raises(TypeError, match="8-byte integers"):
            impl(buf, array("i", [100]), 100, 111)


# --- BlockWriter with span batches ----------------------------------------------------------
def test_block_writer_frames_span_batches_like_payloads() -> None:
    pool = os.urandom(5000)
    starts = _q([(i * 397) % 4000 for i in range(40)])
    lengths = _q([(i * 37) % 300 for i in range(40)])
    spans = EntrySpans(pool, starts, lengths)
    payloads = [bytes(spans.payload(i)) for i in range(40)]
    size = 128 + sum(12 + n for n in lengths) + 17
    expected = encode_block(5, payloads, size)
    writer = BlockWriter(size)
    pieces = [
        SpanBatch(spans, 0, 7),
        payloads[7:9],
        SpanBatch(spans, 9, 0),
        SpanBatch(spans, 9, 31),
    ]
    assert bytes(writer.write_block_batches(5, pieces, size)) == expected
    # an entry that does not fit: the same error whichever way it came
    small = 128 + sum(12 + n for n in lengths[:10]) + 5
    errors = []
    for batch in (SpanBatch(spans, 0, 40), payloads):
        with pytest.raises(CorruptDataError) as info:
            BlockWriter(small).write_block_batches(5, [batch], small)
        errors.append(str(info.value))
    assert errors[0] == errors[1] and "entry 15 (" in errors[0]
