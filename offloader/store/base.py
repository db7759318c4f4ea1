"""The ObjectStore Protocol: the small surface the offloader needs from S3 (or a directory).

Keys are relative to the store's root (the ``prefix`` of ``s3://bucket/prefix`` or the directory
of ``file:///dir``). Every backend lives in one module of this package and passes the shared
contract suite in ``tests/contract/test_object_store_contract.py``. Backends raise only errors
from :mod:`offloader.errors` (``ObjectNotFound``, ``UploadNotFound``, ``PreconditionFailed``,
``StoreUnavailable``, ``AccessDenied``, ``InvalidStoreKey``, ``StoreError``).

Two optional members, outside the Protocol, are read with ``getattr`` by the offload writer:
``prefers_one_request_upload`` (True on GCS and Azure, whose multipart upload is an emulation)
and ``put_parts(key, parts, metadata)`` (the whole object from its parts in one request, never
joined); see :class:`offloader.offload.writer.OneRequestUpload`.

Keys are ``/``-separated relative paths, checked alike by every backend
(:func:`offloader.store.keycheck.check_key`): no empty key or segment, no ``.``/``..``
segment, no leading ``/``, no backslash or control character (``InvalidStoreKey``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol, runtime_checkable

Buffer = bytes | bytearray | memoryview


@dataclass(frozen=True)
class ObjectInfo:
    """What HEAD (or a listing) knows about an object. ``metadata`` keys are lower-case."""

    key: str
    size: int
    metadata: Mapping[str, str] = field(default_factory=dict)
    last_modified: datetime | None = None
    etag: str | None = None


@dataclass(frozen=True)
class GetResult:
    """Bytes of a GET (whole or ranged); ``size`` is the whole object's size."""

    data: bytes
    size: int
    metadata: Mapping[str, str] = field(default_factory=dict)


class RangeReader(Protocol):
    """The body of one ranged GET, read as it arrives (:meth:`ObjectStore.open_range`).

    A reader may also offer ``readinto(buf: memoryview) -> int`` (up to ``len(buf)`` bytes
    into ``buf``, 0 once the range is consumed, the same retries and errors as :meth:`read`):
    the local store's and :class:`~offloader.store.ranges.ResumingRangeReader` (S3, GCS,
    Azure) do, S3's from the socket with no copy. The read-ahead thread uses it when present
    to fill reused buffers (:class:`~offloader.read.prefetch.ChunkPool`)."""

    @property
    def size(self) -> int:
        """The whole object's size."""
        ...

    @property
    def metadata(self) -> Mapping[str, str]:
        """The object's user metadata, from the GET's response (no extra request)."""
        ...

    def read(self, n: int) -> bytes:
        """Up to ``n`` bytes (at least one while the range has bytes left); ``b""`` once the
        range is consumed. A transport failure is retried from the current offset (bounded)
        on the same version of the object; what cannot be retried raises a ``StoreError``."""
        ...

    def close(self) -> None:
        """Drop the rest of the body (idempotent)."""
        ...


@dataclass(frozen=True)
class UploadedPart:
    """A part as CompleteMultipartUpload needs it."""

    part_number: int
    etag: str
    crc32c: int | None = None


@dataclass(frozen=True)
class MultipartUploadInfo:
    """An incomplete multipart upload, as listed."""

    key: str
    upload_id: str
    initiated: datetime | None = None


@runtime_checkable
class ObjectStore(Protocol):
    """An S3-like object store. Every method is blocking and bounded in time."""

    @property
    def url(self) -> str:
        """The store's URL (``s3://bucket/prefix`` or ``file:///dir``), without credentials."""
        ...

    @property
    def supports_conditional_put(self) -> bool:
        """True when ``put(..., if_none_match=True)`` is enforced by the store."""
        ...

    def create_multipart_upload(self, key: str, metadata: Mapping[str, str]) -> str:
        """Start a multipart upload with user metadata; returns the upload id."""
        ...

    def upload_part(
        self, key: str, upload_id: str, part_number: int, data: Buffer, crc32c: int
    ) -> UploadedPart:
        """Upload one part (1-based number) with its CRC32C (sent to S3 as its checksum)."""
        ...

    def complete_multipart_upload(
        self, key: str, upload_id: str, parts: Sequence[UploadedPart]
    ) -> None:
        """Assemble the parts, in part-number order, into the object."""
        ...

    def abort_multipart_upload(self, key: str, upload_id: str) -> None:
        """Drop an incomplete upload; an unknown upload id is not an error."""
        ...

    def list_multipart_uploads(self, prefix: str = "") -> list[MultipartUploadInfo]:
        """Incomplete uploads whose key starts with ``prefix``, sorted by key, then by
        initiation time."""
        ...

    def put(
        self,
        key: str,
        data: Buffer,
        metadata: Mapping[str, str],
        *,
        if_none_match: bool = False,
    ) -> None:
        """Write a whole object (with its CRC32C); ``if_none_match`` refuses to overwrite
        (``PreconditionFailed``) where the store supports it."""
        ...

    def get(self, key: str) -> GetResult:
        """The whole object (``ObjectNotFound`` if missing)."""
        ...

    def get_range(self, key: str, start: int, end: int) -> GetResult:
        """Bytes ``[start, end)`` of the object (clipped at its end); ``start`` must be below
        the object's size. ``size`` of the result is the whole object's size. An empty or
        negative range, or ``start >= size``, raises ``StoreError`` (not ``ObjectNotFound``)."""
        ...

    def open_range(self, key: str, start: int, end: int) -> RangeReader:
        """Bytes ``[start, end)`` as a stream, for long sequential reads: one request, its
        body read on demand (no per-chunk request cost). The request is made here, so a
        missing object or a bad range fails here, with ``get_range``'s rules."""
        ...

    def head(self, key: str) -> ObjectInfo:
        """Size and user metadata (``ObjectNotFound`` if missing)."""
        ...

    def delete(self, key: str) -> None:
        """Remove an object; a missing key is not an error."""
        ...

    def list(self, prefix: str = "") -> Iterator[ObjectInfo]:
        """Objects whose key starts with ``prefix``, in key order (metadata may be empty)."""
        ...

    def close(self) -> None:
        """Release clients and connections."""
        ...
