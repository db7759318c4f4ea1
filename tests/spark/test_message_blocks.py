"""The C block walk (``MessageColumns.add_packed``, driven by ``packed_records`` as the
``pulsar-messages`` reader drives it) gives exactly the Arrow batches of the per-entry path
(``parse_entry`` + ``MessageColumns.add`` for every entry): hypothesis blocks of batches and
single messages, compressed, with broker metadata, without checksums, markers, several
producers and schema versions, entry filters, small batches; damaged entries (flipped and cut
bytes) give the same rows up to the damage and then the same typed error. The C entry point
itself never crashes or hangs on garbage (offsets past the end, truncated entries)."""

from __future__ import annotations

import os
from array import array
from collections.abc import Iterator
from itertools import accumulate
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from formats.block import PackedEntries
from formats.pulsar import ChunkAssembler, OutgoingMessage, encode_chunks, encode_entry
from formats.pulsar.compression import LZ4, NONE, SNAPPY, ZLIB, ZSTD
from formats.pulsar.encode import frame_entry
from formats.pulsar.entry import parse_entry
from formats.pulsar.errors import PulsarMessageError
from formats.pulsar.metadata import BrokerEntryMetadata
from formats.pulsar.rich_columns import MAX_SPARK_MS
from formats.pulsar.speedups import C_MODULE
from offloader.spark.entry_filter import EntryFilter
from offloader.spark.message_blocks import kept_runs, packed_records
from offloader.spark.message_columns import FIRST_ENTRY_COLUMN, MessageColumns
from offloader.spark.message_rows import ValueDecoder, messages_arrow_schema

PURE = os.environ.get("LEDGER_OFFLOADER_PURE_PYTHON", "") not in ("", "0")
needs_c = pytest.mark.skipif(PURE, reason="LEDGER_OFFLOADER_PURE_PYTHON set: no C walk")

T0 = 1_750_000_000_000
TOPIC = "persistent://public/default/blocks"
LEDGER = 11
FIRST = 40
SCHEMA = messages_arrow_schema()


def _pack(entries: list[bytes]) -> PackedEntries:
    offsets = array("i", accumulate(map(len, entries), initial=0)).tobytes()
    return PackedEntries(FIRST, len(entries), b"".join(entries), offsets)


def _rows(**kw: Any) -> MessageColumns:
    return MessageColumns(TOPIC, SCHEMA, ValueDecoder("binary"), **kw)


def _stage(rows: MessageColumns, data: bytes, entry_id: int, chunks: ChunkAssembler) -> None:
    """The reader's per-entry path (chunks reassembled in place)."""
    parsed = parse_entry(data, ledger_id=LEDGER, entry_id=entry_id)
    first = entry_id
    if parsed.metadata.is_chunk:
        whole = chunks.add(parsed, LEDGER, entry_id)
        if whole is None:
            return
        parsed = whole
    rows.add(parsed, LEDGER, entry_id, first)


def _walk(packed: PackedEntries, flt: EntryFilter | None, **kw: Any) -> tuple[list[Any], Any]:
    """The batches (as Python rows) of the C walk, and the typed error it ended with."""
    rows = _rows(**kw)
    records = (
        None if r is None else (r[1], r[2]) for r in packed_records(packed, LEDGER, flt, rows)
    )
    return _collect(records, rows)


def _per_entry(entries: list[bytes], flt: EntryFilter | None, **kw: Any) -> tuple[list[Any], Any]:
    """The same through the per-entry path only (every entry parsed in Python)."""
    records = (
        (FIRST + i, data)
        for i, data in enumerate(entries)
        if flt is None or flt.keeps_entry(FIRST + i)
    )
    return _collect(records, _rows(**kw))


def _collect(
    records: Iterator[tuple[int, bytes] | None], rows: MessageColumns
) -> tuple[list[Any], Any]:
    """``(entry_id, data)`` records staged per entry (None: the staged rows make a batch),
    flushed when full: the batches as Python rows, and the typed error they ended with."""
    chunks, out = ChunkAssembler(), []
    try:
        for record in records:
            if record is None:
                out.append(rows.flush())
                continue
            entry_id, data = record
            _stage(rows, data, entry_id, chunks)
            if rows.full:
                out.append(rows.flush())
        out.append(rows.flush())
    except PulsarMessageError as exc:
        return _batches(out), (type(exc), str(exc))
    return _batches(out), None


def _batches(out: list[pa.RecordBatch | None]) -> list[Any]:
    """Each batch as its schema and its columns' values (timestamps as their int64 micros)."""
    return [
        (
            b.schema,
            [
                (c.view(pa.int64()) if pa.types.is_timestamp(c.type) else c).to_pylist()
                for c in b.columns
            ],
        )
        for b in out
        if b is not None
    ]


text = st.text(max_size=5)
message = st.builds(
    OutgoingMessage,
    value=st.none() | st.binary(max_size=12),
    key=st.none() | st.sampled_from(["k", "k2", "ключ"]) | text,
    ordering_key=st.none() | st.binary(max_size=3),
    properties=st.lists(st.tuples(st.sampled_from(["", "k", "ключ"]) | text, text), max_size=4).map(
        tuple
    ),
    # unset, 0 (unset too), the last time Spark holds and the first it does not, past INT64_MAX
    event_time=st.none()
    | st.sampled_from([0, MAX_SPARK_MS, MAX_SPARK_MS + 1, 2**63, 2**64 - 1])
    | st.integers(1, 2**64 - 1),
    sequence_id=st.none() | st.integers(0, 2**64 - 1),
)


@st.composite
def entry(draw: st.DrawFn) -> bytes:
    msgs = draw(st.lists(message, min_size=1, max_size=5))
    batch = len(msgs) > 1 or draw(st.booleans())
    marker = draw(st.sampled_from([None] * 8 + [1]))
    return encode_entry(
        msgs,
        producer_name=draw(st.sampled_from(["p", "p", "q", "прод"])),
        sequence_id=draw(st.integers(0, 2**63 + 10)),
        publish_time=draw(st.sampled_from([T0, T0 + 1, 2**62, 2**64 - 1])),
        batch=batch,
        compression=draw(st.sampled_from([NONE] * 6 + [LZ4, ZSTD, ZLIB, SNAPPY])),
        schema_version=draw(st.sampled_from([None, None, b"", b"\x00\x02"])),
        checksum=draw(st.booleans() | st.just(True)),
        broker_metadata=draw(
            st.sampled_from([None, None, BrokerEntryMetadata(5, 6), BrokerEntryMetadata()])
        ),
        marker_type=marker,
    )


damage = st.none() | st.tuples(
    st.integers(0, 10**6), st.booleans(), st.integers(0, 10**6), st.integers(1, 255)
)
filters = st.none() | st.tuples(
    st.sampled_from(["<", ">=", "=", ">"]), st.integers(FIRST, FIRST + 8)
)


@settings(
    max_examples=250,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(
    entries=st.lists(entry(), max_size=8),
    hurt=damage,
    where=filters,
    batch_rows=st.integers(1, 12),
    batch_bytes=st.sampled_from([1, 20, 512 << 10]),
    first_entries=st.booleans(),
)
def test_the_c_walk_gives_the_per_entry_rows(
    entries: list[bytes],
    hurt: tuple[int, bool, int, int] | None,
    where: tuple[str, int] | None,
    batch_rows: int,
    batch_bytes: int,
    first_entries: bool,
) -> None:
    if hurt is not None and entries:  # flip one byte of an entry, or cut it short
        which, flip, at, xor = hurt
        hurt_entry = bytearray(entries[which % len(entries)])
        at %= len(hurt_entry)
        if flip:
            hurt_entry[at] ^= xor
        else:
            del hurt_entry[at:]
        entries = list(entries)
        entries[which % len(entries)] = bytes(hurt_entry)
    flt = None if where is None else EntryFilter().and_("entry_id", where[0], where[1])
    kw = {"batch_rows": batch_rows, "batch_bytes": batch_bytes, "first_entries": first_entries}
    assert _walk(_pack(entries), flt, **kw) == _per_entry(entries, flt, **kw)


def _plain(count: int, *, producer: str = "p") -> list[bytes]:
    return [
        encode_entry(
            [OutgoingMessage(bytes([i, j]) * 50, key=f"k{j}") for j in range(10)],
            producer_name=producer,
            sequence_id=10 * i,
            publish_time=T0 + i,
        )
        for i in range(count)
    ]


def test_a_block_with_chunks_and_every_kind_of_entry() -> None:
    entries = _plain(3)
    entries += encode_chunks(
        OutgoingMessage(os.urandom(2500), key="big"),
        chunk_size=600,
        producer_name="c",
        sequence_id=99,
        publish_time=T0 + 60,
        compression=LZ4,
    )
    entries += _plain(2, producer="other")
    entries.append(
        encode_entry(
            [OutgoingMessage(b"one")],
            producer_name="s",
            sequence_id=1,
            publish_time=T0,
            batch=False,
        )
    )
    entries += _plain(2)
    got, error = _walk(_pack(entries), None, batch_rows=8, batch_bytes=1 << 20, first_entries=True)
    assert error is None
    assert (
        got == _per_entry(entries, None, batch_rows=8, batch_bytes=1 << 20, first_entries=True)[0]
    )
    rows = [r for _s, columns in got for r in zip(*columns, strict=True)]
    names = [*SCHEMA.names, FIRST_ENTRY_COLUMN]
    rows = [dict(zip(names, r, strict=True)) for r in rows]
    assert len(rows) == 3 * 10 + 1 + 2 * 10 + 1 + 2 * 10
    assert rows[0]["message_id"] == f"{LEDGER}:{FIRST}:-1:0"
    assert rows[29]["message_id"] == f"{LEDGER}:{FIRST + 2}:-1:9"
    assert rows[30]["producer_name"] == "c" and rows[30]["entry_id"] == FIRST + 7  # last chunk
    assert [r["producer_name"] for r in rows[31:51]] == ["other"] * 20
    assert rows[51]["batch_index"] == -1 and rows[51]["value"] == b"one"


@needs_c
def test_the_c_walk_takes_plain_batches_in_one_call_per_arrow_batch() -> None:
    packed = _pack(_plain(30))
    rows = _rows(batch_rows=100, batch_bytes=1 << 20)
    assert rows.add_packed(packed.data, packed.offsets, 0, 30, FIRST, LEDGER) == 10
    assert rows.rows == 100 and rows.full
    batch = rows.flush()
    assert batch is not None and batch.num_rows == 100
    assert batch.column("entry_id").to_pylist() == [FIRST + i // 10 for i in range(100)]
    assert batch.column("sequence_id").to_pylist() == list(range(100))
    assert rows.add_packed(packed.data, packed.offsets, 10, 30, FIRST, LEDGER) == 20
    # a damaged entry is left aside, nothing of it staged
    hurt = bytearray(packed.data)
    ends = packed.offsets_view()
    hurt[ends[25] + 20] ^= 0xFF
    rows = _rows(batch_rows=1000, batch_bytes=1 << 20)
    assert rows.add_packed(bytes(hurt), packed.offsets, 20, 30, FIRST, LEDGER) == 25
    assert rows.rows == 50


@needs_c
@pytest.mark.parametrize("batch_bytes", [40_000, 100_000, 400_000])
def test_the_walk_grows_its_value_buffer_in_few_steps_and_not_past_the_batch(
    batch_bytes: int,
) -> None:
    """The C walk grows its buffers by half at a time, not by CPython's eighth (a realloc, and
    maybe a copy of the whole column, every few entries: 19 to 37 growths per batch here), and
    never past what the batch holds: the values' bytearray has at most ``batch_bytes`` of
    room (or its own size once the last entry took it past), up to CPython's own eighth when
    it grows by less than that (the worker's memory bound: block buffers plus one batch)."""
    import sys

    empty = sys.getsizeof(bytearray())
    packed = _pack(_plain(200) * 2)  # 10 messages of 100 bytes an entry, one entry a call
    rows = _rows(batch_rows=1 << 20, batch_bytes=batch_bytes)
    at, room, growths, most = 0, empty, 0, 0
    while at < 400:
        at = rows.add_packed(packed.data, packed.offsets, at, at + 1, FIRST, LEDGER)
        now = sys.getsizeof(rows._data)
        bound = max(batch_bytes, len(rows._data))
        assert now - empty <= bound + bound // 8 + 8, (now, len(rows._data), batch_bytes)
        growths += now != room
        room = now
        if rows.full or at == 400:
            assert rows.flush() is not None
            room, growths, most = empty, 0, max(most, growths)
    assert 0 < most <= 16, most


def test_kept_runs() -> None:
    assert kept_runs(10, 0, None) == []
    assert kept_runs(10, 5, None) == [(0, 5)]
    flt = EntryFilter().and_("entry_id", "in", [10, 11, 13, 14, 99])
    assert kept_runs(10, 5, flt) == [(0, 2), (3, 5)]
    assert kept_runs(10, 5, EntryFilter().and_("entry_id", ">", 20)) == []


@needs_c
@settings(max_examples=400, deadline=None)
@given(
    data=st.binary(max_size=300),
    ends=st.lists(st.integers(-5, 320), max_size=6),
    rows=st.integers(-1, 5),
)
def test_the_c_entry_point_never_crashes_on_garbage(
    data: bytes, ends: list[int], rows: int
) -> None:
    offsets = array("i", [0, *ends]).tobytes()
    cols = tuple(bytearray(4) if i in (3, 5, 13) else bytearray() for i in range(26))
    count = len(ends)
    nxt, n = C_MODULE.decode_entries_into(
        data, offsets, 0, count, 0, 1, -1, rows, 1 << 20, False, cols, [], []
    )
    assert 0 <= nxt <= count
    assert len(cols[0]) == 4 * n
    with pytest.raises(ValueError):
        C_MODULE.decode_entries_into(
            data, offsets, 0, count + 1, 0, 1, -1, 9, 9, False, cols, [], []
        )
    with pytest.raises(TypeError):
        C_MODULE.decode_entries_into(
            data, offsets, 0, count, 0, 1, -1, 9, 9, False, cols[:25], [], []
        )
    with pytest.raises(TypeError):  # rich offsets started without their 0
        C_MODULE.decode_entries_into(
            data,
            offsets,
            0,
            count,
            0,
            1,
            -1,
            9,
            9,
            False,
            (*cols[:16], bytearray(2), *cols[17:]),
            [],
            [],
        )
    with pytest.raises(TypeError):  # a rich column that is no bytearray
        C_MODULE.decode_entries_into(
            data, offsets, 0, count, 0, 1, -1, 9, 9, False, (*cols[:25], b""), [], []
        )


@needs_c
@given(
    prefix=st.binary(max_size=40),
    index=st.lists(st.integers(-(2**31), 2**31 - 1), max_size=20),
    base=st.integers(0, 1000),
)
def test_message_ids_in_c_and_python(prefix: bytes, index: list[int], base: int) -> None:
    from offloader.spark.message_columns import _message_ids_py

    got = []
    for fn in (C_MODULE.message_ids_into, _message_ids_py):
        offsets, data = bytearray(array("i", [base]).tobytes()), bytearray()
        fn(prefix, bytearray(array("i", index).tobytes()), offsets, data)
        got.append((bytes(offsets), bytes(data)))
    assert got[0] == got[1]
    assert got[0][1] == b"".join(prefix + str(i).encode() for i in index)


def _taken_whole(entries: list[bytes]) -> dict[str, list[Any]]:
    """Every entry staged by one C walk call (none left aside), flushed as one batch equal to
    the per-entry path's; its columns by name."""
    packed = _pack(entries)
    rows = _rows(batch_rows=1000, batch_bytes=1 << 20)
    count = len(entries)
    assert rows.add_packed(packed.data, packed.offsets, 0, count, FIRST, LEDGER) == count
    got = _batches([rows.flush()])
    assert got == _per_entry(entries, None, batch_rows=1000, batch_bytes=1 << 20)[0]
    return dict(zip(SCHEMA.names, got[0][1], strict=True))


@needs_c
def test_single_messages_are_taken_by_the_c_walk_too() -> None:
    entries = [
        encode_entry(
            [
                OutgoingMessage(
                    None if i == 3 else bytes([i]) * 5,
                    key=None if i == 2 else f"k{i}",
                    ordering_key=b"o" if i == 1 else None,
                    properties=(("a", str(i)), ("b", "é")) if i % 2 else (),
                    event_time=T0 + i if i != 4 else None,
                )
            ],
            producer_name="single",
            sequence_id=i,
            publish_time=T0 + i,
            batch=False,
        )
        for i in range(6)
    ]
    columns = _taken_whole(entries)
    assert columns["batch_index"] == [-1] * 6
    assert columns["message_id"] == [f"{LEDGER}:{FIRST + i}:-1:-1" for i in range(6)]
    assert columns["is_null"] == [False, False, False, True, False, False]
    assert columns["properties"][1] == [("a", "1"), ("b", "é")]


def _compressed(count: int, codec: int, *, base: int = 0) -> list[bytes]:
    """Batches of ten messages, some with properties, an ordering key and an event time (their
    positions are in the decompressed payload, as the values')."""
    return [
        encode_entry(
            [
                OutgoingMessage(
                    bytes([i % 7, j]) * 40,
                    key=f"k{j}",
                    properties=(("p", f"{i}.{j}"), ("é", "v")) if j % 3 == 1 else (),
                    ordering_key=b"o%d" % j if j % 4 == 2 else None,
                    event_time=T0 + j if j % 2 else None,
                )
                for j in range(10)
            ],
            producer_name="z",
            sequence_id=10 * i,
            publish_time=T0 + i,
            compression=codec,
        )
        for i in range(base, base + count)
    ]


@needs_c
@pytest.mark.parametrize("codec", [LZ4, ZLIB, ZSTD, SNAPPY])
def test_compressed_batches_are_decompressed_and_split_in_the_c_walk(codec: int) -> None:
    columns = _taken_whole(_compressed(6, codec))
    assert columns["value"][13] == bytes([1, 3]) * 40
    assert columns["message_id"][13] == f"{LEDGER}:{FIRST + 1}:-1:3"
    assert columns["properties"][14] == [("p", "1.4"), ("é", "v")]
    assert columns["ordering_key"][16] == b"o6" and columns["event_time"][16] is None


@needs_c
def test_a_compressed_batch_that_does_not_decompress_is_left_to_the_typed_error() -> None:
    """A corrupt LZ4 payload and a decompression bomb (uncompressed_size past the limit): the
    walk stages the entries before it and stops there, and the per-entry path raises the
    typed error naming ledger and entry."""
    good = _compressed(2, LZ4)
    parsed = parse_entry(_compressed(1, LZ4, base=2)[0], ledger_id=LEDGER, entry_id=0)
    # the LZ4 block's end overwritten, the entry's checksum right again
    corrupt = frame_entry(parsed.metadata, parsed.payload[:-8] + b"\xff" * 8)
    bomb = encode_entry(
        [OutgoingMessage(b"x" * 5000)],
        producer_name="z",
        sequence_id=20,
        publish_time=T0,
        compression=LZ4,
    )
    for entries, limit in (([*good, corrupt], 1 << 30), ([*good, bomb], 2000)):
        packed = _pack(entries)
        rows = _rows(batch_rows=1000, batch_bytes=1 << 20, limit=limit)
        assert rows.add_packed(packed.data, packed.offsets, 0, 3, FIRST, LEDGER) == 2
        assert rows.rows == 20
        got, error = _walk(packed, None, batch_rows=1000, batch_bytes=1 << 20, limit=limit)
        assert error is not None and f"ledger {LEDGER}" in error[1], error
        assert (got, error) == _per_entry(
            entries, None, batch_rows=1000, batch_bytes=1 << 20, limit=limit
        )


@needs_c
def test_the_walk_s_decompress_answers() -> None:
    """What the C walk does with what its decompress gives: an Exception leaves the entry to
    the Python path; anything but bytes too; KeyboardInterrupt goes through."""
    packed = _pack(_compressed(2, LZ4))

    def call(fn: Any) -> int:
        cols = tuple(bytearray(4) if i in (3, 5, 13) else bytearray() for i in range(26))
        nxt, _n, *_ = C_MODULE.decode_entries_into(
            packed.data, packed.offsets, 0, 2, 0, 1, -1, 100, 1 << 20, False, cols, [], [], fn
        )
        return int(nxt)

    from formats.pulsar.compression import decompress

    assert call(decompress) == 2
    assert call(None) == 0

    def boom(*_a: Any) -> bytes:
        raise ValueError("no")

    assert call(boom) == 0
    assert call(lambda *_a: bytearray(b"x")) == 0
    kept: list[memoryview] = []
    assert call(lambda _c, view, _s: kept.append(view)) == 0
    with pytest.raises(ValueError):  # the view on the block was released after the call
        bytes(kept[0])

    def stop(*_a: Any) -> bytes:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        call(stop)
