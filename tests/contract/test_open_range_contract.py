"""``ObjectStore.open_range`` (streamed ranged reads): the same tests against every backend,
then what only S3 does (pinning the object's version when a dropped body is resumed)."""

from __future__ import annotations

import pytest

from devservers.endpoint import S3Endpoint
from offloader.errors import ObjectNotFound, PreconditionFailed, StoreError
from offloader.store.base import ObjectStore
from tests.contract.backends import make_s3_store, payload


def _read_all(reader_read: object, chunk: int) -> bytes:
    out = bytearray()
    read = reader_read
    assert callable(read)
    while data := read(chunk):
        assert 0 < len(data) <= chunk
        out += data
    return bytes(out)


def test_open_range_streams_the_bytes(store: ObjectStore) -> None:
    data = payload(300_000, seed=5)
    store.put("obj", data, {})
    reader = store.open_range("obj", 1000, 250_000)
    assert reader.size == len(data)
    assert _read_all(reader.read, 64 * 1024) == data[1000:250_000]
    assert reader.read(10) == b""  # the range is consumed
    reader.close()
    reader.close()  # idempotent


def test_open_range_readinto_gives_the_same_bytes(store: ObjectStore) -> None:
    """``readinto``, where a backend's reader offers it (the read-ahead's reused buffers),
    fills the caller's buffer with exactly the bytes ``read`` would return."""
    data = payload(300_000, seed=15)
    store.put("obj", data, {})
    reader = store.open_range("obj", 7, 290_000)
    into = getattr(reader, "readinto", None)
    if into is None:
        reader.close()
        return  # optional: the read-ahead then reads with read()
    buf = memoryview(bytearray(50_000))
    out = bytearray()
    assert reader.read(1000) == data[7:1007]  # mixed with read()
    while got := into(buf):
        assert 0 < got <= len(buf)
        out += buf[:got]
    assert bytes(out) == data[1007:290_000]
    assert into(buf) == 0
    reader.close()


def test_open_range_is_clipped_at_the_object_end(store: ObjectStore) -> None:
    data = payload(5000, seed=6)
    store.put("obj", data, {})
    reader = store.open_range("obj", 4000, 10_000)
    assert (_read_all(reader.read, 333), reader.size) == (data[4000:], 5000)
    reader.close()


def test_open_range_closed_early_then_reopened(store: ObjectStore) -> None:
    data = payload(2 * 1024 * 1024, seed=7)
    store.put("obj", data, {})
    reader = store.open_range("obj", 0, len(data))
    assert reader.read(100) == data[:100]
    reader.close()  # the rest of the body is dropped, nothing is left hanging
    assert reader.read(100) == b""
    again = store.open_range("obj", 100, 200)
    assert again.read(1000) == data[100:200]
    again.close()


def test_open_range_errors(store: ObjectStore) -> None:
    store.put("obj", b"0123456789", {})
    with pytest.raises(ObjectNotFound):
        store.open_range("nope", 0, 10)
    for start, end in [(10, 20), (50, 60), (5, 5), (6, 2), (-1, 3)]:
        with pytest.raises(StoreError) as info:
            store.open_range("obj", start, end)
        assert not isinstance(info.value, ObjectNotFound)


def test_s3_resume_refuses_a_replaced_object(s3_endpoint: S3Endpoint, s3_bucket: str) -> None:
    """A body dropped mid-way is resumed from its position, but only on the same object
    version (If-Match on the first answer's ETag): a replaced object fails the read instead
    of splicing two objects' bytes together."""
    store = make_s3_store(s3_endpoint, s3_bucket)
    data = payload(3 * 1024 * 1024, seed=8)
    store.put("obj", data, {})
    reader = store.open_range("obj", 0, len(data))
    assert reader.read(1000) == data[:1000]
    _drop_connection(reader)
    assert reader.read(1000) == data[1000:2000]  # resumed at offset 1000, same object
    store.put("obj", payload(len(data), seed=9), {})
    _drop_connection(reader)
    with pytest.raises(PreconditionFailed):
        reader.read(1000)
    reader.close()
    store.close()


def test_s3_readinto_resumes_a_dropped_body_on_the_same_object(
    s3_endpoint: S3Endpoint, s3_bucket: str
) -> None:
    """``readinto`` (straight from the socket) resumes like ``read``: from its position, on
    the same object version only."""
    store = make_s3_store(s3_endpoint, s3_bucket)
    data = payload(3 * 1024 * 1024, seed=18)
    store.put("obj", data, {})
    reader = store.open_range("obj", 0, len(data))
    buf = memoryview(bytearray(1000))
    assert reader.readinto(buf) == 1000 and bytes(buf) == data[:1000]  # type: ignore[attr-defined]
    _drop_connection(reader)
    got = reader.readinto(buf)  # type: ignore[attr-defined]
    assert bytes(buf[:got]) == data[1000 : 1000 + got] and got > 0
    store.put("obj", payload(len(data), seed=19), {})
    _drop_connection(reader)
    with pytest.raises(PreconditionFailed):
        reader.readinto(buf)  # type: ignore[attr-defined]
    reader.close()
    store.close()


def test_s3_resume_is_bounded(s3_endpoint: S3Endpoint, s3_bucket: str) -> None:
    """Every resume fails (the endpoint is gone): the read gives up with a typed error after
    the configured attempts, it does not loop."""
    from offloader.config import OffloadSettings
    from offloader.errors import StoreUnavailable

    settings = OffloadSettings(connect_timeout=0.5, read_timeout=2.0, max_attempts=3)
    store = make_s3_store(s3_endpoint, s3_bucket, settings=settings)
    data = payload(1024 * 1024, seed=10)
    store.put("obj", data, {})
    reader = store.open_range("obj", 0, len(data))
    assert reader.read(10) == data[:10]
    _drop_connection(reader)
    # point the client at a closed port: every reopen fails to connect
    store._client.meta.events.register(  # type: ignore[attr-defined]
        "before-send.s3.GetObject", _refuse
    )
    with pytest.raises(StoreUnavailable, match="gave up after 3 attempts at offset 10"):
        reader.read(10)
    store.close()


def _refuse(**_: object) -> None:
    from botocore.exceptions import EndpointConnectionError

    raise EndpointConnectionError(endpoint_url="http://127.0.0.1:9")


def _drop_connection(reader: object) -> None:
    """Close the HTTP response under the reader, as a dropped connection would."""
    body = reader._body  # type: ignore[attr-defined]
    assert body is not None
    body._body.close()
