"""Issue 21 items 4, 5, 6, 9, 10, 15: what a read checks before it returns entries (file store;
the same reads over S3 are in test_read_checks_s3.py)."""

from __future__ import annotations

import dataclasses
from itertools import islice
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from formats.index import decode_index, encode_index
from formats.keys import data_key
from offloader.errors import (
    ChecksumMismatchError,
    CorruptDataError,
    IndexInconsistentError,
    UnsupportedVersionError,
)
from offloader.ledgers.base import InMemoryLedger
from offloader.offload.writer import offload_ledger
from offloader.read.handle import ReadHandle
from offloader.read.objects import RecordedOffload, load_index
from offloader.store import LocalObjectStore, ObjectStore
from tests.cli.helpers import one_line_error, run
from tests.hardening.helpers import file_store, flip, ledger_keys, offloaded_topic, rewrite
from tests.offload.conftest import settings_for

UUID_4 = "0b5e6a52-52a4-4b5f-a9a4-1d8b2d7e0c44"
#: entry n of a one-block ledger of 100-byte entries starts at 128 + 112 n (+ 12 of header)
PAYLOAD_OF_ENTRY_5 = 128 + 112 * 5 + 12 + 50


def test_a_count_ending_at_the_blocks_last_entry_still_checks_it(tmp_path: Path) -> None:
    # an object without span CRC32Cs (as written before them): only the block CRC32C checks
    store = LocalObjectStore(tmp_path)
    payloads = [bytes([i % 251]) * 100 for i in range(300)]
    settings = settings_for("local", 64 * 1024, write_span_crc32c=False)
    offload_ledger(InMemoryLedger(3, payloads), store, UUID_4, settings)
    rewrite(store, data_key(UUID_4, 3), flip(128 + 112 * 5 + 12 + 50))  # entry 5, block 0
    with ReadHandle.open(store, 3, UUID_4, settings) as handle:
        assert not handle.verifies_spans
        last = handle.index.block_last_entry_id(0)
        entries = handle.iter_entries(0, last)
        # a consumer that stops at the block's last entry (the CLI's --count) never resumes
        # the generator: the block must be checked before its last batch is handed out
        with pytest.raises(ChecksumMismatchError, match="block 0 CRC32C"):
            for _ in islice(entries, last + 1):
                pass


def _swap(store: ObjectStore, a: tuple[str, str], b: tuple[str, str]) -> None:
    for key_a, key_b in zip(a, b, strict=True):
        got_a, got_b = store.get(key_a), store.get(key_b)
        store.put(key_a, got_b.data, dict(got_b.metadata))
        store.put(key_b, got_a.data, dict(got_a.metadata))


def test_swapped_ledger_objects_are_refused(tmp_path: Path) -> None:
    ledgers = offloaded_topic(tmp_path, entries=400, per_ledger=200)
    store = file_store(tmp_path)
    _swap(store, ledger_keys(ledgers, 0), ledger_keys(ledgers, 1))
    line = one_line_error(run(tmp_path, "--json", "topics", "read", "t", "-n", "5"))
    assert "ledger 0" in line and "not the index this ledger was offloaded with" in line, line


def test_a_stripped_extension_is_refused_by_the_recorded_size(tmp_path: Path) -> None:
    ledgers = offloaded_topic(tmp_path, entries=200, per_ledger=200)
    data_key, index_key = ledger_keys(ledgers, 0)
    store = file_store(tmp_path)
    index = decode_index(store.get(index_key).data)
    plain = encode_index(dataclasses.replace(index, extension=None))
    rewrite(store, index_key, lambda _: plain)
    rewrite(store, data_key, flip(PAYLOAD_OF_ENTRY_5))
    line = one_line_error(run(tmp_path, "--json", "topics", "read", "t"))
    assert "the metadata recorded" in line and "ledger 0" in line, line


def test_recorded_block_crcs_stand_in_for_a_missing_extension(tmp_path: Path) -> None:
    ledgers = offloaded_topic(tmp_path, entries=200, per_ledger=200)
    data_key, index_key = ledger_keys(ledgers, 0)
    store = file_store(tmp_path)
    index = decode_index(store.get(index_key).data)
    assert index.extension is not None
    crcs = index.extension.block_crc32c
    rewrite(store, index_key, lambda _: encode_index(dataclasses.replace(index, extension=None)))
    rewrite(store, data_key, flip(PAYLOAD_OF_ENTRY_5))
    uuid = data_key.split("-ledger-")[0]
    with ReadHandle.open(store, 0, uuid) as handle:  # nothing recorded: nothing can check
        assert len(handle.read(0, 199)) == 200
    recorded = RecordedOffload(block_crc32c=crcs)
    with (
        ReadHandle.open(store, 0, uuid, recorded=recorded) as handle,
        pytest.raises(ChecksumMismatchError, match="block 0 CRC32C"),
    ):
        handle.read(0, 199)


def test_an_oversized_index_is_refused_before_it_is_read(tmp_path: Path) -> None:
    ledgers = offloaded_topic(tmp_path, entries=200, per_ledger=200)
    _, index_key = ledger_keys(ledgers, 0)
    store = file_store(tmp_path)
    rewrite(store, index_key, lambda data: data + bytes(8 << 20))
    gets: list[tuple[int, int]] = []
    original = LocalObjectStore.get_range

    def counting(self: LocalObjectStore, key: str, start: int, end: int) -> object:
        gets.append((start, end))
        return original(self, key, start, end)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(LocalObjectStore, "get_range", counting)
        line = one_line_error(run(tmp_path, "--json", "topics", "read", "t", "-n", "1"))
    assert "refused before reading it" in line and "ledger 0" in line, line
    assert all(end - start < 64 * 1024 for start, end in gets), gets  # never the 8 MiB
    # unrecorded (e.g. Spark's discover): the bound applies, in a first GET of 1 MiB
    uuid = index_key.split("-ledger-")[0]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("offloader.read.objects.MAX_INDEX_BYTES", 4 << 20)
        with pytest.raises(IndexInconsistentError, match="more than the 4194304"):
            load_index(store, 0, uuid)


def test_index_decode_errors_name_the_ledger_and_the_object(tmp_path: Path) -> None:
    ledgers = offloaded_topic(tmp_path, entries=200, per_ledger=200)
    _, index_key = ledger_keys(ledgers, 0)
    store = file_store(tmp_path)
    rewrite(store, index_key, flip(0))  # the index magic
    uuid = index_key.split("-ledger-")[0]
    with pytest.raises(
        UnsupportedVersionError, match=f"index object {index_key} of ledger 0 in file:"
    ):
        load_index(store, 0, uuid)


def test_a_corrupt_entry_length_gives_one_error_and_few_warnings(tmp_path: Path) -> None:
    # without span CRC32Cs (an older object) the framing finds it: one error, one warning
    store = LocalObjectStore(tmp_path / "objects-old")
    payloads = [bytes([i % 251]) * 100 for i in range(2000)]
    settings = settings_for("local", 1 << 20, write_span_crc32c=False)
    offload_ledger(InMemoryLedger(3, payloads), store, UUID_4, settings)
    rewrite(store, data_key(UUID_4, 3), flip(128 + 3))  # entry 0's length: 100 -> 101
    with (
        capture_logs() as logs,
        ReadHandle.open(store, 3, UUID_4, settings) as handle,
        pytest.raises(CorruptDataError, match="the data object is corrupt"),
    ):
        handle.read(0, 1999)
    assert sum(1 for e in logs if e["log_level"] == "warning") <= 1, logs
    # with span CRC32Cs (what we write now): caught before any entry, one error line
    ledgers = offloaded_topic(tmp_path / "home", entries=2000, per_ledger=2000)
    data_key_0, _ = ledger_keys(ledgers, 0)
    rewrite(file_store(tmp_path / "home"), data_key_0, flip(128 + 3))
    result = run(tmp_path / "home", "-v", "--json", "topics", "read", "t")
    assert result.exit_code == 1 and result.stdout == ""
    assert len(result.stderr.encode()) < 20_000, len(result.stderr)  # not 12,500 lines
