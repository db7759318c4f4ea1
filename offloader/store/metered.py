"""MeteredObjectStore: an ObjectStore wrapper that records every request into a metrics set.

Each call of the :class:`~offloader.store.base.ObjectStore` surface is one request, recorded
with ``Metrics.record_store_request(backend, operation, outcome, seconds)``: ``backend`` is the
URL scheme (``s3``, ``file``), ``operation`` the method name (``put``, ``get_range``,
``upload_part``...), ``outcome`` ``success`` or the kind of error it raised (:func:`outcome_of`).
``open_range`` is timed up to the response (the body is read later, by the caller); ``list`` is
timed while it pages, not while the caller works on what it yields. The wrapper sits at the
Protocol boundary, so it measures S3 and the local backend alike without touching boto3 code.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TypeVar
from urllib.parse import urlsplit

from offloader.errors import (
    AccessDenied,
    InvalidStoreKey,
    ObjectNotFound,
    PreconditionFailed,
    StoreUnavailable,
    UploadNotFound,
)
from offloader.metrics.base import Metrics
from offloader.store.base import (
    Buffer,
    GetResult,
    MultipartUploadInfo,
    ObjectInfo,
    ObjectStore,
    RangeReader,
    UploadedPart,
)

__all__ = ["MeteredObjectStore", "outcome_of"]

T = TypeVar("T")

_OUTCOMES: tuple[tuple[type[BaseException], str], ...] = (
    (ObjectNotFound, "not_found"),
    (UploadNotFound, "not_found"),
    (PreconditionFailed, "precondition_failed"),
    (AccessDenied, "access_denied"),
    (StoreUnavailable, "unavailable"),
    (InvalidStoreKey, "invalid_key"),
)


def outcome_of(exc: BaseException | None) -> str:
    """``success`` (None), or the error's kind: ``not_found``, ``precondition_failed``,
    ``access_denied``, ``unavailable``, ``invalid_key``, else ``error``."""
    if exc is None:
        return "success"
    for kind, name in _OUTCOMES:
        if isinstance(exc, kind):
            return name
    return "error"


class MeteredObjectStore:
    """Forwards every call to ``inner`` and records it (see the module docstring)."""

    def __init__(self, inner: ObjectStore, metrics: Metrics) -> None:
        self.inner = inner
        self.metrics = metrics
        self.backend = urlsplit(inner.url).scheme or "file"

    def _call(self, operation: str, fn: Callable[[], T]) -> T:
        started = time.perf_counter()
        try:
            result = fn()
        except BaseException as exc:
            self._record(operation, exc, started)
            raise
        self._record(operation, None, started)
        return result

    def _record(self, operation: str, exc: BaseException | None, started: float) -> None:
        seconds = time.perf_counter() - started
        self.metrics.record_store_request(self.backend, operation, outcome_of(exc), seconds)

    def __getattr__(self, name: str) -> object:
        # backend extras some callers look for (the local store's list_temporaries; GCS's and
        # Azure's one-request upload, whose put_parts is a request and recorded as one)
        extra = getattr(self.inner, name)
        if name == "put_parts" and callable(extra):
            put_parts = extra

            def metered_put_parts(
                key: str, parts: Sequence[Buffer], metadata: Mapping[str, str]
            ) -> None:
                self._call("put_parts", lambda: put_parts(key, parts, metadata))

            return metered_put_parts
        return extra

    @property
    def url(self) -> str:
        return self.inner.url

    @property
    def supports_conditional_put(self) -> bool:
        return self.inner.supports_conditional_put

    def create_multipart_upload(self, key: str, metadata: Mapping[str, str]) -> str:
        return self._call(
            "create_multipart_upload", lambda: self.inner.create_multipart_upload(key, metadata)
        )

    def upload_part(
        self, key: str, upload_id: str, part_number: int, data: Buffer, crc32c: int
    ) -> UploadedPart:
        return self._call(
            "upload_part",
            lambda: self.inner.upload_part(key, upload_id, part_number, data, crc32c),
        )

    def complete_multipart_upload(
        self, key: str, upload_id: str, parts: Sequence[UploadedPart]
    ) -> None:
        self._call(
            "complete_multipart_upload",
            lambda: self.inner.complete_multipart_upload(key, upload_id, parts),
        )

    def abort_multipart_upload(self, key: str, upload_id: str) -> None:
        self._call(
            "abort_multipart_upload", lambda: self.inner.abort_multipart_upload(key, upload_id)
        )

    def list_multipart_uploads(self, prefix: str = "") -> list[MultipartUploadInfo]:
        return self._call(
            "list_multipart_uploads", lambda: self.inner.list_multipart_uploads(prefix)
        )

    def put(
        self,
        key: str,
        data: Buffer,
        metadata: Mapping[str, str],
        *,
        if_none_match: bool = False,
    ) -> None:
        self._call("put", lambda: self.inner.put(key, data, metadata, if_none_match=if_none_match))

    def get(self, key: str) -> GetResult:
        return self._call("get", lambda: self.inner.get(key))

    def get_range(self, key: str, start: int, end: int) -> GetResult:
        return self._call("get_range", lambda: self.inner.get_range(key, start, end))

    def open_range(self, key: str, start: int, end: int) -> RangeReader:
        return self._call("open_range", lambda: self.inner.open_range(key, start, end))

    def head(self, key: str) -> ObjectInfo:
        return self._call("head", lambda: self.inner.head(key))

    def delete(self, key: str) -> None:
        self._call("delete", lambda: self.inner.delete(key))

    def list(self, prefix: str = "") -> Iterator[ObjectInfo]:
        """One ``list`` request per call (its pages included), timed while it pages; a caller
        that stops early ends it as a success."""
        busy, outcome = 0.0, "success"
        try:
            started = time.perf_counter()
            it = self.inner.list(prefix)
            while True:
                try:
                    info = next(it)
                except StopIteration:
                    break
                finally:
                    busy += time.perf_counter() - started
                yield info
                started = time.perf_counter()
        except GeneratorExit:
            raise
        except BaseException as exc:
            outcome = outcome_of(exc)
            raise
        finally:
            self.metrics.record_store_request(self.backend, "list", outcome, busy)

    def close(self) -> None:
        self.inner.close()
