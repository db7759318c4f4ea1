"""Issue 21 item 6: entries are not emitted before their bytes are checked. The index extension
records a CRC32C per fine-offset span (tagged section TAG_SPAN_CRC32C); a streamed read checks
each span before it yields the span's entries, a single-entry read checks the span its one GET
fetched (still one GET); objects without span CRC32Cs fall back to block checks and JSON rows
say ``"verified": false``."""

from __future__ import annotations

import dataclasses
import sqlite3
from pathlib import Path

import pytest

from formats.extension import TAG_SPAN_CRC32C, crc32c
from formats.index import decode_index, encode_index
from formats.span_crc import SpanChecks, block_span_crcs, decode_span_crcs, encode_span_crcs
from offloader.errors import ChecksumMismatchError, CorruptDataError
from offloader.read.handle import ReadHandle
from offloader.store.faulty import FaultyObjectStore
from tests.cli.helpers import json_lines, one_line_error, run
from tests.hardening.helpers import file_store, flip, ledger_keys, offloaded_topic, rewrite


#: entry n of a one-block ledger of 100-byte entries: its payload's 50th byte
def payload_byte(n: int) -> int:
    return 128 + 112 * n + 12 + 50


def _topic(home: Path) -> tuple[str, str, str]:
    # 3000 entries of 100 B: one block of ~330 KB, five spans of ~64 KiB
    ledgers = offloaded_topic(home, entries=3000, per_ledger=3000)
    data_key, index_key = ledger_keys(ledgers, 0)
    return data_key, index_key, data_key.split("-ledger-")[0]


def test_the_writer_records_a_crc_per_span(tmp_path: Path) -> None:
    data_key, index_key, _ = _topic(tmp_path)
    store = file_store(tmp_path)
    index = decode_index(store.get(index_key).data)
    assert index.extension is not None
    section = index.extension.section(TAG_SPAN_CRC32C)
    assert section is not None and not section.critical
    spans = SpanChecks.of(index)
    assert spans is not None and len(spans.crcs) == 1 + len(index.extension.fine_offsets) > 3
    data = store.get(data_key).data
    cuts = list(zip(spans.starts, spans.ends, strict=True))
    assert list(spans.crcs) == block_span_crcs(data, 0, cuts)
    assert spans.starts[0] == 128 and spans.ends[-1] == len(data)  # header out, padding in
    with pytest.raises(CorruptDataError):
        decode_span_crcs(encode_span_crcs(spans.crcs[:-1]), len(spans.crcs))


def test_no_entry_of_a_corrupt_span_is_printed(tmp_path: Path) -> None:
    data_key, _, uuid = _topic(tmp_path)
    store = file_store(tmp_path)
    rewrite(store, data_key, flip(payload_byte(2500)))  # in the last span
    result = run(tmp_path, "--json", "topics", "read", "t")
    assert result.exit_code == 1 and "CRC32C" in result.stderr
    printed = json_lines(result)
    assert all(row["verified"] for row in printed)
    spans = SpanChecks.of(ReadHandle.open(store, 0, uuid).index)
    assert spans is not None
    bad_span = spans.containing(payload_byte(2500))
    # every printed entry (if any: the spans already fetched are checked together) lies in
    # a span before the corrupt one
    for row in printed:
        assert 128 + 112 * (row["entry_id"] + 1) <= spans.starts[bad_span]


@pytest.mark.parametrize("count", ["1", "3", "1999"])
def test_partial_reads_of_corrupt_data_fail(tmp_path: Path, count: str) -> None:
    data_key, _, _ = _topic(tmp_path)
    rewrite(file_store(tmp_path), data_key, flip(payload_byte(0)))
    line = one_line_error(run(tmp_path, "--json", "topics", "read", "t", "-n", count))
    assert "(span 0) have CRC32C" in line


def test_a_single_entry_read_checks_its_span_in_one_get(tmp_path: Path) -> None:
    data_key, _, uuid = _topic(tmp_path)
    store = file_store(tmp_path)
    counted = FaultyObjectStore(store)
    with ReadHandle.open(counted, 0, uuid) as handle:
        for entry_id in (0, 700, 1500, 2999):
            counted.reset_counts()
            handle.offsets_cache.clear()
            handle.read_entry(entry_id)
            assert counted.calls["get_range"] + counted.calls["open_range"] <= 1
    rewrite(store, data_key, flip(payload_byte(1500)))
    with ReadHandle.open(FaultyObjectStore(store), 0, uuid) as handle:
        with pytest.raises(ChecksumMismatchError, match="span"):
            handle.read_entry(1501)  # its span holds entry 1500 too
        handle.read_entry(200)  # another span: fine


def test_objects_without_span_crcs_say_verified_false(tmp_path: Path) -> None:
    data_key, index_key, _ = _topic(tmp_path)
    store = file_store(tmp_path)
    index = decode_index(store.get(index_key).data)
    assert index.extension is not None
    older = dataclasses.replace(
        index, extension=dataclasses.replace(index.extension, sections=())
    )  # as written before span CRC32Cs
    body = encode_index(older)
    rewrite(store, index_key, lambda _: body)
    # the metadata recorded the index with the section: record this one instead

    db = sqlite3.connect(tmp_path / "metadata.db")
    db.execute(
        "UPDATE offload_attempts SET index_size = ?, index_crc32c = ?",
        (len(body), crc32c(body)),
    )
    db.commit()
    db.close()
    rows = json_lines(run(tmp_path, "--json", "topics", "read", "t", "-n", "5"))
    assert [r["verified"] for r in rows] == [False] * 5
    rewrite(store, data_key, flip(payload_byte(0)))
    # a partial read cannot be checked without span CRC32Cs; a whole block still is
    assert run(tmp_path, "--json", "topics", "read", "t", "-n", "5").exit_code == 0
    assert run(tmp_path, "--json", "topics", "read", "t").exit_code == 1
