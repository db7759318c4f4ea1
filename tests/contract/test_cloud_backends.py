"""What only the GCS and Azure stores do, on fake-gcs-server and Azurite: the reserved upload
space, a resumed range pinned to the object's generation (GCS) or ETag (Azure), a compose tree
past GCS's 32 sources, Azure's escaped metadata names and its dropped uncommitted blocks, and
fast, typed failures for an unreachable endpoint."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import crc32c
import pytest

from devservers.cloud import AzuriteEmulator, GcsEmulator
from offloader.config import OffloadSettings
from offloader.errors import InvalidStoreKey, PreconditionFailed, StoreError, StoreUnavailable
from offloader.store.azure import AzureObjectStore, decode_metadata, encode_metadata
from offloader.store.base import ObjectStore, UploadedPart
from offloader.store.gcs import GCSObjectStore
from tests.contract.backends import PREFIX, make_azure_store, make_gcs_store, payload

CLOUDS = [
    pytest.param("gcs", marks=pytest.mark.gcs),
    pytest.param("azure", marks=pytest.mark.azure),
]


@pytest.fixture(params=CLOUDS)
def cloud_store(request: pytest.FixtureRequest) -> ObjectStore:
    if request.param == "gcs":
        gcs: GcsEmulator = request.getfixturevalue("gcs_emulator")
        return make_gcs_store(gcs, gcs.new_bucket())
    azurite: AzuriteEmulator = request.getfixturevalue("azurite")
    return make_azure_store(azurite, azurite.new_container())


def test_the_upload_space_is_reserved_and_hidden(cloud_store: ObjectStore) -> None:
    for key in (".uploads", ".uploads/k/x/0123"):
        with pytest.raises(InvalidStoreKey):
            cloud_store.put(key, b"x", {})
        with pytest.raises(InvalidStoreKey):
            cloud_store.create_multipart_upload(key, {})
    upload_id = cloud_store.create_multipart_upload("a/b", {"role": "data"})
    cloud_store.upload_part("a/b", upload_id, 1, b"part", crc32c.crc32c(b"part"))
    assert list(cloud_store.list()) == []
    assert [(u.key, u.upload_id) for u in cloud_store.list_multipart_uploads("a/")] == [
        ("a/b", upload_id)
    ]
    cloud_store.abort_multipart_upload("a/b", upload_id)
    assert cloud_store.list_multipart_uploads() == []


def test_a_resumed_range_is_pinned_to_the_first_version(cloud_store: ObjectStore) -> None:
    data = payload(600_000, seed=8)
    cloud_store.put("obj", data, {})
    reader = cloud_store.open_range("obj", 0, len(data))
    assert reader.read(1000) == data[:1000]
    reader._body.close()  # type: ignore[attr-defined]  # as a dropped connection would
    assert reader.read(1000) == data[1000:2000]  # resumed at offset 1000, same version
    cloud_store.put("obj", payload(len(data), seed=9), {})
    reader._body.close()  # type: ignore[attr-defined]
    with pytest.raises(PreconditionFailed):
        reader.read(1000)
    reader.close()


@pytest.mark.gcs
def test_gcs_composes_past_32_parts(gcs_emulator: GcsEmulator) -> None:
    store = make_gcs_store(gcs_emulator, gcs_emulator.new_bucket())
    chunks = [payload(100 + i, seed=i) for i in range(40)]
    upload_id = store.create_multipart_upload("many", {"role": "data"})
    parts = [
        store.upload_part("many", upload_id, n, c, crc32c.crc32c(c))
        for n, c in enumerate(chunks, start=1)
    ]
    store.complete_multipart_upload("many", upload_id, parts)
    got = store.get("many")
    assert got.data == b"".join(chunks) and dict(got.metadata) == {"role": "data"}
    raw = gcs_emulator.client().bucket(store.bucket)
    assert [b.name for b in raw.list_blobs()] == [f"{PREFIX}/many"]  # parts and marker gone


@pytest.mark.azure
def test_azure_metadata_names_round_trip(azurite: AzuriteEmulator) -> None:
    meta = {"S3ManagedLedgerOffloaderFormatVersion": "1", "Mixed-Case": "v", "ofx_x": "w"}
    encoded = encode_metadata(meta)
    assert encoded["s3managedledgeroffloaderformatversion"] == "1"  # Pulsar's names unchanged
    assert all(name.replace("_", "a").isalnum() for name in encoded)
    assert decode_metadata(encoded) == {k.lower(): v for k, v in meta.items()}
    store = make_azure_store(azurite, azurite.new_container())
    store.put("k", b"x", meta)
    assert dict(store.head("k").metadata) == {k.lower(): v for k, v in meta.items()}


@pytest.mark.azure
def test_azure_abort_drops_the_uncommitted_blocks(azurite: AzuriteEmulator) -> None:
    container = azurite.new_container()
    store = make_azure_store(azurite, container)
    upload_id = store.create_multipart_upload("k", {})
    store.upload_part("k", upload_id, 1, b"staged", crc32c.crc32c(b"staged"))
    blob = azurite.client().get_blob_client(container, f"{PREFIX}/k")
    assert [b.size for b in blob.get_block_list("uncommitted")[1]] == [6]
    store.abort_multipart_upload("k", upload_id)
    assert list(azurite.client().get_container_client(container).list_blobs()) == []
    assert store.list_multipart_uploads() == []


@pytest.mark.parametrize("kind", CLOUDS)
def test_unreachable_endpoint_fails_fast(kind: str) -> None:
    settings = OffloadSettings(connect_timeout=0.5, read_timeout=0.5, max_attempts=2)
    store: ObjectStore
    if kind == "gcs":
        store = GCSObjectStore("some-bucket", "p", endpoint="http://127.0.0.1:9", settings=settings)
    else:
        conn = (
            "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=a2V5;"
            "BlobEndpoint=http://127.0.0.1:9/devstoreaccount1;"
        )
        store = AzureObjectStore("some-container", "p", connection_string=conn, settings=settings)
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
        assert store.url in str(info.value)
    assert time.monotonic() - started < 15


def test_complete_checks_the_parts(cloud_store: ObjectStore) -> None:
    upload_id = cloud_store.create_multipart_upload("k", {})
    one = cloud_store.upload_part("k", upload_id, 1, b"one", crc32c.crc32c(b"one"))
    two = cloud_store.upload_part("k", upload_id, 2, b"two", crc32c.crc32c(b"two"))
    never = UploadedPart(3, two.etag)  # part 3 was never uploaded
    with pytest.raises(StoreError, match="InvalidPart"):
        cloud_store.complete_multipart_upload("k", upload_id, [one, never])
    cloud_store.complete_multipart_upload("k", upload_id, [one, two])  # still completable
    assert cloud_store.get("k").data == b"onetwo"


def test_conditional_put_race_has_one_winner(cloud_store: ObjectStore) -> None:
    winners: list[int] = []
    losers: list[int] = []
    barrier = threading.Barrier(6)

    def writer(i: int) -> None:
        barrier.wait()
        try:
            cloud_store.put(
                "race/index", f"writer {i}".encode() * 500, {"w": str(i)}, if_none_match=True
            )
            winners.append(i)
        except PreconditionFailed:
            losers.append(i)

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(winners) == 1 and len(losers) == 5
    got = cloud_store.get("race/index")
    assert got.data == f"writer {winners[0]}".encode() * 500
    assert dict(got.metadata) == {"w": str(winners[0])}


def test_concurrent_uploads_of_different_keys(cloud_store: ObjectStore) -> None:
    def upload(n: int) -> bytes:
        chunks = [payload(3000, seed=n * 10 + i) for i in range(3)]
        upload_id = cloud_store.create_multipart_upload(f"ledger-{n}", {"n": str(n)})
        parts = [
            cloud_store.upload_part(f"ledger-{n}", upload_id, i, c, crc32c.crc32c(c))
            for i, c in enumerate(chunks, start=1)
        ]
        cloud_store.complete_multipart_upload(f"ledger-{n}", upload_id, parts)
        return b"".join(chunks)

    with ThreadPoolExecutor(4) as pool:
        expected = list(pool.map(upload, range(6)))
    for n, data in enumerate(expected):
        got = cloud_store.get(f"ledger-{n}")
        assert (got.data, dict(got.metadata)) == (data, {"n": str(n)})
    assert cloud_store.list_multipart_uploads() == []
    assert [i.key for i in cloud_store.list()] == [f"ledger-{n}" for n in range(6)]
