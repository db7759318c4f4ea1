"""Truncated and corrupted objects end in a typed FormatError naming the offset, never in
``struct.error``/``IndexError``/``ValueError``, a hang, or silently short or wrong data.

Small encoded ledgers (several padded blocks, empty entries, an index with our extension) are
swept exhaustively: every truncation point of the index and of every data block, and every
single-byte flip of the data and of the index; hypothesis adds random multi-byte damage.
"""

from __future__ import annotations

import random
from array import array
from dataclasses import dataclass
from itertools import pairwise

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from formats.block import iter_block_entries, pack_block_entries
from formats.encode import encode_ledger
from formats.errors import (
    BadMagicError,
    ChecksumMismatchError,
    CorruptDataError,
    FormatError,
    IndexInconsistentError,
    ProtobufError,
    TruncatedError,
)
from formats.extension import crc32c
from formats.index import decode_index, encode_index
from formats.ledger_metadata import Ensemble, LedgerMetadata
from tests.formats.helpers import read_all

#: errors that come from parsing bytes must say where
_POSITIONAL = (
    TruncatedError,
    BadMagicError,
    CorruptDataError,
    ChecksumMismatchError,
    ProtobufError,
)

MASKS = (0x01, 0x80, 0xFF, 0x5A)


@dataclass(frozen=True)
class Ledger:
    name: str
    data: bytes
    index: bytes  # with the extension
    plain_index: bytes  # Pulsar's, without it
    entries: list[tuple[int, bytes]]

    @property
    def rows_end(self) -> int:
        return len(self.plain_index)


def _make(name: str, lengths: list[int], max_block: int, seed: int) -> Ledger:
    rng = random.Random(seed)
    payloads = [rng.randbytes(n) for n in lengths]
    md = LedgerMetadata(
        ensemble_size=2,
        write_quorum_size=2,
        ack_quorum_size=1,
        last_entry_id=None,
        length=0,
        ensembles=(Ensemble(0, ("bk1:3181", "bk2:3181")),),
        ctime=1_700_000_000_000,
        custom_metadata=(("app", b"corrupt"),),
    )
    enc = encode_ledger(payloads, md, max_block, fine_interval=48)
    plain = encode_index(enc.offload_index, with_extension=False)
    return Ledger(name, enc.data, enc.index, plain, list(enumerate(payloads)))


LEDGERS = [
    _make("padded-blocks", [0, 5, 17, 0, 40, 3, 60, 0, 1, 25, 9, 0], 200, 1),
    _make("empty-entries", [0, 0, 10, 0, 0, 0, 10, 0, 0, 0], 170, 2),
    _make("one-exact-block", [7, 30, 2], 1024, 3),
    _make("full-blocks", [60, 60, 60, 1], 200, 4),
]
IDS = [lg.name for lg in LEDGERS]


def _check_error(exc: FormatError, size: int) -> None:
    assert isinstance(exc, FormatError)
    if isinstance(exc, _POSITIONAL):
        assert exc.offset is not None, f"{type(exc).__name__} without an offset: {exc}"
    if exc.offset is not None:
        assert 0 <= exc.offset <= size, f"offset {exc.offset} outside 0..{size}: {exc}"


def _flip(buf: bytes, pos: int, mask: int) -> bytes:
    out = bytearray(buf)
    out[pos] ^= mask
    return bytes(out)


def _block_spans(lg: Ledger) -> list[tuple[int, int]]:
    index = decode_index(lg.index)
    return [index.block_span(i) for i in range(index.block_count)]


def _payload_positions(lg: Ledger) -> set[int]:
    positions: set[int] = set()
    for start, end in _block_spans(lg):
        for entry in iter_block_entries(memoryview(lg.data)[start:end], base_offset=start):
            first = entry.offset + 12
            positions.update(range(first, first + len(entry.payload)))
    return positions


def test_sample_ledgers_are_what_the_sweeps_need() -> None:
    for lg in LEDGERS:
        assert read_all(lg.index, lg.data) == lg.entries
        assert read_all(lg.plain_index, lg.data) == lg.entries
        index = decode_index(lg.index)
        assert index.extension is not None
    assert decode_index(LEDGERS[0].index).block_count >= 3
    assert decode_index(LEDGERS[0].index).extension.fine_offsets  # type: ignore[union-attr]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("lg", LEDGERS, ids=IDS)
@pytest.mark.parametrize("which", ["index", "plain_index"])
def test_every_index_truncation(lg: Ledger, which: str) -> None:
    full: bytes = getattr(lg, which)
    accepted = []
    for n in range(len(full)):
        try:
            entries = read_all(full[:n], lg.data)
        except FormatError as exc:
            _check_error(exc, len(lg.data))
            continue
        # Pulsar ignores bytes after the rows: a cut inside the extension's first 4 bytes
        # leaves a plain, valid Pulsar index, which must still read exactly the entries
        assert entries == lg.entries
        assert decode_index(full[:n]).extension is None
        accepted.append(n)
    assert accepted == ([] if which == "plain_index" else list(range(lg.rows_end, lg.rows_end + 4)))


@pytest.mark.timeout(60)
@pytest.mark.parametrize("lg", LEDGERS, ids=IDS)
def test_every_data_block_truncation(lg: Ledger) -> None:
    for start, end in _block_spans(lg):
        block = lg.data[start:end]
        for n in range(len(block)):
            with pytest.raises(FormatError) as info:
                list(iter_block_entries(block[:n], base_offset=start))
            _check_error(info.value, end)
            assert isinstance(info.value, TruncatedError)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("lg", LEDGERS, ids=IDS)
def test_every_data_object_truncation(lg: Ledger) -> None:
    for n in range(len(lg.data)):
        for index in (lg.index, lg.plain_index):
            with pytest.raises(FormatError) as info:
                read_all(index, lg.data[:n])
            _check_error(info.value, len(lg.data))


@pytest.mark.timeout(60)
@pytest.mark.parametrize("lg", LEDGERS, ids=IDS)
def test_every_data_byte_flip(lg: Ledger) -> None:
    """With the CRCs every flip fails; by framing alone only payload flips pass, and then
    the block's CRC32C from the extension mismatches."""
    index = decode_index(lg.index)
    assert index.extension is not None
    payload_positions = _payload_positions(lg)
    spans = _block_spans(lg)
    framing_misses = 0
    for pos in range(len(lg.data)):
        for mask in MASKS:
            bad = _flip(lg.data, pos, mask)
            with pytest.raises(FormatError) as info:
                read_all(lg.index, bad)
            _check_error(info.value, len(bad))
            try:
                got = read_all(lg.index, bad, check_crc=False)
            except FormatError as exc:
                _check_error(exc, len(bad))
                continue
            framing_misses += 1
            assert pos in payload_positions, f"flip at {pos} (mask {mask:#x}) went unnoticed"
            assert [(e, len(p)) for e, p in got] == [(e, len(p)) for e, p in lg.entries]
            block = next(i for i, (s, e) in enumerate(spans) if s <= pos < e)
            start, end = spans[block]
            assert crc32c(bad[start:end]) != index.extension.block_crc32c[block]
    assert framing_misses == len(payload_positions) * len(MASKS)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("lg", LEDGERS, ids=IDS)
@pytest.mark.parametrize("which", ["index", "plain_index"])
def test_every_index_byte_flip(lg: Ledger, which: str) -> None:
    """A damaged index is refused, or (fields readers do not use: part ids, the ignored
    index length, ctime, ...) still reads exactly the right entries: never wrong data."""
    full: bytes = getattr(lg, which)
    for pos in range(len(full)):
        for mask in MASKS:
            bad = _flip(full, pos, mask)
            try:
                entries = read_all(bad, lg.data)
            except FormatError as exc:
                _check_error(exc, max(len(bad), len(lg.data)))
                continue
            assert entries == lg.entries, f"flip at {pos} (mask {mask:#x}) changed the data"
            # the extension is CRC-protected, and one with a damaged magic is still recognised
            # by its other header fields: no flip in it goes unnoticed
            assert pos < lg.rows_end, f"a flip in the extension at {pos} went unnoticed"


@pytest.mark.timeout(60)
# found by hypothesis: a zeroed extension magic plus a payload flip once read back wrong data
@example(which=3, data_writes=[(140, 0)], index_writes=[(174, 0)], cut=None)
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    which=st.sampled_from(range(len(LEDGERS))),
    data_writes=st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), max_size=6),
    index_writes=st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), max_size=3),
    cut=st.none() | st.integers(0, 10**6),
)
def test_random_damage_never_yields_wrong_data(
    which: int,
    data_writes: list[tuple[int, int]],
    index_writes: list[tuple[int, int]],
    cut: int | None,
) -> None:
    lg = LEDGERS[which]
    data, index = bytearray(lg.data), bytearray(lg.index)
    for pos, value in data_writes:
        data[pos % len(data)] = value
    for pos, value in index_writes:
        index[pos % len(index)] = value
    if cut is not None:
        data = data[: cut % (len(data) + 1)]
    try:
        entries = read_all(bytes(index), bytes(data))
    except FormatError as exc:
        _check_error(exc, max(len(data), len(index)))
        return
    assert entries == lg.entries


def test_truncated_block_never_yields_fewer_entries_silently() -> None:
    lg = LEDGERS[0]
    index = decode_index(lg.index)
    start, end = index.block_span(0)
    promised = index.block_last_entry_id(0) - index.entries[0].entry_id + 1
    block = lg.data[start:end]
    for n in range(len(block)):
        yielded = 0
        with pytest.raises(FormatError):
            for _entry in iter_block_entries(block[:n]):
                yielded += 1
        assert yielded <= promised


def test_oversize_style_index_past_the_data_is_inconsistent() -> None:
    """An index row beyond the data object's length (Pulsar's oversize-entry bug)."""
    lg = LEDGERS[0]
    index = decode_index(lg.index)
    rows = index.entries
    import dataclasses

    broken = dataclasses.replace(
        index, data_object_length=rows[-1].offset, block_ends=(), extension=None
    )
    with pytest.raises(IndexInconsistentError):
        decode_index(encode_index(broken))


@pytest.mark.parametrize("pos", [28, 60, 127])
def test_reserved_header_bytes_must_be_zero(pos: int) -> None:
    """Pulsar writes 100 zero bytes after the used header fields; damage there is refused
    by the framing itself (not only by the block CRC)."""
    lg = LEDGERS[0]
    start, end = _block_spans(lg)[1]
    block = bytearray(lg.data[start:end])
    block[pos] = 0x01
    with pytest.raises(CorruptDataError, match="reserved") as info:
        list(iter_block_entries(bytes(block), base_offset=start))
    assert info.value.offset == start + pos


def _walk(block: bytes, start: int) -> tuple[str, object]:
    """iter_block_entries' verdict on a block: its entries, or its error (type, offset)."""
    try:
        got = [(e.entry_id, bytes(e.payload)) for e in iter_block_entries(block, base_offset=start)]
    except FormatError as exc:
        return "error", (type(exc), exc.offset, str(exc))
    return "entries", got


def _pack(block: bytes, start: int) -> tuple[str, object]:
    """pack_block_entries' verdict, in the same terms."""
    try:
        packed = pack_block_entries(block, base_offset=start)
    except FormatError as exc:
        return "error", (type(exc), exc.offset, str(exc))
    bounds = list(array("i", packed.offsets))
    payloads = [packed.data[a:b] for a, b in pairwise(bounds)]
    return "entries", list(enumerate(payloads, packed.first_entry_id))


@pytest.mark.timeout(120)
@pytest.mark.parametrize("lg", LEDGERS, ids=IDS)
def test_packing_a_block_agrees_with_walking_it(lg: Ledger) -> None:
    """Every truncation and byte flip of every block: the packed column (Spark's path) has
    exactly the entries the walk yields, or fails with the same typed error at the same
    offset."""
    for start, end in _block_spans(lg):
        block = lg.data[start:end]
        damaged = [block[:n] for n in range(len(block))]
        damaged += [_flip(block, pos, mask) for pos in range(len(block)) for mask in MASKS]
        for bad in [block, *damaged]:
            assert _pack(bad, start) == _walk(bad, start)
