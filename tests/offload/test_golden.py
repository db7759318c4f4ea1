"""Golden cases through the writer and the ReadHandle, on local, moto and RGW stores.

* Our writer's objects: every golden ledger is offloaded and read back entry for entry; without
  the index extension and with the golden block size (local, moto) the data object and the
  index are byte-identical to the ones Pulsar wrote.
* Pulsar's objects: the golden data and index objects, uploaded as Pulsar uploads them (user
  metadata ``s3managedledgeroffloaderformatversion=1``, no extension), are read by the
  ReadHandle and every entry matches the manifest's SHA-256; the oversize-entry pair (written by
  Pulsar's bug) is refused with a typed error.
"""

from __future__ import annotations

import pytest

from formats.keys import data_key, index_key
from offloader.config import OffloadSettings
from offloader.errors import (
    EmptyLedgerError,
    EntryTooLargeError,
    ForeignObjectError,
    IndexInconsistentError,
    ObjectNotFound,
)
from offloader.ledgers.base import InMemoryLedger
from offloader.offload.writer import offload_ledger
from offloader.read.handle import ReadHandle
from offloader.store.base import ObjectStore
from offloader.store.faulty import FaultyObjectStore
from offloader.store.local import LocalObjectStore
from tests.offload.conftest import (
    golden_case,
    golden_names,
    manifest,
    new_uuid,
    pulsar_metadata,
    settings_for,
    sha256,
)


@pytest.mark.parametrize("name", golden_names("ok"))
@pytest.mark.parametrize("extension", [False, True])
def test_offload_golden_and_read_back(
    store: ObjectStore, store_kind: str, name: str, extension: bool
) -> None:
    case = golden_case(name)
    ledger = InMemoryLedger(case.ledger_id, case.payloads, case.metadata)
    settings = settings_for(
        store_kind, case.max_block_size, write_index_extension=extension, read_buffer_size=64 * 1024
    )
    uuid = new_uuid()
    done: list[tuple[int, int]] = []
    result = offload_ledger(
        ledger,
        store,
        uuid,
        settings,
        managed_ledger_name="public/default/persistent/golden",
        progress=lambda a, b: done.append((a, b)),
    )
    assert result.entries == len(case.payloads)
    assert result.payload_bytes == sum(len(p) for p in case.payloads)
    assert done[-1] == (result.data_size, result.data_size)
    if settings.max_block_size == case.max_block_size and not extension:
        assert store.get(data_key(uuid, case.ledger_id)).data == case.data
        assert store.get(index_key(uuid, case.ledger_id)).data == case.index
    info = store.head(data_key(uuid, case.ledger_id))
    assert info.size == result.data_size
    assert info.metadata["s3managedledgeroffloaderformatversion"] == "1"
    assert info.metadata["role"] == "data"
    with ReadHandle.open(store, case.ledger_id, uuid, settings) as handle:
        assert handle.has_extension == extension
        assert handle.last_add_confirmed == len(case.payloads) - 1
        assert handle.length == sum(len(p) for p in case.payloads)
        assert handle.is_closed
        entries = handle.read(0, handle.last_add_confirmed)
        assert [e.entry_id for e in entries] == list(range(len(case.payloads)))
        assert [e.payload for e in entries] == case.payloads
        last = handle.last_add_confirmed
        for entry_id in {0, last // 3, last // 2, last}:
            assert handle.read_entry(entry_id) == case.payloads[entry_id]


@pytest.mark.parametrize("name", golden_names())
def test_read_objects_uploaded_by_pulsar(store: ObjectStore, name: str) -> None:
    case = golden_case(name)
    uuid = new_uuid()
    store.put(data_key(uuid, case.ledger_id), case.data, pulsar_metadata("data"))
    store.put(index_key(uuid, case.ledger_id), case.index, pulsar_metadata("index"))
    if case.expected != "ok":
        with pytest.raises(IndexInconsistentError, match="oversize-entry"):
            ReadHandle.open(store, case.ledger_id, uuid)
        return
    with ReadHandle.open(store, case.ledger_id, uuid) as handle:
        assert not handle.has_extension
        entries = list(handle.iter_entries(0, handle.last_add_confirmed))
        assert [sha256(e.payload) for e in entries] == list(case.entry_sha256)
        # the batch forms read the same entries
        packed = handle.iter_packed(0, handle.last_add_confirmed)
        assert [sha256(p) for b in packed for p in b.payloads()] == list(case.entry_sha256)
        spans = handle.iter_spans(0, handle.last_add_confirmed)
        assert [sha256(bytes(p)) for b in spans for p in b.payloads()] == list(case.entry_sha256)
        # backwards single reads (Pulsar's worst case: re-seek and skip inside a block)
        last = handle.last_add_confirmed
        for entry_id in range(last, -1, -max(1, last // 7)):
            assert sha256(handle.read_entry(entry_id)) == case.entry_sha256[entry_id]


def test_foreign_and_missing_objects(tmp_path: object) -> None:
    store = LocalObjectStore(str(tmp_path))
    case = golden_case("single-block")
    uuid = new_uuid()
    with pytest.raises(ObjectNotFound, match=rf"offloaded ledger {case.ledger_id} \({uuid}\)"):
        ReadHandle.open(store, case.ledger_id, uuid)
    store.put(index_key(uuid, case.ledger_id), case.index, {"role": "index"})
    with pytest.raises(ForeignObjectError, match="object version None"):
        ReadHandle.open(store, case.ledger_id, uuid)
    other = {**pulsar_metadata("index"), "s3managedledgeroffloaderformatversion": "2"}
    store.put(index_key(uuid, case.ledger_id), case.index, other)
    with pytest.raises(ForeignObjectError):
        ReadHandle.open(store, case.ledger_id, uuid)
    # index present, data object missing: a typed error naming the ledger
    store.put(index_key(uuid, case.ledger_id), case.index, pulsar_metadata("index"))
    with (
        ReadHandle.open(store, case.ledger_id, uuid) as handle,
        pytest.raises(ObjectNotFound, match=f"offloaded ledger {case.ledger_id}"),
    ):
        handle.read(0, 0)


@pytest.mark.parametrize("name", ["oversize-entry", "oversize-first-entry"])
def test_oversize_entry_refused_before_any_upload(tmp_path: object, name: str) -> None:
    case = next(c for c in manifest()["cases"] if c["name"] == name)
    lengths = [e["length"] for e in case["entries"]]
    ledger = InMemoryLedger(case["ledger_id"], [b"x" * n for n in lengths])
    store = FaultyObjectStore(LocalObjectStore(str(tmp_path)))
    settings = OffloadSettings(enforce_min_block_size=False, max_block_size=case["max_block_size"])
    with pytest.raises(EntryTooLargeError, match="Raise the max block size"):
        offload_ledger(ledger, store, new_uuid(), settings)
    assert sum(store.calls.values()) == 0  # not even create_multipart_upload


def test_empty_ledger_refused_before_any_upload(tmp_path: object) -> None:
    store = FaultyObjectStore(LocalObjectStore(str(tmp_path)))
    settings = OffloadSettings(enforce_min_block_size=False, max_block_size=4096)
    with pytest.raises(EmptyLedgerError):
        offload_ledger(InMemoryLedger(20, []), store, new_uuid(), settings)
    assert sum(store.calls.values()) == 0
