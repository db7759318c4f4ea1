"""formats/kafka/columns.py: the C record loop (formats/_kafka_speedups.c) against its
pure-Python twin, with hypothesis: the same columns for every batch, and for malformed records
(cut, flipped, garbage) the C loop declines (None) exactly where the pure one raises, so the
public decoder raises the same typed error either way; and the columns are decode_records'."""

from __future__ import annotations

import gc
import os
from typing import Any, NamedTuple

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from formats.kafka import columns
from formats.kafka.batch import HEADER_SIZE, decode_records, read_batch_header
from formats.kafka.columns import (
    C_MODULE,
    batch_columns,
    batch_rows,
    decode_columns,
    decode_columns_py,
    decode_rows,
    decode_rows_py,
)
from formats.kafka.encode import NewRecord, encode_batch, encode_record
from formats.kafka.errors import KafkaCorruptError, KafkaFormatError, KafkaTruncatedError
from formats.kafka.varint import write_varint

#: the extension (None only when pure Python is asked for: the tests below are skipped then)
C: Any = C_MODULE
PURE = os.environ.get("LEDGER_OFFLOADER_PURE_PYTHON", "") not in ("", "0")
pytestmark = pytest.mark.skipif(PURE, reason="LEDGER_OFFLOADER_PURE_PYTHON set: no C to compare")

blob = st.none() | st.binary(max_size=12)
header = st.tuples(st.text(max_size=5), blob)
record = st.builds(
    NewRecord,
    st.integers(0, 2**40),
    blob,
    blob,
    st.lists(header, max_size=3).map(tuple),
)
SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def test_the_kafka_c_loop_is_built() -> None:
    """`make install` compiles formats/_kafka_speedups.c; the suite fails on a silent fallback
    to Python."""
    assert C_MODULE is not None, "formats._kafka_speedups is not built: run `make install`"


def _args(
    payload: bytes, base: int = 100, count: int | None = None, last: int | None = None
) -> tuple[bytes, int, int, int, bool, int, int]:
    return (payload, base, 1_000, 2_000, False, 10**6 if last is None else last, count or 0)


class Row(NamedTuple):
    """A row of the rows mode (the shape of KafkaRecordRow: two fields before, one after)."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    tier: str


def _both(args: tuple[bytes, int, int, int, bool, int, int]) -> None:
    """C's answer is pure Python's, or None where pure Python raises (or computes a value
    beyond int64); the public decoder gives the same result or the same error either way;
    and the same in rows mode."""
    _both_rows(args)
    c = C.decode_columns(*args)
    try:
        pure = decode_columns_py(*args)
    except KafkaFormatError as exc:
        assert c is None
        with pytest.raises(type(exc)) as caught:
            decode_columns(*args)
        assert str(caught.value) == str(exc)
        return
    assert c is None or c == pure
    assert tuple(decode_columns(*args).__dict__.values()) == pure


def _both_rows(args: tuple[bytes, int, int, int, bool, int, int]) -> None:
    rows_args = (*args, -(2**63), -1, Row, ("t", 0), 0, ("remote",))
    c = C.decode_columns(*rows_args)
    try:
        pure = decode_rows_py(*rows_args)
    except KafkaFormatError as exc:
        assert c is None
        with pytest.raises(type(exc)) as caught:
            decode_rows(*rows_args)
        assert str(caught.value) == str(exc)
        return
    assert c is None or c == pure
    assert decode_rows(*rows_args) == pure


def test_rows_mode_refuses_a_row_type_that_is_not_a_tuple() -> None:
    args = _args(b"", count=0)
    with pytest.raises(TypeError, match="tuple subclass"):
        C.decode_columns(*args, -1, -1, dict, (), 0, ())
    with pytest.raises(TypeError):
        C.decode_columns(*args, -1, -1, Row, ["not", "a tuple"], 0, ())
    assert C.decode_columns(*args, -1, -1, Row, (), 0, ()) == []  # no records: no rows


def test_c_rows_are_untracked_by_the_gc_unless_they_could_hold_a_cycle() -> None:
    """Rows of ints, bytes, str and header tuples can never be in a reference cycle: the C
    loop leaves them (and their header tuples) out of the garbage collector's lists, which
    would otherwise walk thousands per fetch; a row whose head holds a container (a list
    that could later hold the row) stays tracked, and so does a row type with a ``__dict__``."""
    records = [NewRecord(5, b"k", b"v", (("h", b"x"), ("i", None))), NewRecord(6, None, b"w")]
    payload = encode_batch(records, base_offset=100)[HEADER_SIZE:]
    args = (payload, 100, 5, 6, False, 1, 2, -(2**63), -1)
    rows = C.decode_columns(*args, Row, ("t", 0), 0, ("remote",))
    assert [r.offset for r in rows] == [100, 101] and rows[0].headers[1] == ("i", None)
    assert not any(gc.is_tracked(r) for r in rows)
    assert not gc.is_tracked(rows[0].headers) and not gc.is_tracked(rows[0].headers[0])
    assert rows == decode_rows_py(*args, Row, ("t", 0), 0, ("remote",))
    shared: list[Any] = []
    held = C.decode_columns(*args, Row, ("t", shared), 0, ("remote",))
    assert all(gc.is_tracked(r) for r in held)
    shared.append(held)  # a cycle the collector must still find

    class Loose(tuple):  # type: ignore[type-arg]  # instances have a __dict__
        pass

    loose = C.decode_columns(*args, Loose, ("t", 0), 0, ("remote",))
    assert all(gc.is_tracked(r) for r in loose)


@SETTINGS
@given(
    st.lists(record, min_size=1, max_size=8),
    st.integers(0, 2**62),
    st.booleans(),
    st.integers(-1, 9),
    st.integers(-1, 9),
)
def test_c_columns_are_the_pure_columns_and_the_records(
    rows: list[NewRecord], base: int, log_append: bool, skip: int, limit: int
) -> None:
    batch = encode_batch(rows, base_offset=base, log_append_time=2**41 if log_append else None)
    h = read_batch_header(batch, 0)
    payload = batch[HEADER_SIZE:]
    args = (
        payload,
        h.base_offset,
        h.base_timestamp,
        h.max_timestamp,
        h.timestamp_type == 1,
        h.last_offset_delta,
        h.record_count,
    )
    assert (h.timestamp_type == 1) == log_append
    c = C.decode_columns(*args)
    assert c is not None and c == decode_columns_py(*args)
    cols = batch_columns(batch, h)
    records = decode_records(batch, h)
    assert cols.offsets == [r.offset for r in records]
    assert cols.timestamps == [r.timestamp for r in records]
    assert cols.keys == [r.key for r in records]
    assert cols.values == [r.value for r in records]
    assert cols.headers == [r.headers for r in records]
    # from an offset, at most ``limit`` records: the same slice from both loops
    lo = base + skip
    sliced = C.decode_columns(*args, lo, limit)
    assert sliced == decode_columns_py(*args, lo, limit)
    kept = [i for i, o in enumerate(cols.offsets) if o >= lo]
    kept = kept if limit < 0 else kept[:limit]
    assert sliced[0] == [cols.offsets[i] for i in kept]
    assert sliced[3] == [cols.values[i] for i in kept]
    # rows mode: the same records as rows, built in C and by the pure twin alike
    rows_args = (*args, lo, limit, Row, ("t", 3), h.timestamp_type, ("remote",))
    c_rows = C.decode_columns(*rows_args)
    pure_rows = decode_rows_py(*rows_args)
    assert c_rows is not None and c_rows == pure_rows
    assert all(type(r) is Row for r in c_rows) and all(type(r) is Row for r in pure_rows)
    assert c_rows == [
        Row("t", 3, cols.offsets[i], cols.timestamps[i], h.timestamp_type, cols.keys[i],
            cols.values[i], cols.headers[i], "remote")
        for i in kept
    ]  # fmt: skip
    assert batch_rows(batch, h, Row, ("t", 3), ("remote",), lo=lo, limit=limit) == c_rows
    assert [r.offset for r in c_rows] == sliced[0] and [r.key for r in c_rows] == sliced[2]


@SETTINGS
@given(
    st.lists(record, min_size=1, max_size=4),
    st.data(),
)
def test_malformed_records_raise_the_same_typed_error(
    rows: list[NewRecord], data: st.DataObject
) -> None:
    payload = bytearray(b"".join(encode_record(r, i, 0) for i, r in enumerate(rows)))
    how = data.draw(st.sampled_from(["cut", "flip", "splice", "count", "garbage"]))
    count = len(rows)
    if how == "cut" and payload:
        del payload[data.draw(st.integers(0, len(payload) - 1)) :]
    elif how == "flip":
        at = data.draw(st.integers(0, len(payload) - 1))
        payload[at] ^= data.draw(st.integers(1, 255))
    elif how == "splice":
        at = data.draw(st.integers(0, len(payload)))
        payload[at:at] = data.draw(st.binary(min_size=1, max_size=6))
    elif how == "count":
        count = data.draw(st.integers(0, len(rows) + 2))
    else:
        payload = bytearray(data.draw(st.binary(max_size=40)))
        count = data.draw(st.integers(0, 4))
    last = data.draw(st.integers(0, len(rows) + 1))
    _both(_args(bytes(payload), count=count, last=last))


@pytest.mark.parametrize(
    ("payload", "error"),
    [
        (write_varint(3) + b"\x00\x00\x00", KafkaCorruptError),  # record shorter than 6 bytes
        (write_varint(40) + b"\x00" * 10, KafkaCorruptError),  # length past the region
        (b"\xff\xff\xff\xff\xff\xff", KafkaCorruptError),  # a varint longer than 5 bytes
        (b"\x80", KafkaTruncatedError),  # the region ends inside a varint
        (b"", KafkaTruncatedError),  # a record announced, none there
    ],
)
def test_named_errors(payload: bytes, error: type[Exception]) -> None:
    args = _args(payload, count=1)
    assert C.decode_columns(*args) is None
    with pytest.raises(error):
        decode_columns(*args)


def test_header_keys_must_be_utf8_and_never_null() -> None:
    for key in (write_varint(2) + b"\xff\xfe", write_varint(-1)):
        body = b"\x00" + write_varint(0) + write_varint(0) + write_varint(-1) + write_varint(-1)
        body += write_varint(1) + key + write_varint(-1)
        payload = write_varint(len(body)) + body
        _both(_args(payload, count=1))
        with pytest.raises(KafkaCorruptError, match="header key"):
            decode_columns(*_args(payload, count=1))


def test_int64_overflow_is_left_to_the_pure_loop() -> None:
    body = b"\x00" + write_varint(2**62) + write_varint(0) + write_varint(-1) + write_varint(-1)
    body += write_varint(0)
    payload = write_varint(len(body)) + body
    args = (payload, 0, 2**62, 0, False, 0, 1)
    assert C.decode_columns(*args) is None
    assert decode_columns(*args).timestamps == [2**63]


def test_pure_python_is_used_when_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(columns, "C_MODULE", None)
    batch = encode_batch([NewRecord(5, b"k", b"v", (("h", None),))], base_offset=7)
    cols = batch_columns(batch, read_batch_header(batch, 0))
    assert (cols.offsets, cols.keys, cols.values, cols.headers) == (
        [7],
        [b"k"],
        [b"v"],
        [(("h", None),)],
    )
