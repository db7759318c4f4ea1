"""``split_into`` (a batch appended straight into column bytearrays) against its pure-Python
twin and against ``split_columns``: hypothesis batches of every SingleMessageMetadata field
(compacted messages, null keys and values, non-ASCII keys, properties), flipped and cut bytes,
what it leaves to the list path (sequence ids past BIGINT, offsets past 2**31 - 1)."""

from __future__ import annotations

import os
from array import array

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from formats.pulsar import PulsarMessageError
from formats.pulsar.batch import split_columns, split_into
from formats.pulsar.errors import MalformedMessageError
from formats.pulsar.metadata import (
    MessageMetadata,
    SingleMessageMetadata,
    encode_single_message_metadata,
)
from formats.pulsar.rich_columns import MAX_SPARK_MS, RICH_COLUMNS
from formats.pulsar.speedups import C_MODULE

PURE = os.environ.get("LEDGER_OFFLOADER_PURE_PYTHON", "") not in ("", "0")
needs_c = pytest.mark.skipif(PURE, reason="LEDGER_OFFLOADER_PURE_PYTHON set: no C to compare")

text = st.text(max_size=6)
single = st.builds(
    SingleMessageMetadata,
    properties=st.lists(st.tuples(st.sampled_from(["", "a", "ключ"]) | text, text), max_size=4).map(
        tuple
    ),
    partition_key=st.none() | text,
    compacted_out=st.none() | st.booleans(),
    event_time=st.none() | st.integers(0, 2**64 - 1),
    ordering_key=st.none() | st.binary(max_size=4),
    sequence_id=st.none() | st.integers(0, 2**63 - 1),
    null_value=st.none() | st.booleans(),
    null_partition_key=st.none() | st.booleans(),
)


def _batch(metas: list[SingleMessageMetadata], values: list[bytes]) -> bytes:
    parts = []
    for meta, value in zip(metas, values, strict=True):
        meta.payload_size = len(value)
        raw = encode_single_message_metadata(meta)
        parts += [len(raw).to_bytes(4, "big"), raw, value]
    return b"".join(parts)


def _cols(value_base: int = 0, key_base: int = 0) -> tuple[bytearray, ...]:
    """18 staging bytearrays (the 10 rich ones not started), the offsets going on from the
    given bases."""
    cols = tuple(bytearray() for _ in range(8 + RICH_COLUMNS))
    cols[3].extend(array("i", (value_base,)))
    cols[5].extend(array("i", (key_base,)))
    return cols


def _run(md: MessageMetadata, payload: bytes, use_c: bool) -> object:
    """(what split_into returns, the bytearrays after) or the typed error's type."""
    cols = _cols(7, 3)
    try:
        staged = split_into(md, payload, cols, use_c=use_c)
    except PulsarMessageError as exc:
        return type(exc), [bytes(c) for c in cols]
    return staged, [bytes(c) for c in cols]


def _unpack(cols: tuple[bytearray, ...], n: int) -> dict[str, list[object]]:
    """The staged columns back as Python lists (from the bases 7 and 3 of ``_run``)."""
    index = list(array("i", bytes(cols[0])))
    seq = list(array("q", bytes(cols[1])))
    voff = list(array("i", bytes(cols[3])))
    koff = list(array("i", bytes(cols[5])))
    values = [bytes(cols[4][voff[i] - 7 : voff[i + 1] - 7]) for i in range(n)]
    keys = [
        bytes(cols[6][koff[i] - 3 : koff[i + 1] - 3]).decode() if cols[7][i] else None
        for i in range(n)
    ]
    return {
        "index": index,
        "seq": seq,
        "null": list(map(bool, cols[2])),
        "value": values,
        "key": keys,
        **unpack_rich(cols[8:], n),
    }


def unpack_rich(rich: tuple[bytearray, ...], n: int) -> dict[str, list[object]]:
    """The 10 rich bytearrays back as the lists ``split_columns`` gives (a column not started:
    every row unset; an event time past Spark's range: None)."""
    ordering: list[object] = [None] * n
    if rich[2]:
        off = list(array("i", bytes(rich[0])))
        assert len(off) == n + 1 and len(rich[2]) == n and off[0] == 0
        ordering = [bytes(rich[1][off[i] : off[i + 1]]) if rich[2][i] else None for i in range(n)]
        assert all(off[i] == off[i + 1] for i in range(n) if not rich[2][i])
    props: list[object] = [()] * n
    if rich[3]:
        maps = list(array("i", bytes(rich[3])))
        koff = list(array("i", bytes(rich[4])))
        voff = list(array("i", bytes(rich[6])))
        assert len(maps) == n + 1 and maps[0] == koff[0] == voff[0] == 0
        assert len(koff) == len(voff) == maps[-1] + 1
        keys = [bytes(rich[5][koff[i] : koff[i + 1]]).decode() for i in range(maps[-1])]
        vals = [bytes(rich[7][voff[i] : voff[i + 1]]).decode() for i in range(maps[-1])]
        pairs = list(zip(keys, vals, strict=True))
        props = [tuple(pairs[maps[i] : maps[i + 1]]) for i in range(n)]
    events: list[object] = [None] * n
    if rich[9]:
        micros = list(array("q", bytes(rich[8])))
        assert len(micros) == len(rich[9]) == n
        assert all(m % 1000 == 0 and (m == 0 or v) for m, v in zip(micros, rich[9], strict=True))
        events = [m // 1000 if v else None for m, v in zip(micros, rich[9], strict=True)]
    return {"ordering": ordering, "props": props, "events": events}


@settings(max_examples=250, deadline=None)
@given(
    metas=st.lists(single, max_size=6),
    values=st.data(),
    base=st.integers(0, 2**62),
    damage=st.none() | st.tuples(st.booleans(), st.integers(0, 10**6), st.integers(1, 255)),
)
def test_c_and_python_twins_agree(
    metas: list[SingleMessageMetadata],
    values: st.DataObject,
    base: int,
    damage: tuple[bool, int, int] | None,
) -> None:
    payload = bytearray(_batch(metas, [values.draw(st.binary(max_size=5)) for _ in metas]))
    if damage is not None and payload:  # flip one byte, or cut the payload short
        flip, at, xor = damage
        at %= len(payload)
        if flip:
            payload[at] ^= xor
        else:
            del payload[at:]
    md = MessageMetadata("p", base, 1, num_messages_in_batch=len(metas))
    c_result = _run(md, bytes(payload), use_c=True)
    py_result = _run(md, bytes(payload), use_c=False)
    assert c_result == py_result
    staged, after = c_result  # type: ignore[misc]
    if isinstance(staged, type):  # a typed error: nothing appended
        assert after == [bytes(c) for c in _cols(7, 3)]
        return
    # the same rows as split_columns gives
    index, keys, ordering, props, events, seqs, nulls, vals, _ = split_columns(md, bytes(payload))
    assert staged is not None
    n = staged
    assert n == len(index)
    cols = tuple(bytearray(c) for c in after)
    unpacked = _unpack(cols, n)
    assert unpacked["index"] == index
    assert unpacked["key"] == keys
    assert unpacked["null"] == nulls
    assert unpacked["value"] == vals
    assert unpacked["seq"] == [
        base + i if s is None else s for i, s in zip(index, seqs, strict=True)
    ]
    assert unpacked["ordering"] == ordering
    assert unpacked["props"] == props
    assert unpacked["events"] == [e if e and e <= MAX_SPARK_MS else None for e in events]
    assert cols[3][:4] == array("i", (7,)).tobytes() and cols[5][:4] == array("i", (3,)).tobytes()


@needs_c
def test_the_c_split_makes_no_object_per_message() -> None:
    metas = [SingleMessageMetadata(partition_key=f"k{i % 3}é") for i in range(50)]
    payload = _batch(metas, [bytes([i]) * 3 for i in range(50)])
    md = MessageMetadata("p", 10, 1, num_messages_in_batch=50)
    cols = _cols()
    assert C_MODULE.split_batch_into(payload, 50, 10, cols) == 50
    assert not any(cols[8:])  # no rich column started
    assert list(array("i", bytes(cols[3]))) == [3 * i for i in range(51)]
    assert list(array("q", bytes(cols[1]))) == list(range(10, 60))
    assert bytes(cols[6]).decode() == "".join(f"k{i % 3}é" for i in range(50))
    assert split_into(md, payload, _cols(), use_c=False) == 50


def test_what_is_left_to_the_list_path_appends_nothing() -> None:
    payload = _batch([SingleMessageMetadata(partition_key="k")] * 2, [b"ab", b"c"])
    past_bigint = MessageMetadata("p", 2**63 - 1, 1, num_messages_in_batch=2)
    big_seq = _batch([SingleMessageMetadata(sequence_id=2**63)], [b"x"])
    near_limit = MessageMetadata("p", 0, 1, num_messages_in_batch=2)
    for use_c in (True, False):
        cols = _cols()
        assert split_into(past_bigint, payload, cols, use_c=use_c) is None  # 2**63 - 1 + 1
        one = MessageMetadata("p", 0, 1, num_messages_in_batch=1)
        assert split_into(one, big_seq, cols, use_c=use_c) is None
        assert split_into(near_limit, payload, _cols(2**31 - 2), use_c=use_c) is None
        assert split_into(near_limit, payload, _cols(0, 2**31 - 1), use_c=use_c) is None
        assert [bytes(c) for c in cols] == [bytes(c) for c in _cols()]


def test_a_key_that_is_not_utf8_is_the_typed_error() -> None:
    raw = encode_single_message_metadata(SingleMessageMetadata(partition_key="k", payload_size=0))
    bad = raw.replace(b"\x01k", b"\x01\xff")
    payload = len(bad).to_bytes(4, "big") + bad
    md = MessageMetadata("p", 0, 1, num_messages_in_batch=1)
    # a surrogate, an overlong form, a code point past U+10FFFF
    for wrong in (b"\xed\xa0\x80", b"\xe0\x80\x80", b"\xf4\x90\x80\x80"):
        fill = "x" * len(wrong)
        raw_wrong = encode_single_message_metadata(SingleMessageMetadata(partition_key=fill))
        bad_wrong = raw_wrong.replace(fill.encode(), wrong)
        for use_c in (True, False):
            with pytest.raises(MalformedMessageError):
                split_into(md, len(bad_wrong).to_bytes(4, "big") + bad_wrong, _cols(), use_c=use_c)
    for use_c in (True, False):
        cols = _cols()
        with pytest.raises(MalformedMessageError):
            split_into(md, payload, cols, use_c=use_c)
        assert len(cols[0]) == 0


@needs_c
def test_the_c_split_wants_its_bytearrays() -> None:
    with pytest.raises(TypeError):
        C_MODULE.split_batch_into(b"", 0, 0, (bytearray(),) * 17)
    with pytest.raises(TypeError):
        C_MODULE.split_batch_into(b"", 0, 0, (bytearray(),) * 18)  # offsets without their 0
    with pytest.raises(TypeError):  # rich offsets started without their 0
        C_MODULE.split_batch_into(b"", 0, 0, (*_cols()[:11], bytearray(2), *_cols()[12:]))


@settings(max_examples=150, deadline=None)
@given(batches=st.lists(st.lists(single, max_size=4), min_size=2, max_size=4), data=st.data())
def test_rows_staged_before_are_filled_in(
    batches: list[list[SingleMessageMetadata]], data: st.DataObject
) -> None:
    """Batches one after the other into the same staging: a rich column started by a later
    batch fills in the earlier rows; C and Python append the same bytes."""
    payloads = [
        _batch(metas, [data.draw(st.binary(max_size=3)) for _ in metas]) for metas in batches
    ]
    mds = [MessageMetadata("p", 5, 1, num_messages_in_batch=len(metas)) for metas in batches]
    staged = []
    for use_c in (True, False):
        cols = _cols(7, 3)
        counts = [
            split_into(md, payload, cols, use_c=use_c)
            for md, payload in zip(mds, payloads, strict=True)
        ]
        staged.append((counts, [bytes(c) for c in cols]))
    assert staged[0] == staged[1]
    counts, after = staged[0]
    n = sum(counts)  # type: ignore[arg-type]
    unpacked = _unpack(tuple(bytearray(c) for c in after), n)
    want: dict[str, list[object]] = {"ordering": [], "props": [], "events": []}
    for md, payload in zip(mds, payloads, strict=True):
        _i, _k, ordering, props, events, *_rest = split_columns(md, payload)
        want["ordering"] += ordering
        want["props"] += props
        want["events"] += [e if e and e <= MAX_SPARK_MS else None for e in events]
    assert {k: unpacked[k] for k in want} == want


def test_rich_offsets_past_int32_are_left_to_the_list_path() -> None:
    payload = _batch([SingleMessageMetadata(properties=(("k", "v"),), ordering_key=b"o")], [b"x"])
    md = MessageMetadata("p", 0, 1, num_messages_in_batch=1)
    for col in (0, 4, 6):  # ordering bytes, property keys, property values
        for use_c in (True, False):
            cols = _cols()
            cols[8 + col].extend(array("i", (0, 2**31 - 1)))
            if col:
                cols[8 + 3].extend(array("i", (0, 1)))
                cols[8 + (10 - col)].extend(array("i", (0, 0)))  # the other string child
            else:
                cols[8 + 2].extend(b"\x01")
            before = [bytes(c) for c in cols]
            assert split_into(md, payload, cols, use_c=use_c) is None
            assert [bytes(c) for c in cols] == before
