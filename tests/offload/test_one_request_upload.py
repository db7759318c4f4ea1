"""The one-request upload of a plain data object (issue 39): on GCS and Azure a ledger within
``one_request_upload_max`` is framed whole and sent in one PUT, not through the stores'
multipart emulation. The object, its index and its metadata are byte for byte those of the
multipart path; a failure at any step leaves nothing; past the limit the multipart path runs."""

from __future__ import annotations

import http.client
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from formats.keys import data_key, index_key
from offloader.config import MiB, OffloadSettings
from offloader.errors import (
    ConfigError,
    IndexInconsistentError,
    OffloadError,
    StoreUnavailable,
)
from offloader.ledgers.base import InMemoryLedger
from offloader.metrics.base import NullMetrics
from offloader.offload.writer import FramedBlocks, offload_ledger, one_request
from offloader.read.handle import ReadHandle
from offloader.store.base import Buffer, ObjectStore
from offloader.store.faulty import FaultPlan, FaultyObjectStore
from offloader.store.local import LocalObjectStore
from offloader.store.metered import MeteredObjectStore
from offloader.store.parts import PartsBody
from tests.offload.conftest import assert_empty, cloud_store, new_uuid, settings_for

BLOCK = 4096
CLOUDS = [
    pytest.param("gcs", marks=pytest.mark.gcs),
    pytest.param("azure", marks=pytest.mark.azure),
]


def _ledger() -> InMemoryLedger:
    """Three 4 KiB blocks of distinct entries."""
    return InMemoryLedger(7, [bytes([i % 251]) * (900 + i) for i in range(11)])


class _Counting(FaultyObjectStore):
    """A FaultyObjectStore that passes on the store's preference for one request (the plain
    wrapper does not, so the existing fault tests keep exercising the multipart path)."""

    @property
    def prefers_one_request_upload(self) -> bool:
        return getattr(self.inner, "prefers_one_request_upload", False) is True

    def put_parts(self, key: str, parts: Sequence[Buffer], metadata: Mapping[str, str]) -> None:
        self._call("put_parts", key, parts, metadata)


@pytest.fixture(params=CLOUDS)
def cloud(request: pytest.FixtureRequest) -> Any:
    store = cloud_store(request.param, request)
    try:
        yield store
    finally:
        store.close()


def test_cloud_stores_prefer_one_request(cloud: ObjectStore) -> None:
    settings = settings_for("gcs", BLOCK)
    assert one_request(cloud, 3 * BLOCK, settings)
    assert not one_request(cloud, settings.one_request_upload_max + 1, settings)
    assert not one_request(cloud, 3 * BLOCK, settings.replace(one_request_upload_max=0))


def test_s3_and_local_keep_multipart(tmp_path: Any) -> None:
    store = LocalObjectStore(tmp_path / "objects")
    assert not one_request(store, 3 * BLOCK, settings_for("local", BLOCK))


def test_one_request_setting_is_checked() -> None:
    assert OffloadSettings().one_request_upload_max == 64 * MiB
    with pytest.raises(ConfigError, match="one_request_upload_max"):
        OffloadSettings(one_request_upload_max=-1)
    with pytest.raises(ConfigError, match="one_request_upload_max"):
        OffloadSettings(one_request_upload_max=257 * MiB)


def test_one_request_object_is_the_multipart_object(cloud: ObjectStore) -> None:
    ledger = _ledger()
    counting = _Counting(cloud, FaultPlan())
    settings = settings_for("gcs", BLOCK, offload_concurrency=2)
    one, multi = new_uuid(), new_uuid()
    first = offload_ledger(ledger, counting, one, settings)
    assert counting.calls.get("create_multipart_upload", 0) == 0
    assert counting.calls.get("upload_part", 0) == 0
    assert counting.calls["put_parts"] == 1  # the data object: its blocks in one request
    assert counting.calls["put"] == 1  # the index
    assert cloud.list_multipart_uploads() == []
    second = offload_ledger(ledger, counting, multi, settings.replace(one_request_upload_max=0))
    assert counting.calls["create_multipart_upload"] == 1
    assert counting.calls["upload_part"] == 3
    assert first.block_count == second.block_count == 3
    assert first.block_crc32c == second.block_crc32c
    lid = ledger.ledger_id
    a, b = cloud.get(data_key(one, lid)), cloud.get(data_key(multi, lid))
    assert a.data == b.data and a.size == first.data_size
    assert dict(a.metadata) == dict(b.metadata) and a.metadata
    assert cloud.get(index_key(one, lid)).data == cloud.get(index_key(multi, lid)).data
    with ReadHandle.open(cloud, lid, one, settings) as handle:
        got = [e.payload for e in handle.read(0, ledger.last_entry_id)]
    assert got == ledger.read(0, ledger.last_entry_id)


def test_past_the_limit_the_multipart_path_runs(cloud: ObjectStore) -> None:
    counting = _Counting(cloud, FaultPlan())
    settings = settings_for("gcs", BLOCK, one_request_upload_max=2 * BLOCK)
    offload_ledger(_ledger(), counting, new_uuid(), settings)
    assert counting.calls["upload_part"] == 3
    assert counting.calls.get("put_parts", 0) == 0
    assert counting.calls["put"] == 1  # the index only
    assert cloud.list_multipart_uploads() == []


def _timeout() -> StoreUnavailable:
    return StoreUnavailable("injected: read timeout after bounded retries")


@pytest.mark.parametrize(
    ("method", "after"),
    [("put_parts", False), ("put_parts", True), ("put", False), ("put", True)],
    ids=["data-put", "data-put-answer-lost", "index-put", "index-put-answer-lost"],
)
def test_a_failed_put_leaves_nothing(cloud: ObjectStore, method: str, after: bool) -> None:
    faulty = _Counting(cloud, FaultPlan().fail(method, _timeout, on_call=1, after=after))
    with pytest.raises(StoreUnavailable, match="injected"):
        offload_ledger(_ledger(), faulty, new_uuid(), settings_for("gcs", BLOCK))
    assert faulty.faults_fired == 1
    assert faulty.calls.get("create_multipart_upload", 0) == 0
    assert_empty(cloud)


def test_put_parts_is_the_joined_put(cloud: ObjectStore) -> None:
    """``put_parts`` stores the concatenation of its parts with its metadata, as ``put``
    stores the joined bytes (views of several buffers, of any sizes)."""
    parts = [b"a" * 1000, memoryview(bytearray(b"bc" * 300_000)), memoryview(b"xyz")[1:], b"!"]
    put_parts = getattr(cloud, "put_parts")  # noqa: B009 - not part of the ObjectStore Protocol
    metadata = {"Role": "data", "x": "1", "Mixed-Case": "v w"}
    put_parts("k/parts", parts, metadata)
    cloud.put("k/joined", b"".join(parts), metadata)
    a, b = cloud.get("k/parts"), cloud.get("k/joined")
    assert a.data == b.data == b"".join(parts)
    assert dict(a.metadata) == dict(b.metadata) == {"role": "data", "x": "1", "mixed-case": "v w"}
    assert [o.key for o in cloud.list("k/")] == ["k/joined", "k/parts"]


@pytest.mark.azure
def test_azure_streams_through_the_sdk_put_blob_operation(request: pytest.FixtureRequest) -> None:
    """The SDK operation ``put_parts`` streams through exists in the installed SDK (else it
    would fall back to a joined ``upload_blob``, correct but slower)."""
    store = cloud_store("azure", request)
    try:
        blob = store._container.get_blob_client("x")  # type: ignore[attr-defined]
        assert callable(blob._client.block_blob.upload)
    finally:
        store.close()


class _Recording(NullMetrics):
    def __init__(self) -> None:
        self.requests: list[tuple[str, str]] = []

    def record_store_request(
        self, backend: str, operation: str, outcome: str, seconds: float
    ) -> None:
        self.requests.append((operation, outcome))


def test_the_metered_store_records_the_one_request_upload(
    cloud: ObjectStore, tmp_path: Path
) -> None:
    """Behind the service's metrics wrapper the offload still goes in one request, and that
    request is recorded as ``put_parts``."""
    metrics = _Recording()
    metered = MeteredObjectStore(cloud, metrics)
    offload_ledger(_ledger(), metered, new_uuid(), settings_for("gcs", BLOCK))
    operations = [op for op, outcome in metrics.requests if outcome == "success"]
    assert operations == ["put_parts", "put"]
    local = MeteredObjectStore(LocalObjectStore(tmp_path / "objects"), metrics)
    assert not hasattr(local, "put_parts")  # only where the store has it


class _GatedLedger(InMemoryLedger):
    """Reads its last batch only once ``gate`` is set (the data request has started), or
    after 10 s; records whether the gate was open by then. Optionally fails (an error, or an
    entry changed under the offload) on its last read."""

    def __init__(self, gate: threading.Event, error: Exception | None = None) -> None:
        super().__init__(7, [bytes([i % 251]) * (900 + i) for i in range(11)])
        self.gate = gate
        self.error = error
        self.change = False
        self.gate_was_open: bool | None = None

    def entry_lengths(self) -> list[int]:  # the plan without a reading pass
        return [len(p) for p in super().read(0, self.last_entry_id)]

    def read(self, first: int, last: int) -> Sequence[bytes]:
        got = list(super().read(first, last))
        if last == self.last_entry_id:
            self.gate_was_open = self.gate.wait(timeout=10)
            if self.error is not None:
                raise self.error
            if self.change:
                got[-1] = got[-1] + b"!"
        return got


class _GateOnPut(_Counting):
    """Opens ``gate`` when the data object's request starts."""

    def __init__(self, inner: ObjectStore, gate: threading.Event) -> None:
        super().__init__(inner, FaultPlan())
        self.gate = gate

    def put_parts(self, key: str, parts: Sequence[Buffer], metadata: Mapping[str, str]) -> None:
        self.gate.set()
        super().put_parts(key, parts, metadata)


def test_blocks_are_framed_while_the_data_request_is_sent(cloud: ObjectStore) -> None:
    """The data request starts before the last block is framed (its entries are read only
    once it has), and the object is still the ledger's, byte for byte."""
    gate = threading.Event()
    ledger = _GatedLedger(gate)
    store = _GateOnPut(cloud, gate)
    settings = settings_for("gcs", BLOCK, ledger_read_batch_entries=4)
    uuid = new_uuid()
    offload_ledger(ledger, store, uuid, settings)
    assert ledger.gate_was_open is True
    with ReadHandle.open(cloud, ledger.ledger_id, uuid, settings) as handle:
        got = [e.payload for e in handle.read(0, ledger.last_entry_id)]
    assert got == ledger.read(0, ledger.last_entry_id)


@pytest.mark.parametrize("failure", ["reader-error", "ledger-changed"])
def test_a_framing_failure_during_the_request_leaves_nothing(
    cloud: ObjectStore, failure: str
) -> None:
    """The last block fails to frame while the data request is open: the offload raises the
    framing's own error (not the aborted request's, and without retrying the request), and
    neither the data object nor the index exists."""
    gate = threading.Event()
    ledger = _GatedLedger(gate, OSError("disk gone") if failure == "reader-error" else None)
    ledger.change = failure == "ledger-changed"
    store = _GateOnPut(cloud, gate)
    settings = settings_for("gcs", BLOCK, ledger_read_batch_entries=4)
    started = time.monotonic()
    if failure == "reader-error":
        with pytest.raises(OffloadError, match="disk gone") as info:
            offload_ledger(ledger, store, new_uuid(), settings)
        assert isinstance(info.value.__cause__, OSError)
    else:
        with pytest.raises(IndexInconsistentError, match="changed during the offload"):
            offload_ledger(ledger, store, new_uuid(), settings)
    assert ledger.gate_was_open is True
    assert time.monotonic() - started < 8  # no retried request, no backoff
    assert store.calls["put_parts"] == 1
    assert store.calls.get("put", 0) == 0  # never an index
    assert_empty(cloud)


def test_parts_body_takes_lazy_parts_one_by_one() -> None:
    """A PartsBody of parts with a known ``nbytes`` has its length at once and takes each
    part only when iterated to it; a second iteration sends the same bytes."""
    framed = FramedBlocks([3, 2])
    body = PartsBody(framed)
    assert len(body) == 5
    chunks = iter(body)
    framed.set_block(0, memoryview(b"abc"))
    assert bytes(next(chunks)) == b"abc"
    framed.set_block(1, memoryview(b"de"))
    assert bytes(next(chunks)) == b"de"
    assert b"".join(bytes(c) for c in body) == b"abcde"
    assert [bytes(v) for v in body.views] == [b"abc", b"de"]


def test_framed_blocks_fail_as_a_non_network_error() -> None:
    """A block that will never be framed fails the transport's read of the body with an
    error no HTTP client retries (not an OSError), chained to the framing's own error."""
    framed = FramedBlocks([3, 2])
    framed.set_block(0, memoryview(b"abc"))
    framed.fail_from(1, OSError("disk gone"))
    assert bytes(framed[0]) == b"abc"
    with pytest.raises(Exception, match="block 1 not framed") as info:
        framed[1]
    assert not isinstance(info.value, OSError)
    assert isinstance(info.value.__cause__, OSError)
    assert isinstance(framed.failure(), OSError)


@pytest.mark.azure
def test_azure_offload_makes_two_requests_with_a_content_length(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On the wire (http.client, under requests), an Azure offload is two Put Blobs, the data
    then the index: no HEAD, existence check, metadata read or container check; the data's
    body goes with its Content-Length (no chunked encoding), each block in one piece."""
    store = cloud_store("azure", request)
    lines: list[str] = []
    sent: list[int] = []
    putrequest = http.client.HTTPConnection.putrequest
    putheader = http.client.HTTPConnection.putheader
    send = http.client.HTTPConnection.send

    def record_request(self: Any, method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        lines.append(f"{method} {url.split('?')[0].rsplit('/', 1)[-1]}")
        return putrequest(self, method, url, *args, **kwargs)

    def record_header(self: Any, header: str, *values: Any) -> Any:
        if header.lower() in ("content-length", "transfer-encoding"):
            lines.append(f"{header.lower()}: {values[0]}")
        return putheader(self, header, *values)

    def record_send(self: Any, data: Any) -> Any:
        sent.append(memoryview(data).nbytes if not isinstance(data, str) else len(data))
        return send(self, data)

    try:
        ledger = _ledger()
        settings = settings_for("gcs", BLOCK)
        uuid = new_uuid()
        monkeypatch.setattr(http.client.HTTPConnection, "putrequest", record_request)
        monkeypatch.setattr(http.client.HTTPConnection, "putheader", record_header)
        monkeypatch.setattr(http.client.HTTPConnection, "send", record_send)
        result = offload_ledger(ledger, store, uuid, settings)
        monkeypatch.undo()
        dkey, ikey = data_key(uuid, ledger.ledger_id), index_key(uuid, ledger.ledger_id)
        assert lines == [
            f"PUT {dkey}",
            f"content-length: {result.data_size}",
            f"PUT {ikey}",
            f"content-length: {result.index_size}",
        ]
        assert sent.count(BLOCK) == result.block_count - 1  # each full block in one send
    finally:
        store.close()
