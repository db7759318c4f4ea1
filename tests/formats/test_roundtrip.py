"""Hypothesis round trips: block headers, blocks, whole ledgers, ledger metadata, indexes
(with and without our extension), object keys, and v2 indexes built by hand."""

from __future__ import annotations

import dataclasses
import random
import struct
import uuid as uuid_mod

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from formats.block import (
    DataBlockHeader,
    encode_block,
    is_padding,
    iter_block_entries,
    iter_framed_entries,
)
from formats.encode import encode_ledger
from formats.errors import InvalidKeyError, UnsupportedVersionError
from formats.extension import IndexExtension, crc32c
from formats.index import IndexEntry, OffloadIndex, decode_index, decode_index_v2, encode_index
from formats.keys import data_key, index_key, parse_key
from formats.layout import plan_blocks
from formats.ledger_metadata import (
    DIGEST_TYPES,
    STATES,
    Ensemble,
    LedgerMetadata,
    decode_ledger_metadata,
    encode_ledger_metadata,
)
from formats.protowire import field_varint
from formats.wire import BLOCK_HEADER_LEN, ENTRY_HEADER_LEN, INDEX_V1_HEADER, INDEX_V2_MAGIC

INT64 = st.integers(-(1 << 63), (1 << 63) - 1)
UINT63 = st.integers(0, (1 << 63) - 1)
INT32 = st.integers(-(1 << 31), (1 << 31) - 1)
FAST = settings(max_examples=150, deadline=None)


# --- block headers and blocks ------------------------------------------------------------
@FAST
@given(block_len=st.integers(BLOCK_HEADER_LEN, (1 << 63) - 1), first=UINT63)
def test_block_header_round_trip(block_len: int, first: int) -> None:
    header = DataBlockHeader(block_len=block_len, first_entry_id=first)
    raw = header.encode()
    assert len(raw) == BLOCK_HEADER_LEN
    assert raw[:4] == b"\xfb\xdb\xab\xcb"
    assert raw[28:] == bytes(100)
    assert struct.unpack(">Iqqq", raw[:28]) == (0xFBDBABCB, 128, block_len, first)
    assert DataBlockHeader.decode(raw) == header
    assert DataBlockHeader.decode(b"xx" + raw, 2) == header


@FAST
@given(
    lengths=st.lists(st.integers(0, 300), min_size=1, max_size=20),
    first=st.integers(0, 1 << 40),
    slack=st.integers(0, 40),
    data=st.data(),
)
def test_block_round_trip(lengths: list[int], first: int, slack: int, data: st.DataObject) -> None:
    payloads = [data.draw(st.binary(min_size=n, max_size=n)) for n in lengths]
    used = BLOCK_HEADER_LEN + sum(ENTRY_HEADER_LEN + n for n in lengths)
    block = encode_block(first, payloads, used + slack)
    assert len(block) == used + slack
    assert is_padding(block[used:])
    entries = list(iter_block_entries(block, base_offset=1000, expected_first_entry_id=first))
    assert [e.entry_id for e in entries] == list(range(first, first + len(payloads)))
    assert [bytes(e.payload) for e in entries] == payloads
    assert entries[0].offset == 1000 + BLOCK_HEADER_LEN


@FAST
@given(
    lengths=st.lists(st.integers(0, 500), min_size=1, max_size=60),
    max_block=st.integers(141, 2000),
)
def test_plan_blocks_follows_pulsars_rule(lengths: list[int], max_block: int) -> None:
    lengths = [min(n, max_block - 140) for n in lengths]
    plans = plan_blocks(lengths, max_block)
    assert plans[0].first_entry_id == 0 and plans[-1].last_entry_id == len(lengths) - 1
    offset = 0
    for i, plan in enumerate(plans):
        assert plan.part_number == i + 1
        assert plan.offset == offset
        assert plan.entry_count >= 1
        assert plan.padding_bytes >= 0
        if i + 1 < len(plans):
            assert plan.size == max_block
            assert plans[i + 1].first_entry_id == plan.last_entry_id + 1
            # the next entry really did not fit
            nxt = lengths[plan.last_entry_id + 1]
            assert plan.size - plan.padding_bytes + ENTRY_HEADER_LEN + nxt > max_block
        else:
            assert plan.padding_bytes == 0  # the last block is sized exactly
        offset += plan.size


@settings(max_examples=80, deadline=None)
@given(
    lengths=st.lists(st.integers(0, 400), min_size=1, max_size=80),
    max_block=st.integers(141, 3000),
    interval=st.sampled_from([1, 64, 500, 65536]),
    seed=st.integers(0, 1 << 32),
)
def test_ledger_round_trip(lengths: list[int], max_block: int, interval: int, seed: int) -> None:
    rng = random.Random(seed)
    lengths = [min(n, max_block - 140) for n in lengths]
    payloads = [rng.randbytes(n) for n in lengths]
    md = LedgerMetadata.closed_default(last_entry_id=0, length=0, ctime=1)
    enc = encode_ledger(payloads, md, max_block, fine_interval=interval)
    index = decode_index(enc.index)
    assert index == enc.offload_index
    assert index.last_entry_id == len(payloads) - 1
    assert index.length == sum(lengths)
    assert index.data_object_length == len(enc.data)
    assert index.extension is not None
    view = memoryview(enc.data)
    got: list[bytes] = []
    for block in range(index.block_count):
        start, end = index.block_span(block)
        assert crc32c(view[start:end]) == index.extension.block_crc32c[block]
        got += [
            bytes(e.payload)
            for e in iter_block_entries(
                view[start:end],
                base_offset=start,
                expected_first_entry_id=index.entries[block].entry_id,
            )
        ]
    assert got == payloads
    # random access through locate() (fine offsets): one range holds the entry
    for entry_id in range(len(payloads)):
        loc = index.locate(entry_id)
        assert loc.block == index.block_for(entry_id)
        found = [
            e
            for e in iter_framed_entries(
                view[: loc.end_offset],
                loc.start_offset,
                loc.start_entry_id,
                end_entry_id=entry_id,
                check_padding=False,
            )
            if e.entry_id == entry_id
        ]
        assert [bytes(e.payload) for e in found] == [payloads[entry_id]]
    # Pulsar's view of the same index: the plain bytes are a prefix
    plain = encode_index(index, with_extension=False)
    assert enc.index.startswith(plain)
    assert decode_index(plain).extension is None


# --- ledger metadata ----------------------------------------------------------------------
ensembles = st.lists(
    st.builds(
        Ensemble,
        first_entry_id=INT64,
        bookies=st.lists(st.text(max_size=20), max_size=4).map(tuple),
    ),
    max_size=4,
).map(tuple)

metadata = st.builds(
    LedgerMetadata,
    ensemble_size=INT32,
    write_quorum_size=INT32,
    ack_quorum_size=st.none() | INT32,
    last_entry_id=st.none() | INT64,
    length=INT64,
    state=st.sampled_from(sorted(STATES.values())),
    ensembles=ensembles,
    digest_type=st.none() | st.sampled_from(sorted(DIGEST_TYPES.values())),
    ctime=st.none() | INT64,
    custom_metadata=st.lists(
        st.tuples(st.text(max_size=20), st.binary(max_size=30)), max_size=5
    ).map(tuple),
)


@settings(max_examples=300, deadline=None)
@given(md=metadata)
def test_ledger_metadata_round_trip(md: LedgerMetadata) -> None:
    raw = encode_ledger_metadata(md)
    assert decode_ledger_metadata(raw) == md
    assert LedgerMetadata.from_json(md.to_json()) == md


def test_ledger_metadata_decodes_password_and_ctoken_but_never_writes_them() -> None:
    md = LedgerMetadata.closed_default(last_entry_id=2, length=60, ctime=5)
    raw = encode_ledger_metadata(md) + b"\x42\x03abc" + field_varint(12, 7)
    decoded = decode_ledger_metadata(raw)
    assert decoded.password == b"abc" and decoded.ctoken == 7
    assert encode_ledger_metadata(decoded) == encode_ledger_metadata(md)


# --- index --------------------------------------------------------------------------------
@st.composite
def indexes(draw: st.DrawFn) -> OffloadIndex:
    sizes = draw(st.lists(st.integers(140, 1 << 30), min_size=1, max_size=12))
    steps = draw(st.lists(st.integers(1, 1000), min_size=len(sizes), max_size=len(sizes)))
    first_ids = [0]
    for step in steps[:-1]:
        first_ids.append(first_ids[-1] + step)
    offsets = [0]
    for size in sizes[:-1]:
        offsets.append(offsets[-1] + size)
    rows = tuple(
        IndexEntry(e, i + 1, o) for i, (e, o) in enumerate(zip(first_ids, offsets, strict=True))
    )
    last = first_ids[-1] + steps[-1] - 1
    md = dataclasses.replace(draw(metadata), last_entry_id=last)
    extension = None
    if draw(st.booleans()):
        points = sorted(
            set(
                draw(
                    st.lists(st.tuples(st.integers(0, last), st.integers(0, 1 << 40)), max_size=10)
                )
            )
        )
        fine: list[tuple[int, int]] = []
        for e, o in points:
            if not fine or (e > fine[-1][0] and o > fine[-1][1]):
                fine.append((e, o))
        extension = IndexExtension(
            tuple(
                draw(
                    st.lists(st.integers(0, (1 << 32) - 1), min_size=len(rows), max_size=len(rows))
                )
            ),
            tuple(fine),
        )
    return OffloadIndex(md, rows, sum(sizes), extension=extension)


@settings(max_examples=200, deadline=None)
@given(index=indexes(), trailing=st.binary(max_size=8).filter(lambda b: not b.startswith(b"LOIX")))
def test_index_round_trip(index: OffloadIndex, trailing: bytes) -> None:
    raw = encode_index(index)
    assert decode_index(raw) == index
    plain = encode_index(index, with_extension=False)
    header = INDEX_V1_HEADER.unpack_from(plain)
    assert header[1] == len(plain)  # index_block_len covers Pulsar's part only
    assert raw.startswith(plain)
    decoded_plain = decode_index(plain + trailing)  # trailing bytes are ignored, as Pulsar does
    assert decoded_plain.extension is None
    assert decoded_plain.entries == index.entries
    assert decoded_plain.ledger_metadata == index.ledger_metadata
    for row in index.entries:
        assert index.block_for(row.entry_id) == index.entries.index(row)
    assert index.block_for(index.last_entry_id) == index.block_count - 1


# --- keys ---------------------------------------------------------------------------------
prefixes = st.sampled_from(["", "offload/", "tenant/ns/", "a-"])


@FAST
@given(u=st.uuids(), ledger_id=INT64, prefix=prefixes)
def test_keys_round_trip(u: uuid_mod.UUID, ledger_id: int, prefix: str) -> None:
    dk, ik = data_key(str(u), ledger_id, prefix), index_key(str(u), ledger_id, prefix)
    assert dk == f"{prefix}{u}-ledger-{ledger_id}" and ik == dk + "-index"
    parsed_data, parsed_index = parse_key(dk, prefix), parse_key(ik, prefix)
    assert (parsed_data.uuid, parsed_data.ledger_id, parsed_data.is_index) == (
        str(u),
        ledger_id,
        False,
    )
    assert (parsed_index.uuid, parsed_index.ledger_id, parsed_index.is_index) == (
        str(u),
        ledger_id,
        True,
    )
    assert parsed_data.data_key == dk.removeprefix(prefix)
    assert parsed_index.index_key == ik.removeprefix(prefix)
    # upper-case UUIDs are written in Java's lower-case form
    assert data_key(str(u).upper(), ledger_id) == data_key(str(u), ledger_id)


@pytest.mark.parametrize(
    "key",
    [
        "",
        "ledger-1",
        "98398846-5454-44a1-9327-58d38316137e-ledger-",
        "98398846-5454-44a1-9327-58d38316137e-ledger-1-idx",
        "98398846-5454-44a1-9327-58d38316137E-ledger-1",
        "98398846-5454-44a1-9327-58d38316137e-ledger-99999999999999999999",
        "98398846-5454-44a1-9327-58d38316137e-ledger-9223372036854775808",
        "x98398846-5454-44a1-9327-58d38316137e-ledger-1",
    ],
)
def test_bad_keys_are_refused(key: str) -> None:
    with pytest.raises(InvalidKeyError):
        parse_key(key)


def test_key_with_wrong_prefix_is_refused() -> None:
    with pytest.raises(InvalidKeyError):
        parse_key("98398846-5454-44a1-9327-58d38316137e-ledger-1", "offload/")
    with pytest.raises(InvalidKeyError):
        data_key("not-a-uuid", 1)


# --- v2 index (PIP-76), built by hand from spec/index-format.md §5 -----------------------
def _ledger_info(ledger_id: int, entries: int, size: int, timestamp: int) -> bytes:
    """A ``ManagedLedgerInfo.LedgerInfo``: ledgerId 1, entries 2, size 3, timestamp 4."""
    return (
        field_varint(1, ledger_id)
        + field_varint(2, entries)
        + field_varint(3, size)
        + field_varint(4, timestamp)
    )


def build_v2_index(
    records: list[tuple[int, int, int, list[tuple[int, int, int]]]], data_len: int
) -> bytes:
    """records: (ledger_id, entries, size, rows[(entry_id, part_id, offset)])."""
    body = b""
    for ledger_id, entries, size, rows in records:
        info = _ledger_info(ledger_id, entries, size, 1_700_000_000_000)
        body += struct.pack(">qii", ledger_id, len(rows), len(info)) + info
        body += b"".join(struct.pack(">qiq", *row) for row in rows)
    header_len = 4 + 4 + 8 + 8
    return struct.pack(">Iiqq", INDEX_V2_MAGIC, header_len + len(body), data_len, 128) + body


@FAST
@given(
    spec=st.lists(
        st.tuples(
            st.integers(0, 1 << 40),  # ledger id
            st.lists(st.integers(1, 50), min_size=1, max_size=4),  # entries per block
            st.integers(0, 1 << 30),  # size
        ),
        min_size=1,
        max_size=4,
        unique_by=lambda t: t[0],
    ),
    block=st.integers(140, 1 << 20),
)
def test_v2_index_decode(spec: list[tuple[int, list[int], int]], block: int) -> None:
    records = []
    offset = 0
    part = 1
    for ledger_id, per_block, size in spec:
        rows, first = [], 0
        for count in per_block:
            rows.append((first, part, offset))
            first += count
            part += 1
            offset += block
        records.append((ledger_id, first, size, rows))
    raw = build_v2_index(records, offset)
    with pytest.raises(UnsupportedVersionError):
        decode_index(raw)
    decoded = decode_index_v2(raw)
    assert sorted(decoded) == sorted(r[0] for r in records)
    for ledger_id, entries, size, rows in records:
        index = decoded[ledger_id]
        assert index.version == 2 and index.ledger_id == ledger_id
        assert index.last_entry_id == entries - 1 and index.length == size
        assert index.ledger_metadata.is_closed
        assert [(r.entry_id, r.part_id, r.offset) for r in index.entries] == rows
        assert index.data_object_length == offset
        for i, (_e, _p, start) in enumerate(rows):
            assert index.block_span(i) == (start, start + block)
        assert index.block_for(entries - 1) == len(rows) - 1
