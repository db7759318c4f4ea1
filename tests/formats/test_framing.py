"""formats.framing: the C loops (formats._speedups) and their pure-Python twins give the same
results on the same inputs, valid or damaged; the install builds the C ones."""

from __future__ import annotations

import itertools
import os
import struct
from array import array
from typing import Any, NamedTuple

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from formats import framing

try:
    from formats import _speedups  # type: ignore[attr-defined]
except ImportError:  # test_the_c_loops_are_built says why the suite fails then
    _speedups = None


class Entry(NamedTuple):
    entry_id: int
    payload: bytes


def _cutter(span: Any, make: Any) -> Any:
    """What a read's entry cut does (formats.cuts.cut_entries) with one implementation's span
    walk and entry maker: (entries as a list, stop, next id, learn_next)."""

    def cut(buf: bytes, off: int, limit: int, first_id: int, last_id: int, *rest: Any) -> Any:
        entry_type, *learning = rest
        starts, lengths, count, stop, learn_next = span(
            buf, off, limit, first_id, last_id, *learning
        )
        spans = memoryview(starts).cast("q"), memoryview(lengths).cast("q")
        return (
            list(make(buf, *spans, first_id, entry_type)),
            stop,
            first_id + count,
            learn_next,
        )

    return cut


IMPLEMENTATIONS: list[Any] = [
    pytest.param(
        (
            framing.frame_entries_py,
            _cutter(framing.span_entries_py, framing.iter_span_entries_py),
        ),
        id="python",
    )
]
if _speedups is not None:
    IMPLEMENTATIONS.append(
        pytest.param(
            (
                _speedups.frame_entries,
                _cutter(_speedups.span_entries, _speedups.iter_span_entries),
            ),
            id="c",
        )
    )


def test_the_c_loops_are_built() -> None:
    """`make install` compiles formats/_speedups.c; a silent fallback to Python would lose
    the speed, so the suite fails unless pure Python was asked for."""
    if os.environ.get("LEDGER_OFFLOADER_PURE_PYTHON", "") not in ("", "0"):
        assert not framing.SPEEDUPS
        return
    assert _speedups is not None, "formats._speedups is not built: run `make install`"
    assert framing.SPEEDUPS
    assert framing.span_entries is _speedups.span_entries
    assert framing.iter_span_entries is _speedups.iter_span_entries


def _built() -> Any:
    """The C module; the parity tests fail (not skip) when it was not built."""
    assert _speedups is not None, "formats._speedups is not built: run `make install`"
    return _speedups


def _frame(payloads: list[bytes], first: int) -> bytes:
    return b"".join(struct.pack(">iq", len(p), first + i) + p for i, p in enumerate(payloads))


payload_lists = st.lists(st.binary(max_size=300), max_size=40)
#: byte writes (offset, value) that damage a framed buffer, and where to cut it
damages = st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), max_size=4)
cuts = st.integers(0, 10_000)


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
@given(payloads=payload_lists, first=st.integers(0, 2**40), slack=st.integers(0, 50))
def test_frame_matches_the_format(impl: Any, payloads: list[bytes], first: int, slack: int) -> None:
    frame, _ = impl
    expected = _frame(payloads, first)
    buf = bytearray(b"\xee" * (len(expected) + 10 + slack))
    pos, count = frame(buf, 10, first, payloads, len(buf))
    assert (pos, count) == (10 + len(expected), len(payloads))
    assert bytes(buf[10:pos]) == expected
    assert buf[:10] == b"\xee" * 10 and buf[pos:] == b"\xee" * (len(buf) - pos)


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
def test_frame_stops_before_the_entry_that_does_not_fit(impl: Any) -> None:
    frame, _ = impl
    buf = bytearray(100)
    payloads = [b"a" * 10, memoryview(b"b" * 20), bytearray(b"c" * 50)]
    pos, count = frame(buf, 0, 7, payloads, 60)
    assert (pos, count) == (22 + 32, 2)
    assert bytes(buf[:pos]) == _frame([b"a" * 10, b"b" * 20], 7)
    with pytest.raises(ValueError):
        frame(buf, 0, 7, payloads, 101)
    with pytest.raises(ValueError):
        frame(buf, -1, 7, payloads, 50)


def _parse(impl: Any, buf: bytes, *args: Any) -> tuple[Any, ...]:
    _, parse = impl
    learned: list[tuple[int, int]] = []
    entries, off, next_id, learn_next = parse(buf, *args[:4], Entry, *args[4:], learned)
    return [tuple(e) for e in entries], off, next_id, learn_next, learned


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
def test_parse_round_trip(impl: Any) -> None:
    payloads = [bytes([i]) * i for i in range(30)]
    buf = b"pad" + _frame(payloads, 100) + b"\xfe\xdc\xde\xad" * 4
    entries, off, next_id, learn_next, learned = _parse(
        impl, buf, 3, len(buf), 100, 10**9, 1000, 0, 64
    )
    assert entries == [(100 + i, p) for i, p in enumerate(payloads)]
    assert off == len(buf) - 16 and next_id == 130  # stopped at the padding
    assert learned[0] == (100, 1003) and all(
        b[1] - a[1] >= 64 for a, b in itertools.pairwise(learned)
    )
    assert learn_next == learned[-1][1] + 64
    got = impl[1](buf, 3, len(buf), 100, 104, Entry, 0, 0, 0, [])
    assert [e.entry_id for e in got[0]] == [100, 101, 102, 103, 104]  # stops at last_id
    assert isinstance(got[0][0], Entry)


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
def test_parse_refuses_a_window_outside_the_buffer(impl: Any) -> None:
    for off, limit in ((-1, 20), (0, 21), (5, 4)):
        with pytest.raises(ValueError, match="outside the buffer"):
            impl[1](b"x" * 20, off, limit, 0, 5, Entry, 0, 0, 0, [])


@st.composite
def damaged_frames(draw: st.DrawFn) -> tuple[bytes, int]:
    """(framed entries with ids from ``first``, damaged by a few byte writes and cut, first)."""
    first = draw(st.integers(0, 2**40))
    buf = bytearray(_frame(draw(payload_lists), first))
    for at, value in draw(damages):
        if buf:
            buf[at % len(buf)] = value
    return bytes(buf[: min(draw(cuts), len(buf))]), first


#: a walk over damaged bytes: from where, up to which id, learning from where and how often
WALK_ARGS = {
    "frame": damaged_frames(),
    "start": st.integers(0, 40),
    "last_delta": st.integers(-1, 50),
    "learn": st.tuples(st.integers(0, 500), st.integers(0, 200)),
}


@settings(max_examples=300)
@given(**WALK_ARGS)
@example(frame=(b"\x80" + _frame([b"x"], 0)[1:], 0), start=0, last_delta=5, learn=(0, 0))
def test_c_and_python_agree_on_any_bytes(
    frame: tuple[bytes, int], start: int, last_delta: int, learn: tuple[int, int]
) -> None:
    """Valid, damaged or truncated bytes: both stop at the same place with the same entries."""
    data, first = frame
    start = min(start, len(data))
    args = (start, len(data), first, first + last_delta, 5000, learn[0], learn[1])
    py = _parse(IMPLEMENTATIONS[0].values[0], data, *args)
    c = _parse(IMPLEMENTATIONS[1].values[0], data, *args)
    assert c == py
    assert py[1] <= len(data) and all(len(p) <= len(data) for _, p in py[0])


# --- iter_span_entries: the entries of a span walk, made one at a time --------------------
ENTRY_MAKERS = [pytest.param(framing.iter_span_entries_py, id="python")]
if _speedups is not None:
    ENTRY_MAKERS.append(pytest.param(_speedups.iter_span_entries, id="c"))


@pytest.mark.parametrize("make", ENTRY_MAKERS)
def test_entries_are_made_one_at_a_time(make: Any) -> None:
    buf = bytearray(b"abcdefghij")
    it = make(buf, array("q", [0, 3, 9]), memoryview(array("q", [3, 0, 1])), 7, Entry)
    first = next(it)
    assert type(first) is Entry and first == (7, b"abc")
    assert type(first.payload) is bytes
    buf[3:5] = b"XY"  # made later: a copy of what the buffer holds then
    assert list(it) == [(8, b""), (9, b"j")]
    assert list(it) == []


@pytest.mark.parametrize("make", ENTRY_MAKERS)
def test_entry_maker_refuses_bad_spans_up_front(make: Any) -> None:
    buf = b"abcdefghij"
    q = array("q", [0])
    with pytest.raises(ValueError, match="outside the buffer"):
        make(buf, array("q", [0, 8]), array("q", [1, 3]), 0, Entry)
    with pytest.raises(ValueError, match="outside the buffer"):
        make(buf, array("q", [-1]), array("q", [1]), 0, Entry)
    with pytest.raises(ValueError, match="outside the buffer"):
        make(buf, array("q", [2]), array("q", [-1]), 0, Entry)
    with pytest.raises(ValueError, match="differ in count"):
        make(buf, array("q", [0, 0]), q, 0, Entry)
    with pytest.raises(TypeError):
        make(buf, array("i", [0]), array("i", [1]), 0, Entry)
    with pytest.raises(TypeError):
        make(buf, b"x" * 7, b"x" * 7, 0, Entry)
    with pytest.raises(TypeError):
        make(buf, q, q, 0, dict)
    with pytest.raises(OverflowError):
        make(buf, q, q, 2**63 - 1, Entry)
    assert list(make(buf, q, q, 2**63 - 2, Entry)) == [(2**63 - 2, b"")]


@settings(max_examples=200)
@given(frame=damaged_frames(), first_delta=st.integers(0, 3))
def test_c_and_python_make_the_same_entries(frame: tuple[bytes, int], first_delta: int) -> None:
    data, first = frame
    starts, lengths, count, _, _ = framing.span_entries_py(data, 0, len(data), first)
    spans = array("q", starts), array("q", lengths)
    made = [
        [tuple(e) for e in make(data, *spans, first + first_delta, Entry)]
        for make in (framing.iter_span_entries_py, _built().iter_span_entries)
    ]
    assert made[0] == made[1] and len(made[0]) == count


#: payload lengths that repeat (recycled payloads) and change (fresh ones), 0 and 1 included
recycled_payloads = st.lists(
    st.sampled_from([0, 1, 2, 3, 700, 1024]).flatmap(lambda n: st.binary(min_size=n, max_size=n)),
    max_size=30,
)


@settings(max_examples=200)
@given(payloads=recycled_payloads, keep=st.sets(st.integers(0, 29)))
def test_recycled_entries_are_never_seen_changing(payloads: list[bytes], keep: set[int]) -> None:
    """A ``for`` loop that drops its entries gets recycled objects (C): every entry still reads
    right, hashes right (the cached hash is reset), and whatever the caller keeps (an entry, a
    payload, a memoryview of one) never changes afterwards."""
    first = 2**40
    data = _frame(payloads, first)
    starts, lengths, count, _, _ = framing.span_entries_py(data, 0, len(data), first)
    spans = array("q", starts), array("q", lengths)
    kept_entries: list[Any] = []
    kept_payloads: list[bytes] = []
    kept_views: list[memoryview] = []
    seen = []
    for entry in _built().iter_span_entries(data, *spans, first, Entry):
        seen.append((entry.entry_id, hash(entry.payload), entry.payload.hex()))
        i = entry.entry_id - first
        if i in keep:
            [kept_entries, kept_payloads, kept_views][i % 3].append(
                [entry, entry.payload, memoryview(entry.payload)][i % 3]
            )
    assert seen == [(first + i, hash(p), p.hex()) for i, p in enumerate(payloads)]
    wanted = [i for i in range(count) if i in keep]
    assert kept_entries == [(first + i, payloads[i]) for i in wanted if i % 3 == 0]
    assert kept_payloads == [payloads[i] for i in wanted if i % 3 == 1]
    assert [bytes(v) for v in kept_views] == [payloads[i] for i in wanted if i % 3 == 2]


# --- pack_entries: a block's payloads as an Arrow binary column ---------------------------
PACKERS = [pytest.param(framing.pack_entries_py, id="python")]
if _speedups is not None:
    PACKERS.append(pytest.param(_speedups.pack_entries, id="c"))


def _offsets(raw: bytes) -> list[int]:
    return list(array("i", raw))


@pytest.mark.parametrize("pack", PACKERS)
def test_pack_round_trip(pack: Any) -> None:
    payloads = [b"", b"a", os.urandom(1000), b"", b"xyz"]
    buf = b"\x00" * 7 + _frame(payloads, 41) + b"\xfe\xdc\xde\xad" * 3
    data, offsets, count, stop, _ = pack(memoryview(buf), 7, len(buf), 41)
    assert data == b"".join(payloads) and count == len(payloads)
    assert _offsets(offsets) == [0, 0, 1, 1001, 1001, 1004]
    assert stop == 7 + len(_frame(payloads, 41))


@pytest.mark.parametrize("pack", PACKERS)
def test_pack_refuses_a_window_outside_the_buffer(pack: Any) -> None:
    with pytest.raises(ValueError, match="outside the buffer"):
        pack(b"abc", 0, 4, 0)


@settings(max_examples=300)
@given(frame=damaged_frames())
def test_c_and_python_pack_alike(frame: tuple[bytes, int]) -> None:
    """Valid, damaged or truncated bytes: both pack the same entries and stop at the same
    place."""
    data, first = frame
    py = framing.pack_entries_py(data, 0, len(data), first)
    c = _built().pack_entries(data, 0, len(data), first)
    assert c == py
    packed, offsets, count, stop, _ = py
    assert len(_offsets(offsets)) == count + 1 and _offsets(offsets)[-1] == len(packed)
    assert stop <= len(data)


@pytest.mark.parametrize("pack", PACKERS)
def test_pack_stops_after_the_last_id(pack: Any) -> None:
    payloads = [b"a", b"bb", b"ccc", b"dddd"]
    buf = _frame(payloads, 10)
    data, offsets, count, stop, _ = pack(buf, 0, len(buf), 10, 11)
    assert (data, _offsets(offsets), count) == (b"abb", [0, 1, 3], 2)
    assert stop == len(_frame(payloads[:2], 10))
    assert pack(buf, 0, len(buf), 10, 9)[2:4] == (0, 0)


@settings(max_examples=300)
@given(**WALK_ARGS)
def test_pack_span_and_parse_cut_and_learn_alike(
    frame: tuple[bytes, int], start: int, last_delta: int, learn: tuple[int, int]
) -> None:
    """With a last id and offsets to learn, the C and Python packers agree with each other,
    as do the C and Python span walks, and both with the entry cut of a read: the same
    entries, stop, next learn point and learned offsets."""
    data, first = frame
    start = min(start, len(data))
    last = first + last_delta
    parsed = _parse(IMPLEMENTATIONS[0].values[0], data, start, len(data), first, last, 5000, *learn)
    entries, p_stop, _, p_learn_next, p_learned = parsed
    args = (data, start, len(data), first, last, 5000, *learn)
    for walks in (
        (framing.pack_entries_py, _built().pack_entries),
        (framing.span_entries_py, _built().span_entries),
    ):
        results = []
        for walk in walks:
            learned: list[tuple[int, int]] = []
            a, b, count, stop, learn_next = walk(*args, learned)
            if walk in (framing.pack_entries_py, _built().pack_entries):
                bounds = _offsets(b)
                payloads = [a[bounds[i] : bounds[i + 1]] for i in range(count)]
            else:
                spans = zip(array("q", a), array("q", b), strict=True)
                payloads = [data[at : at + n] for at, n in spans]
            assert len(payloads) == count
            results.append((payloads, stop, learn_next, learned))
        assert results[0] == results[1]
        payloads, stop, learn_next, learned = results[0]
        assert payloads == [p for _, p in entries]
        assert (stop, learn_next, learned) == (p_stop, p_learn_next, p_learned)


@settings(max_examples=300)
@given(
    frame=damaged_frames(),
    out_pos=st.integers(0, 30),
    room=st.integers(0, 3000),
    index=st.integers(0, 3),
    slots=st.integers(1, 40),
)
def test_pack_into_agrees_with_pack_entries(
    frame: tuple[bytes, int], out_pos: int, room: int, index: int, slots: int
) -> None:
    """C and Python pack_into write the same bytes and offsets, and (given room) pack what
    pack_entries packs; they stop before an entry either buffer has no room for."""
    data, first = frame
    results = []
    for pack_into in (framing.pack_into_py, _built().pack_into):
        out = bytearray(out_pos + room)
        offsets = bytearray(4 * (index + slots))
        got = pack_into(out, out_pos, offsets, index, data, 0, len(data), first)
        results.append((got, bytes(out), bytes(offsets)))
    assert results[0] == results[1]
    (end, count, stop), out, raw_offsets = results[0]
    packed, offsets, p_count, p_stop, _ = framing.pack_entries_py(data, 0, len(data), first)
    assert count <= p_count and index + count < index + slots
    assert out[out_pos:end] == packed[: end - out_pos]
    ends = _offsets(raw_offsets)[index + 1 : index + 1 + count]
    assert ends == [out_pos + o for o in _offsets(offsets)[1 : count + 1]]
    if count == p_count:
        assert stop == p_stop
    else:  # no room for the next entry
        length = _offsets(offsets)[count + 1] - _offsets(offsets)[count]
        assert index + count + 1 == index + slots or end + length > out_pos + room


def test_pack_into_refuses_positions_outside_its_buffers() -> None:
    for pack_into in (framing.pack_into_py, _built().pack_into):
        for args in [(5, 0, 0, 4), (0, 9, 0, 4), (0, 0, -1, 4), (0, 0, 0, 9)]:
            out_pos, index, off, limit = args
            with pytest.raises(ValueError, match="outside its buffer"):
                pack_into(bytearray(4), out_pos, bytearray(8), index, b"abcd", off, limit, 0)


@pytest.mark.parametrize("size", [0, 1, 4096, 3 * 1024 * 1024 + 5])
def test_zeroed_bytearray(size: int) -> None:
    for zeroed in (framing.zeroed_bytearray_py, _built().zeroed_bytearray):
        buf = zeroed(size)
        assert type(buf) is bytearray and buf == bytearray(size)
        with pytest.raises(ValueError, match="negative"):
            zeroed(-1)


# --- framed_prefix: the prefix sums the block planner searches ----------------------------
@given(lengths=st.lists(st.integers(-5, 2**40), max_size=60))
def test_c_and_python_framed_prefix_alike(lengths: list[int]) -> None:
    py = framing.framed_prefix_py(lengths)
    assert _built().framed_prefix(lengths) == py
    prefix = list(array("q", py[0]))
    assert prefix == [12 * i + sum(lengths[:i]) for i in range(len(lengths) + 1)]
    assert py[1:] == ((min(lengths), max(lengths)) if lengths else (0, 0))


def test_framed_prefix_refuses_what_is_not_a_length() -> None:
    for impl in (framing.framed_prefix_py, framing.framed_prefix):
        with pytest.raises(TypeError):
            impl([1, "2"])  # type: ignore[list-item]


def test_a_block_writer_writes_into_the_buffer_it_is_given() -> None:
    from formats.block import BlockWriter, iter_block_entries

    buf = bytearray(b"\xaa" * 1000)  # garbage: every byte of the block must be written
    block = BlockWriter(1000, buf).write_block(7, [b"x" * 10, b"", b"yz"], 600)
    assert block.obj is buf and bytes(block) == bytes(
        BlockWriter(600).write_block(7, [b"x" * 10, b"", b"yz"], 600)
    )
    assert [bytes(e.payload) for e in iter_block_entries(bytes(block))] == [b"x" * 10, b"", b"yz"]
    with pytest.raises(ValueError, match="buffer of 999 bytes"):
        BlockWriter(1000, bytearray(999))
