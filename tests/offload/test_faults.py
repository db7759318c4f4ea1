"""Fault injection: every offload ends in success or a typed error, and a failed one leaves
no object and no incomplete multipart upload behind (listed to prove it).

:class:`FaultyObjectStore` fails the k-th call of create / each part / complete / index put,
before the call or after it ("request done, answer lost"), with timeouts
(``StoreUnavailable``), and with a ``KeyboardInterrupt``; the reader itself can fail too.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from formats.keys import data_key
from offloader.errors import (
    IndexInconsistentError,
    OffloaderError,
    OffloadError,
    PreconditionFailed,
    StoreError,
    StoreUnavailable,
)
from offloader.ledgers.base import InMemoryLedger
from offloader.offload.writer import offload_ledger
from offloader.read.handle import ReadHandle
from offloader.store.base import ObjectStore
from offloader.store.faulty import FaultPlan, FaultyObjectStore
from tests.offload.conftest import assert_empty, new_uuid, settings_for

BLOCK = 4096


def _ledger(kind: str) -> InMemoryLedger:
    """Three blocks: 4 KiB blocks on local/moto, 5 MiB blocks (kept few) on RGW."""
    size, count = (1000, 11) if kind != "rgw" else (400_000, 30)
    return InMemoryLedger(7, [bytes([i % 251]) * size for i in range(count)])


def timeout() -> StoreUnavailable:
    return StoreUnavailable("injected: read timeout after bounded retries")


#: (method, on_call, after) cases; `after` means the store did the work but the answer was lost
FAULTS: list[tuple[str, int, bool]] = [
    ("create_multipart_upload", 1, False),
    ("create_multipart_upload", 1, True),
    ("upload_part", 1, False),
    ("upload_part", 2, False),
    ("upload_part", 3, False),
    ("upload_part", 3, True),
    ("complete_multipart_upload", 1, False),
    ("complete_multipart_upload", 1, True),
    ("put", 1, False),
    ("put", 1, True),
]


@pytest.mark.parametrize(("method", "on_call", "after"), FAULTS)
def test_fault_leaves_nothing(
    store: ObjectStore, store_kind: str, method: str, on_call: int, after: bool
) -> None:
    faulty = FaultyObjectStore(
        store, FaultPlan().fail(method, timeout, on_call=on_call, after=after)
    )
    ledger = _ledger(store_kind)
    settings = settings_for(store_kind, BLOCK, offload_concurrency=2)
    with pytest.raises(StoreUnavailable, match="injected"):
        offload_ledger(ledger, faulty, new_uuid(), settings)
    assert faulty.faults_fired == 1
    if method == "create_multipart_upload" and after:
        # the upload id was lost with the answer: nobody can abort it but a gc; Pulsar has
        # the same hole. Only an S3 lifecycle rule or `objects gc` finds it.
        uploads = store.list_multipart_uploads()
        assert [o.key for o in store.list()] == []
        for upload in uploads:
            store.abort_multipart_upload(upload.key, upload.upload_id)
    assert_empty(store)


def test_every_part_fault_on_local_and_success_otherwise(tmp_path: Any) -> None:
    from offloader.store.local import LocalObjectStore

    ledger = _ledger("local")
    settings = settings_for("local", BLOCK, offload_concurrency=3)
    for k in range(1, 5):  # part 4 does not exist: that run succeeds
        inner = LocalObjectStore(tmp_path / f"run{k}")
        faulty = FaultyObjectStore(inner, FaultPlan().fail("upload_part", timeout, on_call=k))
        uuid = new_uuid()
        try:
            result = offload_ledger(ledger, faulty, uuid, settings)
        except OffloaderError:
            assert_empty(inner)
            continue
        assert k == 4 and result.block_count == 3
        with ReadHandle.open(inner, ledger.ledger_id, uuid, settings) as handle:
            assert [e.payload for e in handle.read(0, ledger.last_entry_id)] == ledger.read(
                0, ledger.last_entry_id
            )


def test_keyboard_interrupt_cleans_up_and_propagates(store: ObjectStore, store_kind: str) -> None:
    faulty = FaultyObjectStore(store, FaultPlan().fail("upload_part", KeyboardInterrupt, on_call=2))
    with pytest.raises(KeyboardInterrupt):
        offload_ledger(
            _ledger(store_kind),
            faulty,
            new_uuid(),
            settings_for(store_kind, BLOCK, offload_concurrency=1),
        )
    assert faulty.calls["abort_multipart_upload"] == 1
    assert_empty(store)


class _FailingReader(InMemoryLedger):
    """Fails (or changes an entry) on a chosen read call."""

    def __init__(self, payloads: Sequence[bytes], fail_on: int, error: Exception | None) -> None:
        super().__init__(3, payloads)
        self.reads = 0
        self.fail_on = fail_on
        self.error = error

    def read(self, first: int, last: int) -> Sequence[bytes]:
        self.reads += 1
        got = list(super().read(first, last))
        if self.reads == self.fail_on:
            if self.error is not None:
                raise self.error
            got[-1] = got[-1] + b"!"  # the ledger changed under us
        return got


def test_reader_errors(tmp_path: Any) -> None:
    from offloader.store.local import LocalObjectStore

    payloads = [bytes([i]) * 700 for i in range(40)]
    settings = settings_for("local", BLOCK, ledger_read_batch_entries=7)
    store = LocalObjectStore(tmp_path)
    # an OSError from the reader (its 2nd batch of the upload pass) becomes an OffloadError
    reader = _FailingReader(payloads, fail_on=8, error=OSError("disk gone"))
    with pytest.raises(OffloadError, match="disk gone") as info:
        offload_ledger(reader, store, new_uuid(), settings)
    assert isinstance(info.value.__cause__, OSError)
    assert_empty(store)
    # an entry whose length changed between planning and upload
    reader = _FailingReader(payloads, fail_on=9, error=None)
    with pytest.raises(IndexInconsistentError, match="changed during the offload"):
        offload_ledger(reader, store, new_uuid(), settings)
    assert_empty(store)


def test_failed_abort_is_logged_not_raised(tmp_path: Any) -> None:
    from offloader.store.local import LocalObjectStore

    inner = LocalObjectStore(tmp_path)
    plan = (
        FaultPlan()
        .fail("upload_part", timeout, on_call=1)
        .fail("abort_multipart_upload", StoreError("abort refused"))
    )
    with pytest.raises(StoreUnavailable):  # the original error, not the cleanup's
        offload_ledger(
            _ledger("local"),
            FaultyObjectStore(inner, plan),
            new_uuid(),
            settings_for("local", BLOCK),
        )
    assert [u.key for u in inner.list_multipart_uploads()] != []  # honest: it could not abort


def test_existing_index_is_never_deleted(store: ObjectStore, store_kind: str) -> None:
    assert store.supports_conditional_put  # every backend enforces IfNoneMatch
    ledger = _ledger(store_kind)
    uuid = new_uuid()
    settings = settings_for(store_kind, BLOCK)
    offload_ledger(ledger, store, uuid, settings)
    before = {o.key for o in store.list()}
    store.delete(data_key(uuid, ledger.ledger_id))
    with pytest.raises(PreconditionFailed):
        offload_ledger(ledger, store, uuid, settings)  # same uuid: the index PUT is refused
    # our new data object is gone, the index that was there is kept
    assert {o.key for o in store.list()} == before - {data_key(uuid, ledger.ledger_id)}
    assert store.list_multipart_uploads() == []
