"""The ObjectStore contract: the same tests against every backend.

Backends: ``local`` (LocalObjectStore in tmp_path), ``moto`` and ``rgw`` (S3ObjectStore on the
session's S3 servers, each test in a fresh bucket, under a key prefix; the ``rgw`` parameter is
deselected by the conftest when Ceph RGW cannot run). Then backend-specific tests: path safety,
crash safety and atomicity of the local store; checksums, unreachable endpoints, credentials and
prefix isolation of the S3 store.
"""

from __future__ import annotations

import logging
import os
import random
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import crc32c
import pytest
import structlog

from devservers.endpoint import S3Endpoint
from offloader.config import OffloadSettings
from offloader.errors import (
    AccessDenied,
    InvalidStoreKey,
    ObjectNotFound,
    PreconditionFailed,
    StoreError,
    StoreUnavailable,
    UploadNotFound,
)
from offloader.store.base import ObjectStore, UploadedPart
from offloader.store.local import LocalObjectStore
from offloader.store.s3 import S3ObjectStore, crc32c_header
from tests.contract.backends import (
    PAGE_SIZE,
    PREFIX,
    TEST_SETTINGS,
    Backend,
    KiB,
    make_s3_store,
    payload,
    upload_parts,
)


# --- whole objects ------------------------------------------------------------------------
def test_satisfies_protocol(store: ObjectStore) -> None:
    assert isinstance(store, ObjectStore)
    assert store.supports_conditional_put is True
    assert store.url.split("://")[0] in ("file", "s3", "gs", "az")


def test_put_get_head_round_trip(store: ObjectStore) -> None:
    data = payload(10_000)
    meta = {"s3managedledgeroffloaderformatversion": "1", "Mixed-Case": "Value With Spaces"}
    before = time.time()
    store.put("ledger-1/data", data, meta)

    got = store.get("ledger-1/data")
    assert got.data == data
    assert got.size == len(data)
    expected_meta = {
        "s3managedledgeroffloaderformatversion": "1",
        "mixed-case": "Value With Spaces",
    }
    assert dict(got.metadata) == expected_meta

    info = store.head("ledger-1/data")
    assert info.key == "ledger-1/data"
    assert info.size == len(data)
    assert dict(info.metadata) == expected_meta
    assert isinstance(info.last_modified, datetime)
    assert info.last_modified.timestamp() > before - 5


def test_put_accepts_bytearray_and_memoryview(store: ObjectStore) -> None:
    data = payload(3000, seed=1)
    store.put("ba", bytearray(data), {})
    store.put("mv", memoryview(data)[1000:2000], {})
    assert store.get("ba").data == data
    assert store.get("mv").data == data[1000:2000]


def test_empty_object(store: ObjectStore) -> None:
    store.put("empty", b"", {"k": "v"})
    got = store.get("empty")
    assert (got.data, got.size) == (b"", 0)
    assert store.head("empty").size == 0


def test_put_overwrites(store: ObjectStore) -> None:
    store.put("k", b"first", {"v": "1"})
    store.put("k", b"second!", {"v": "2"})
    got = store.get("k")
    assert got.data == b"second!"
    assert dict(got.metadata) == {"v": "2"}


def test_put_if_none_match(store: ObjectStore) -> None:
    store.put("index", b"one", {"v": "1"}, if_none_match=True)
    with pytest.raises(PreconditionFailed):
        store.put("index", b"two", {"v": "2"}, if_none_match=True)
    got = store.get("index")
    assert got.data == b"one"
    assert dict(got.metadata) == {"v": "1"}


def test_missing_objects(store: ObjectStore) -> None:
    with pytest.raises(ObjectNotFound):
        store.get("nope")
    with pytest.raises(ObjectNotFound):
        store.head("nope")
    with pytest.raises(ObjectNotFound):
        store.get_range("nope", 0, 10)
    with pytest.raises(ObjectNotFound):
        store.get("dir/nope")


def test_get_range(store: ObjectStore) -> None:
    data = payload(1000, seed=2)
    store.put("obj", data, {"m": "x"})

    r = store.get_range("obj", 100, 200)
    assert (r.data, r.size) == (data[100:200], 1000)
    assert dict(r.metadata) == {"m": "x"}
    assert store.get_range("obj", 0, 1).data == data[:1]
    assert store.get_range("obj", 999, 1000).data == data[999:]
    assert store.get_range("obj", 0, 1000).data == data
    clipped = store.get_range("obj", 990, 2000)
    assert (clipped.data, clipped.size) == (data[990:], 1000)


def test_get_range_invalid(store: ObjectStore) -> None:
    store.put("obj", b"0123456789", {})
    for start, end in [(10, 20), (50, 60), (5, 5), (6, 2), (-1, 3)]:
        with pytest.raises(StoreError) as info:
            store.get_range("obj", start, end)
        assert not isinstance(info.value, ObjectNotFound)


def test_delete_is_idempotent(store: ObjectStore) -> None:
    store.put("a/b", b"x", {})
    store.delete("a/b")
    with pytest.raises(ObjectNotFound):
        store.head("a/b")
    store.delete("a/b")
    store.delete("never/existed")
    assert list(store.list()) == []


def test_list_by_prefix_in_key_order(store: ObjectStore) -> None:
    sizes = {"a/1": 1, "a/2": 22, "a/sub/x": 3, "a-b": 4, "b": 5, "a/10": 6, "ab": 7}
    for key in random.Random(3).sample(sorted(sizes), len(sizes)):
        store.put(key, b"z" * sizes[key], {})

    everything = list(store.list())
    assert [i.key for i in everything] == sorted(sizes)
    assert {i.key: i.size for i in everything} == sizes
    assert [i.key for i in store.list("a/")] == ["a/1", "a/10", "a/2", "a/sub/x"]
    assert [i.key for i in store.list("a")] == ["a-b", "a/1", "a/10", "a/2", "a/sub/x", "ab"]
    assert [i.key for i in store.list("a/1")] == ["a/1", "a/10"]
    assert [i.key for i in store.list("a/sub/")] == ["a/sub/x"]
    assert list(store.list("zzz")) == []


def test_list_paginates(store: ObjectStore) -> None:
    keys = [f"ledger-{i:03d}" for i in range(3 * PAGE_SIZE + 1)]
    for k in keys:
        store.put(k, k.encode(), {})
    listed = list(store.list("ledger-"))
    assert [i.key for i in listed] == keys
    assert all(i.size == len(i.key) for i in listed)


@pytest.mark.parametrize(
    "key", ["", "/abs", "a//b", "a/", "../x", "a/../b", "./a", "a\\b", "a\x00b", "x" * 1025]
)
def test_invalid_keys_refused(store: ObjectStore, key: str) -> None:
    with pytest.raises(InvalidStoreKey):
        store.put(key, b"x", {})
    with pytest.raises(InvalidStoreKey):
        store.get(key)
    with pytest.raises(InvalidStoreKey):
        store.create_multipart_upload(key, {})


# --- multipart ----------------------------------------------------------------------------
def test_multipart_round_trip(backend: Backend) -> None:
    store, size = backend.store, backend.part_size
    chunks = [payload(size, 10), payload(size, 11), payload(size // 3 + 7, 12)]
    upload_id = store.create_multipart_upload(
        "data/ledger-7", {"s3managedledgeroffloaderformatversion": "1", "Role": "data"}
    )
    assert upload_id
    parts = upload_parts(store, "data/ledger-7", upload_id, chunks)
    assert [p.part_number for p in parts] == [1, 2, 3]
    assert all(p.etag for p in parts)
    # parts may be listed in any order: they are assembled in part-number order
    store.complete_multipart_upload("data/ledger-7", upload_id, [parts[2], parts[0], parts[1]])

    whole = b"".join(chunks)
    info = store.head("data/ledger-7")
    assert info.size == len(whole)
    assert dict(info.metadata) == {"s3managedledgeroffloaderformatversion": "1", "role": "data"}
    assert store.get("data/ledger-7").data == whole
    across = store.get_range("data/ledger-7", size - 10, size + 10)
    assert (across.data, across.size) == (whole[size - 10 : size + 10], len(whole))
    assert store.list_multipart_uploads("data/") == []
    assert [i.key for i in store.list("data/")] == ["data/ledger-7"]


def test_multipart_parts_uploaded_out_of_order(backend: Backend) -> None:
    store, size = backend.store, backend.part_size
    chunks = [payload(size, 20), payload(size, 21), payload(100, 22)]
    upload_id = store.create_multipart_upload("k", {})
    order = [3, 1, 2]
    parts = {
        n: store.upload_part("k", upload_id, n, chunks[n - 1], crc32c.crc32c(chunks[n - 1]))
        for n in order
    }
    store.complete_multipart_upload("k", upload_id, [parts[n] for n in order])
    assert store.get("k").data == b"".join(chunks)


def test_multipart_single_small_part(store: ObjectStore) -> None:
    upload_id = store.create_multipart_upload("small", {"a": "b"})
    parts = upload_parts(store, "small", upload_id, [b"tiny"])
    store.complete_multipart_upload("small", upload_id, parts)
    got = store.get("small")
    assert (got.data, dict(got.metadata)) == (b"tiny", {"a": "b"})


def test_multipart_upload_accepts_memoryview(backend: Backend) -> None:
    store, size = backend.store, backend.part_size
    buf = bytearray(payload(2 * size, 30))
    upload_id = store.create_multipart_upload("mv", {})
    view = memoryview(buf)
    parts = [
        store.upload_part("mv", upload_id, 1, view[:size], crc32c.crc32c(view[:size])),
        store.upload_part("mv", upload_id, 2, view[size:], crc32c.crc32c(view[size:])),
    ]
    store.complete_multipart_upload("mv", upload_id, parts)
    assert store.get("mv").data == bytes(buf)


def test_incomplete_upload_is_not_an_object(store: ObjectStore) -> None:
    upload_id = store.create_multipart_upload("ledgers/pending", {"x": "1"})
    upload_parts(store, "ledgers/pending", upload_id, [b"part one"])

    assert list(store.list()) == []
    with pytest.raises(ObjectNotFound):
        store.get("ledgers/pending")
    with pytest.raises(ObjectNotFound):
        store.head("ledgers/pending")
    uploads = store.list_multipart_uploads("ledgers/")
    assert [(u.key, u.upload_id) for u in uploads] == [("ledgers/pending", upload_id)]
    assert store.list_multipart_uploads() == uploads
    assert store.list_multipart_uploads("other/") == []
    store.abort_multipart_upload("ledgers/pending", upload_id)


def test_list_multipart_uploads_several(store: ObjectStore) -> None:
    ids = {store.create_multipart_upload(f"u/{i}", {}) for i in range(PAGE_SIZE + 2)}
    second = store.create_multipart_upload("u/0", {})
    uploads = store.list_multipart_uploads("u/")
    assert {u.upload_id for u in uploads} == ids | {second}
    assert [u.key for u in uploads] == sorted(u.key for u in uploads)
    assert all(isinstance(u.initiated, datetime) for u in uploads)
    for u in uploads:
        store.abort_multipart_upload(u.key, u.upload_id)
    assert store.list_multipart_uploads("u/") == []


def test_abort_removes_upload(store: ObjectStore) -> None:
    upload_id = store.create_multipart_upload("doomed", {})
    parts = upload_parts(store, "doomed", upload_id, [b"abc"])
    store.abort_multipart_upload("doomed", upload_id)
    assert store.list_multipart_uploads() == []
    store.abort_multipart_upload("doomed", upload_id)  # again: fine

    with pytest.raises(UploadNotFound):
        store.complete_multipart_upload("doomed", upload_id, parts)
    with pytest.raises(UploadNotFound):
        store.upload_part("doomed", upload_id, 2, b"more", crc32c.crc32c(b"more"))
    with pytest.raises(ObjectNotFound):
        store.head("doomed")


def test_abort_unknown_upload_is_fine(store: ObjectStore) -> None:
    store.abort_multipart_upload("whatever", "0" * 32)
    store.abort_multipart_upload("whatever", "not-an-upload-id")


def test_complete_unknown_upload(store: ObjectStore) -> None:
    part = UploadedPart(1, '"0123"', None)
    with pytest.raises(UploadNotFound):
        store.complete_multipart_upload("k", "f" * 32, [part])


def test_completed_upload_is_gone(store: ObjectStore) -> None:
    upload_id = store.create_multipart_upload("done", {})
    parts = upload_parts(store, "done", upload_id, [b"data"])
    store.complete_multipart_upload("done", upload_id, parts)
    assert store.list_multipart_uploads() == []
    store.abort_multipart_upload("done", upload_id)  # no-op: the object stays
    assert store.get("done").data == b"data"


# --- local store only ---------------------------------------------------------------------
@pytest.fixture()
def local(tmp_path: Path) -> LocalObjectStore:
    return LocalObjectStore(tmp_path / "root")


def _all_files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}


@pytest.mark.parametrize(
    "key",
    [
        "../x",
        "/etc/passwd",
        "a/../../b",
        "a\x00b",
        "..",
        "a/..",
        "..\\x",
        ".uploads/x",
        ".uploads",
        "a/.tmp-123",
        ".tmp-x",
    ],
)
def test_local_refuses_escaping_and_reserved_keys(tmp_path: Path, key: str) -> None:
    store = LocalObjectStore(tmp_path / "root")
    for call in (
        lambda: store.put(key, b"x", {}),
        lambda: store.get(key),
        lambda: store.head(key),
        lambda: store.delete(key),
        lambda: store.get_range(key, 0, 1),
        lambda: store.create_multipart_upload(key, {}),
    ):
        with pytest.raises(InvalidStoreKey):
            call()
    assert _all_files(tmp_path) == set()


def test_local_refuses_upload_id_paths(local: LocalObjectStore) -> None:
    for upload_id in ["../../x", "/etc", "", "a" * 32]:
        with pytest.raises(UploadNotFound):
            local.upload_part("k", upload_id, 1, b"x", crc32c.crc32c(b"x"))
        with pytest.raises(UploadNotFound):
            local.complete_multipart_upload("k", upload_id, [UploadedPart(1, "e")])
        local.abort_multipart_upload("k", upload_id)


def test_local_does_not_follow_symlinks_out(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    store = LocalObjectStore(tmp_path / "root")
    (tmp_path / "root" / "link").symlink_to(outside)
    with pytest.raises(InvalidStoreKey):
        store.put("link/x", b"x", {})
    with pytest.raises(InvalidStoreKey):
        store.get("link/x")
    assert list(outside.iterdir()) == []
    (outside / "secret").write_bytes(b"not yours")
    (tmp_path / "root" / "file-link").symlink_to(outside / "secret")
    with pytest.raises(InvalidStoreKey):
        store.get("file-link")
    assert list(store.list()) == []


def test_local_url_and_open_layout(tmp_path: Path) -> None:
    store = LocalObjectStore(tmp_path / "a dir")
    assert store.url == (tmp_path / "a dir").as_uri()
    store.put("x/y", b"hello", {"k": "v"})
    assert (tmp_path / "a dir" / "x" / "y").is_file()


def test_local_temp_files_are_never_listed(local: LocalObjectStore) -> None:
    local.put("a/obj", b"data", {})
    # what a crash between "create temp file" and "rename" leaves behind
    (local.root / "a" / ".tmp-deadbeef").write_bytes(b"half-written")
    (local.root / ".tmp-cafe").write_bytes(b"")
    (local.root / ".uploads" / ".tmp-complete-x").mkdir(parents=True)
    assert [i.key for i in local.list()] == ["a/obj"]
    assert local.list_multipart_uploads() == []


def test_local_crash_during_put_leaves_old_object(
    local: LocalObjectStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    local.put("k", b"old", {"v": "1"})

    def crash(src: Any, dst: Any) -> None:
        raise OSError(5, "simulated crash before rename")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(StoreError):
        local.put("k", b"new" * 1000, {"v": "2"})
    with pytest.raises(StoreError):
        local.put("fresh", b"new", {})
    monkeypatch.undo()

    got = local.get("k")
    assert (got.data, dict(got.metadata)) == (b"old", {"v": "1"})
    with pytest.raises(ObjectNotFound):
        local.head("fresh")
    assert [i.key for i in local.list()] == ["k"]
    assert _all_files(local.root) == {"k"}  # the temp files were removed


def test_local_crash_during_complete_keeps_upload(
    local: LocalObjectStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    upload_id = local.create_multipart_upload("k", {})
    parts = upload_parts(local, "k", upload_id, [b"a" * 10, b"b" * 5])

    def crash(src: Any, dst: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(StoreError, match="No space left"):
        local.complete_multipart_upload("k", upload_id, parts)
    monkeypatch.undo()

    assert list(local.list()) == []
    assert [u.upload_id for u in local.list_multipart_uploads()] == [upload_id]
    local.complete_multipart_upload("k", upload_id, parts)  # retry works
    assert local.get("k").data == b"a" * 10 + b"b" * 5


def test_local_foreign_file_is_not_an_object(local: LocalObjectStore) -> None:
    (local.root / "stray.txt").write_bytes(b"dropped here by hand")
    local.put("real", b"x", {})
    assert [i.key for i in local.list()] == ["real"]
    with pytest.raises(StoreError):
        local.get("stray.txt")


def test_local_conditional_put_race_has_one_winner(local: LocalObjectStore) -> None:
    winners: list[int] = []
    losers: list[int] = []
    barrier = threading.Barrier(8)

    def writer(i: int) -> None:
        barrier.wait()
        try:
            local.put(
                "race/index", f"writer {i}".encode() * 1000, {"w": str(i)}, if_none_match=True
            )
            winners.append(i)
        except PreconditionFailed:
            losers.append(i)

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(winners) == 1 and len(losers) == 7
    got = local.get("race/index")
    assert got.data == f"writer {winners[0]}".encode() * 1000
    assert dict(got.metadata) == {"w": str(winners[0])}


def test_local_readers_never_see_partial_objects(local: LocalObjectStore) -> None:
    versions = [bytes([i]) * 200_000 for i in range(1, 6)]
    local.put("hot", versions[0], {"v": "0"})
    stop = threading.Event()
    bad: list[str] = []

    def reader() -> None:
        while not stop.is_set():
            got = local.get("hot")
            v = int(got.metadata["v"])
            if got.data != versions[v]:
                bad.append(f"version {v} has {len(got.data)} bytes")

    t = threading.Thread(target=reader)
    t.start()
    for round_ in range(20):
        v = round_ % len(versions)
        local.put("hot", versions[v], {"v": str(v)})
    stop.set()
    t.join()
    assert bad == []


def test_local_delete_prunes_empty_directories(local: LocalObjectStore) -> None:
    local.put("a/b/c", b"x", {})
    local.put("a/keep", b"y", {})
    local.delete("a/b/c")
    assert not (local.root / "a" / "b").exists()
    assert (local.root / "a" / "keep").exists()
    local.delete("a/keep")
    assert list(local.root.iterdir()) == []
    local.put("a", b"now a file", {})  # the prefix is free again
    assert local.get("a").data == b"now a file"


def test_local_key_and_prefix_conflict(local: LocalObjectStore) -> None:
    local.put("a/b", b"x", {})
    with pytest.raises(StoreError):
        local.put("a", b"y", {})
    with pytest.raises(ObjectNotFound):
        local.get("a")
    local.put("file", b"z", {})
    with pytest.raises(StoreError):
        local.put("file/child", b"w", {})


def test_local_upload_part_checks_crc(local: LocalObjectStore) -> None:
    upload_id = local.create_multipart_upload("k", {})
    with pytest.raises(StoreError, match="BadDigest"):
        local.upload_part("k", upload_id, 1, b"data", crc32c.crc32c(b"other"))


def test_local_complete_checks_parts(local: LocalObjectStore) -> None:
    upload_id = local.create_multipart_upload("k", {})
    parts = upload_parts(local, "k", upload_id, [b"one", b"two"])
    with pytest.raises(StoreError, match="InvalidPart"):
        local.complete_multipart_upload("k", upload_id, [parts[0], UploadedPart(3, '"00"')])
    with pytest.raises(StoreError, match="InvalidPart"):
        local.complete_multipart_upload("k", upload_id, [UploadedPart(1, '"bad"'), parts[1]])
    local.complete_multipart_upload("k", upload_id, parts)  # still there, still completable
    assert local.get("k").data == b"onetwo"


def test_local_upload_of_another_key(local: LocalObjectStore) -> None:
    upload_id = local.create_multipart_upload("k", {})
    with pytest.raises(UploadNotFound):
        local.upload_part("other", upload_id, 1, b"x", crc32c.crc32c(b"x"))
    local.abort_multipart_upload("other", upload_id)  # not this key's upload: no-op
    assert [u.upload_id for u in local.list_multipart_uploads()] == [upload_id]


def test_local_last_modified_is_mtime(local: LocalObjectStore) -> None:
    local.put("k", b"x", {})
    os.utime(local.root / "k", (1_600_000_000, 1_600_000_000))
    info = local.head("k")
    assert info.last_modified is not None
    assert info.last_modified.timestamp() == 1_600_000_000
    assert [i.last_modified for i in local.list()] == [info.last_modified]


# --- S3 store only ------------------------------------------------------------------------
@pytest.mark.s3
def test_s3_sends_crc32c(moto_endpoint: S3Endpoint) -> None:
    """moto stores the CRC32C a put sends (it does not compute one for puts itself)."""
    bucket = moto_endpoint.new_bucket()
    store = make_s3_store(moto_endpoint, bucket)
    data = payload(5000, seed=40)
    store.put("obj", data, {})
    raw = moto_endpoint.client().head_object(
        Bucket=bucket, Key=f"{PREFIX}/obj", ChecksumMode="ENABLED"
    )
    assert raw["ChecksumCRC32C"] == crc32c_header(crc32c.crc32c(data))

    chunks = [payload(4 * KiB, 41), payload(100, 42)]
    upload_id = store.create_multipart_upload("mpu", {})
    parts = upload_parts(store, "mpu", upload_id, chunks)
    assert [p.crc32c for p in parts] == [crc32c.crc32c(c) for c in chunks]
    store.complete_multipart_upload("mpu", upload_id, parts)
    raw = moto_endpoint.client().head_object(
        Bucket=bucket, Key=f"{PREFIX}/mpu", ChecksumMode="ENABLED"
    )
    assert raw.get("ChecksumCRC32C")  # the upload was created with ChecksumAlgorithm=CRC32C


@pytest.mark.s3
def test_s3_prefix_is_transparent(s3_endpoint: S3Endpoint, s3_bucket: str) -> None:
    raw = s3_endpoint.client()
    raw.put_object(Bucket=s3_bucket, Key="pfx/runner", Body=b"outside the prefix")
    raw.put_object(Bucket=s3_bucket, Key="elsewhere/k", Body=b"outside")
    store = make_s3_store(s3_endpoint, s3_bucket, prefix="/pfx/run/")
    assert store.url == f"s3://{s3_bucket}/pfx/run"
    store.put("k", b"inside", {})
    assert raw.get_object(Bucket=s3_bucket, Key="pfx/run/k")["Body"].read() == b"inside"
    assert [i.key for i in store.list()] == ["k"]
    upload_id = store.create_multipart_upload("m", {})
    assert [u.key for u in store.list_multipart_uploads()] == ["m"]
    store.abort_multipart_upload("m", upload_id)

    bare = make_s3_store(s3_endpoint, s3_bucket, prefix="")
    assert bare.url == f"s3://{s3_bucket}"
    assert [i.key for i in bare.list()] == ["elsewhere/k", "pfx/run/k", "pfx/runner"]


@pytest.mark.s3
def test_s3_list_uses_pages(moto_endpoint: S3Endpoint) -> None:
    store = make_s3_store(moto_endpoint, moto_endpoint.new_bucket(), page_size=2)
    for i in range(5):
        store.put(f"k{i}", b"x", {})
    requests: list[str] = []
    store._client.meta.events.register(
        "before-call.s3.ListObjectsV2", lambda **kw: requests.append("page")
    )
    assert [i.key for i in store.list()] == [f"k{i}" for i in range(5)]
    assert len(requests) == 3


@pytest.mark.s3
def test_s3_missing_bucket(s3_endpoint: S3Endpoint) -> None:
    store = make_s3_store(s3_endpoint, "no-such-bucket-4711")
    with pytest.raises(ObjectNotFound, match="bucket"):
        store.get("k")
    with pytest.raises(ObjectNotFound, match="bucket"):
        list(store.list())
    with pytest.raises(ObjectNotFound):
        store.head("k")


@pytest.mark.s3
def test_s3_unreachable_endpoint_fails_fast() -> None:
    settings = OffloadSettings(connect_timeout=0.5, read_timeout=0.5, max_attempts=1)
    store = S3ObjectStore(
        "some-bucket",
        "p",
        endpoint_url="http://127.0.0.1:1",
        settings=settings,
        aws_access_key_id="AKIAEXAMPLE",
        aws_secret_access_key="SECRETSECRETSECRET",
    )
    started = time.monotonic()
    for call in (
        lambda: store.put("k", b"x", {}),
        lambda: store.get("k"),
        lambda: store.head("k"),
        lambda: list(store.list()),
        lambda: store.create_multipart_upload("k", {}),
    ):
        with pytest.raises(StoreUnavailable) as info:
            call()
        assert "SECRETSECRETSECRET" not in str(info.value)
    assert time.monotonic() - started < 10


@pytest.mark.s3
def test_s3_endpoint_from_environment(
    moto_endpoint: S3Endpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in moto_endpoint.env().items():
        monkeypatch.setenv(name, value)
    bucket = moto_endpoint.new_bucket()
    store = S3ObjectStore(bucket, "env", settings=TEST_SETTINGS)
    assert store.endpoint_url == moto_endpoint.url
    assert store._client.meta.config.s3 == {"addressing_style": "path"}
    store.put("k", b"via env", {})
    assert store.get("k").data == b"via env"


@pytest.mark.s3
def test_s3_client_config(moto_endpoint: S3Endpoint) -> None:
    settings = OffloadSettings(connect_timeout=3.0, read_timeout=7.0, max_attempts=4)
    store = make_s3_store(moto_endpoint, "cfg-bucket", settings=settings)
    config = store._client.meta.config
    assert (config.connect_timeout, config.read_timeout) == (3.0, 7.0)
    assert config.retries == {"total_max_attempts": 4, "mode": "standard"}
    assert config.request_checksum_calculation == "when_required"
    assert config.response_checksum_validation == "when_required"
    assert config.s3 == {"addressing_style": "path"}


@pytest.mark.s3
def test_s3_errors_and_logs_never_contain_the_secret(
    moto_endpoint: S3Endpoint, s3_bucket_moto: str
) -> None:
    secret = "Sup3rS3cretKeyValue/abcdefXYZ"  # moto accepts any credentials
    store = S3ObjectStore(
        s3_bucket_moto,
        "p",
        endpoint_url=moto_endpoint.url,
        settings=TEST_SETTINGS,
        aws_access_key_id="AKIAIDEXAMPLE",
        aws_secret_access_key=secret,
    )
    assert secret not in repr(store) and secret not in store.url
    store.put("k", b"v", {})
    errors: list[BaseException] = []
    saved = structlog.get_config()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.DEBUG))
    try:
        with structlog.testing.capture_logs() as logs:
            for call in (
                lambda: store.get("missing"),
                lambda: store.put("k", b"w", {}, if_none_match=True),
                lambda: store.get_range("k", 10, 20),
                lambda: store.complete_multipart_upload("k", "bogus", [UploadedPart(1, "e")]),
                lambda: store.upload_part("k", "bogus", 1, b"x", 0),
            ):
                with pytest.raises(StoreError) as info:
                    call()
                errors.append(info.value)
    finally:
        structlog.configure(**saved)
    # moto's 500 for the bogus upload id is retried, and each failed attempt is logged
    assert any(e["event"] == "s3 attempt failed" for e in logs)
    for exc in errors:
        chain: BaseException | None = exc
        while chain is not None:
            assert secret not in str(chain) and secret not in repr(chain)
            chain = chain.__cause__
    assert secret not in repr(logs)


@pytest.fixture()
def s3_bucket_moto(moto_endpoint: S3Endpoint) -> str:
    return moto_endpoint.new_bucket()


@pytest.mark.s3
@pytest.mark.rgw
def test_s3_wrong_credentials_are_access_denied(rgw_endpoint: S3Endpoint) -> None:
    bucket = rgw_endpoint.new_bucket()
    secret = "definitely-not-the-secret-key-42"
    store = S3ObjectStore(
        bucket,
        "p",
        endpoint_url=rgw_endpoint.url,
        settings=TEST_SETTINGS,
        aws_access_key_id=rgw_endpoint.access_key,
        aws_secret_access_key=secret,
    )
    for call in (
        lambda: store.put("k", b"x", {}),
        lambda: store.get("k"),
        lambda: list(store.list()),
    ):
        with pytest.raises(AccessDenied) as info:
            call()
        assert secret not in str(info.value)
    store = S3ObjectStore(
        bucket,
        "p",
        endpoint_url=rgw_endpoint.url,
        settings=TEST_SETTINGS,
        aws_access_key_id="NOSUCHACCESSKEY",
        aws_secret_access_key=secret,
    )
    with pytest.raises(AccessDenied):
        store.head("k")


@pytest.mark.s3
@pytest.mark.parametrize("attempts", [1, 3])
def test_s3_max_attempts_counts_attempts(moto_endpoint: S3Endpoint, attempts: int) -> None:
    """OffloadSettings.max_attempts is the number of HTTP attempts (moto answers 500 to a part
    for an aborted upload, which botocore retries)."""
    settings = OffloadSettings(connect_timeout=2.0, read_timeout=5.0, max_attempts=attempts)
    store = make_s3_store(moto_endpoint, moto_endpoint.new_bucket(), settings=settings)
    upload_id = store.create_multipart_upload("k", {})
    store.abort_multipart_upload("k", upload_id)
    sent: list[str] = []
    store._client.meta.events.register("before-send.s3.UploadPart", lambda **kw: sent.append("try"))
    with pytest.raises(UploadNotFound):
        store.upload_part("k", upload_id, 1, b"x", crc32c.crc32c(b"x"))
    assert len(sent) == attempts
