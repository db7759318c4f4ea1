"""Golden objects written by Apache Pulsar (tests/golden): read them entry by entry, and
re-encode them from regenerated payloads byte for byte."""

from __future__ import annotations

import hashlib

import pytest

from formats.block import DataBlockHeader, iter_block_entries
from formats.encode import encode_ledger
from formats.errors import EmptyLedgerError, EntryTooLargeError, IndexInconsistentError
from formats.index import decode_index, encode_index
from formats.layout import plan_blocks
from formats.ledger_metadata import (
    LedgerMetadata,
    decode_ledger_metadata,
    encode_ledger_metadata,
)
from formats.wire import BLOCK_HEADER_LEN, EXTENSION_MAGIC, INDEX_V1_MAGIC
from tests.formats.helpers import (
    Case,
    all_cases,
    case,
    cases_with_files,
    golden_bytes,
    read_all,
    read_entry_via_index,
    regenerate_payloads,
)

WITH_FILES = cases_with_files()
OK_CASES = [c for c in WITH_FILES if c["expected_reader_result"] == "ok"]


def ids(cases: list[Case]) -> list[str]:
    return [c["name"] for c in cases]


def test_manifest_covers_the_expected_cases() -> None:
    names = set(ids(all_cases()))
    assert {
        "single-block",
        "multi-block",
        "zero-length",
        "custom-metadata",
        "entry-fills-block",
        "oversize-entry",
        "oversize-first-entry",
        "empty-ledger",
    } <= names
    assert {"oversize-entry"} | set(ids(OK_CASES)) == set(ids(WITH_FILES))


@pytest.mark.parametrize("c", WITH_FILES, ids=ids(WITH_FILES))
def test_golden_files_match_the_manifest(c: Case) -> None:
    data, index = golden_bytes(c)
    assert len(data) == c["files"]["data_length"]
    assert len(index) == c["files"]["index_length"]
    assert hashlib.sha256(data).hexdigest() == c["files"]["data_sha256"]
    assert hashlib.sha256(index).hexdigest() == c["files"]["index_sha256"]


@pytest.mark.parametrize("c", OK_CASES, ids=ids(OK_CASES))
def test_every_entry_reads_back_through_the_index(c: Case) -> None:
    data, index_bytes = golden_bytes(c)
    index = decode_index(index_bytes)
    assert index.data_object_length == len(data) == c["index"]["data_object_length"]
    assert index.data_header_length == c["index"]["data_header_length"] == BLOCK_HEADER_LEN
    assert index.last_entry_id == c["ledger_metadata"]["last_entry_id"]
    assert index.length == c["ledger_metadata"]["length"]
    assert index.extension is None
    rows = [(r.entry_id, r.part_id, r.offset) for r in index.entries]
    assert rows == [
        (r["first_entry_id"], r["part_id"], r["offset"]) for r in c["index"]["entries_raw"]
    ]
    expected = c["entries"]
    assert len(expected) == c["entry_count"] == index.last_entry_id + 1
    for want in expected:
        payload = read_entry_via_index(index, data, want["entry_id"])
        assert len(payload) == want["length"]
        assert hashlib.sha256(payload).hexdigest() == want["sha256"]
    # and the strict whole-pair reader agrees
    got = read_all(index_bytes, data)
    assert [e for e, _ in got] == [w["entry_id"] for w in expected]
    assert [hashlib.sha256(p).hexdigest() for _, p in got] == [w["sha256"] for w in expected]


@pytest.mark.parametrize("c", OK_CASES, ids=ids(OK_CASES))
def test_blocks_match_the_manifest_records(c: Case) -> None:
    data, index_bytes = golden_bytes(c)
    index = decode_index(index_bytes)
    blocks = c["blocks"]
    assert len(blocks) == index.block_count
    for i, record in enumerate(blocks):
        start, end = index.block_span(i)
        assert (start, end - start) == (record["offset"], record["length"])
        block = memoryview(data)[start:end]
        assert bytes(block[:28]).hex() == record["header_hex_first_28"]
        header = DataBlockHeader.decode(block)
        assert header == DataBlockHeader(
            block_len=record["length"], first_entry_id=record["first_entry_id"]
        )
        assert header.encode() == bytes(block[:BLOCK_HEADER_LEN])
        entries = list(iter_block_entries(block, base_offset=start))
        assert entries[0].entry_id == record["first_entry_id"]
        assert entries[-1].entry_id == record["last_entry_id"]
        assert len(entries) == record["entry_count"]
        assert sum(len(e.payload) for e in entries) == record["entry_bytes"]
        last = entries[-1]
        pad_start = last.offset - start + 12 + len(last.payload)
        assert record["length"] - pad_start == record["padding_length"]
        pad = bytes(block[pad_start:])
        if "padding_hex" in record:
            assert pad.hex() == record["padding_hex"]
        assert pad == (b"\xfe\xdc\xde\xad" * (len(pad) // 4 + 1))[: len(pad)]


@pytest.mark.parametrize("c", all_cases(), ids=ids(all_cases()))
def test_protobuf_matches_the_manifest(c: Case) -> None:
    md_json = c["ledger_metadata"]
    md = LedgerMetadata.from_json(md_json)
    encoded = encode_ledger_metadata(md)
    assert encoded.hex() == md_json["protobuf_hex"]
    assert len(encoded) == md_json["protobuf_length"]
    assert decode_ledger_metadata(encoded) == md


@pytest.mark.parametrize("c", all_cases(), ids=ids(all_cases()))
def test_regenerated_payloads_match_the_manifest(c: Case) -> None:
    payloads = regenerate_payloads(c)
    assert len(payloads) == c["entry_count"]
    assert sum(len(p) for p in payloads) == c["total_entry_bytes"]
    for payload, want in zip(payloads, c["entries"], strict=True):
        assert len(payload) == want["length"]
        assert hashlib.sha256(payload).hexdigest() == want["sha256"]


@pytest.mark.parametrize("c", OK_CASES, ids=ids(OK_CASES))
def test_reencode_is_byte_identical(c: Case) -> None:
    data, index_bytes = golden_bytes(c)
    md = LedgerMetadata.from_json(c["ledger_metadata"])
    payloads = regenerate_payloads(c)
    plain = encode_ledger(payloads, md, c["max_block_size"], with_extension=False)
    assert plain.data == data
    assert plain.index == index_bytes
    assert [p.size for p in plain.plans] == [b["length"] for b in c["blocks"]]
    assert [p.padding_bytes for p in plain.plans] == [b["padding_length"] for b in c["blocks"]]

    extended = encode_ledger(payloads, md, c["max_block_size"])
    assert extended.data == data
    # Pulsar's index, then our extension (which Pulsar's parser ignores)
    assert extended.index[: len(index_bytes)] == index_bytes
    assert int.from_bytes(extended.index[len(index_bytes) : len(index_bytes) + 4]) == (
        EXTENSION_MAGIC
    )
    assert encode_index(extended.offload_index, with_extension=False) == index_bytes
    decoded = decode_index(extended.index)
    assert decoded.extension == extended.offload_index.extension
    assert decoded.extension is not None
    assert len(decoded.extension.block_crc32c) == len(c["blocks"])
    assert read_all(extended.index, data) == read_all(index_bytes, data)


def test_oversize_entry_pair_is_reported_inconsistent() -> None:
    c = case("oversize-entry")
    data, index_bytes = golden_bytes(c)
    assert int.from_bytes(index_bytes[:4]) == INDEX_V1_MAGIC
    with pytest.raises(IndexInconsistentError) as info:
        decode_index(index_bytes)
    assert "does not hold" in str(info.value)
    # the lenient parse (Pulsar's rules) shows the contradiction itself
    lenient = decode_index(index_bytes, strict=False)
    assert lenient.data_object_length == 4096 == c["index"]["data_object_length"]
    assert len(data) == 8192 == c["files"]["data_length"]
    assert len(data) != lenient.data_object_length
    assert lenient.last_entry_id == 3
    with pytest.raises(IndexInconsistentError):
        read_all(index_bytes, data)


@pytest.mark.parametrize("name", ["oversize-entry", "oversize-first-entry"])
def test_oversize_payloads_are_refused_before_any_block(name: str) -> None:
    c = case(name)
    payloads = regenerate_payloads(c)
    with pytest.raises(EntryTooLargeError, match="max block size"):
        plan_blocks([len(p) for p in payloads], c["max_block_size"])
    with pytest.raises(EntryTooLargeError):
        encode_ledger(payloads, LedgerMetadata.from_json(c["ledger_metadata"]), c["max_block_size"])


def test_empty_ledger_is_refused() -> None:
    c = case("empty-ledger")
    assert regenerate_payloads(c) == []
    with pytest.raises(EmptyLedgerError):
        plan_blocks([], c["max_block_size"])
    with pytest.raises(EmptyLedgerError):
        encode_ledger([], LedgerMetadata.from_json(c["ledger_metadata"]), c["max_block_size"])
