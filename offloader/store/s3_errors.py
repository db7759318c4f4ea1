"""Translating botocore's exceptions into the project's error tree (the S3 store's edge).

Owned by :mod:`offloader.store.s3`; the only other module that imports botocore. Messages name
the operation and the object only: server messages are kept, request parameters and
credentials never are.
"""

from __future__ import annotations

import contextlib
import http.client
from typing import Any

from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    HTTPClientError,
    IncompleteReadError,
    NoCredentialsError,
    PartialCredentialsError,
)
from botocore.exceptions import ConnectionError as BotoConnectionError

from offloader.errors import (
    AccessDenied,
    ObjectNotFound,
    PreconditionFailed,
    StoreError,
    StoreUnavailable,
    UploadNotFound,
)

__all__ = ["TRANSPORT_ERRORS", "S3Body", "error_code", "http_status", "translate"]

_ACCESS_DENIED_CODES = frozenset(
    {
        "AccessDenied",
        "InvalidAccessKeyId",
        "SignatureDoesNotMatch",
        "InvalidToken",
        "ExpiredToken",
        "TokenRefreshRequired",
        "AllAccessDisabled",
        "AccountProblem",
    }
)
_UNAVAILABLE_CODES = frozenset(
    {"SlowDown", "ServiceUnavailable", "RequestTimeout", "RequestTimeTooSkewed"}
)
#: failures of the connection or of a response in flight (never a server's answer)
TRANSPORT_ERRORS = (BotoConnectionError, HTTPClientError, IncompleteReadError)
_UPLOAD_OPS = frozenset(
    {"upload_part", "complete_multipart_upload", "list_parts", "abort_multipart_upload"}
)


class S3Body:
    """A GetObject body whose transport failures are ``StoreUnavailable`` (resumable).

    :meth:`readinto` reads the socket straight into the caller's buffer when it can: botocore's
    ``StreamingBody.readinto`` (through urllib3's) reads into new bytes and copies them, one
    copy of every byte more than the kernel's. When the body is plain (no content coding, not
    chunked, nothing buffered by urllib3), the bytes go from ``http.client``'s ``readinto`` to
    the buffer and both wrappers' byte counts are kept, so their length checks and the
    connection's return to the pool at the end work as with ``read``; otherwise ``readinto``
    is ``read`` plus a copy."""

    def __init__(self, body: Any, where: str, skip: int) -> None:
        self._body = body
        self._where = where
        self._skip = skip
        #: reads that went straight from the socket into the caller's buffer (tests, benches)
        self.direct_reads = 0

    def read(self, n: int) -> bytes:
        try:
            self._skip_ahead()
            data: bytes = self._body.read(n)
        except TRANSPORT_ERRORS as exc:
            raise StoreUnavailable(
                f"{self._where}: body read failed ({type(exc).__name__})"
            ) from exc
        return data

    def readinto(self, view: memoryview) -> int:
        """Up to ``len(view)`` bytes into ``view``; 0 at the end of the body."""
        try:
            self._skip_ahead()
            raw = _plain_http_response(self._body)
            if raw is None:
                data: bytes = self._body.read(len(view))
                view[: len(data)] = data
                return len(data)
            stream, response = raw
            n = int(response.readinto(view))
        except TRANSPORT_ERRORS as exc:
            raise StoreUnavailable(
                f"{self._where}: body read failed ({type(exc).__name__})"
            ) from exc
        except (OSError, http.client.HTTPException) as exc:  # the socket's own, unwrapped
            raise StoreUnavailable(
                f"{self._where}: body read failed ({type(exc).__name__})"
            ) from exc
        self.direct_reads += 1
        # the wrappers' byte counts, as if they had read these bytes themselves
        self._body._amount_read += n
        stream._fp_bytes_read += n
        if stream.length_remaining is not None:
            stream.length_remaining -= n
        if response.isclosed():  # the whole body read: the connection goes back to the pool
            stream.release_conn()
        return n

    def _skip_ahead(self) -> None:
        while self._skip:
            dropped = len(self._body.read(min(self._skip, 1 << 20)))
            if not dropped:
                return
            self._skip -= dropped

    def close(self) -> None:
        with contextlib.suppress(BotoCoreError, OSError):
            self._body.close()


def _plain_http_response(body: Any) -> tuple[Any, http.client.HTTPResponse] | None:
    """``(urllib3 response, http.client response)`` under a botocore ``StreamingBody`` whose
    bytes can be read straight from ``http.client`` (no content coding, no chunked transfer,
    nothing urllib3 holds already); None otherwise (then reads go through the wrappers)."""
    stream = getattr(body, "_raw_stream", None)
    response = getattr(stream, "_fp", None)
    if not isinstance(response, http.client.HTTPResponse) or response.chunked:
        return None
    if not hasattr(body, "_amount_read") or not hasattr(stream, "_fp_bytes_read"):
        return None
    headers = getattr(stream, "headers", None)
    if headers is None or headers.get("content-encoding"):
        return None
    buffered = getattr(stream, "_decoded_buffer", None)
    if buffered is None or len(buffered) or getattr(stream, "_decoder", None) is not None:
        return None
    if not hasattr(stream, "length_remaining") or not hasattr(stream, "release_conn"):
        return None
    return stream, response


def error_code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def http_status(exc: ClientError) -> int:
    return int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)


def translate(op: str, where: str, bucket: str, exc: ClientError | BotoCoreError) -> StoreError:
    """The error-tree exception for ``exc``; its message names the operation and object only
    (server messages are included, never request parameters or credentials)."""
    if isinstance(exc, NoCredentialsError | PartialCredentialsError):
        return AccessDenied(f"{op} {where}: no usable AWS credentials found")
    if isinstance(exc, TRANSPORT_ERRORS):
        return StoreUnavailable(f"{op} {where}: store unreachable ({type(exc).__name__})")
    if isinstance(exc, BotoCoreError):
        return StoreError(f"{op} {where}: {type(exc).__name__}")
    code, status = error_code(exc), http_status(exc)
    message = str(exc.response.get("Error", {}).get("Message", "")).strip()
    detail = f"{code or status}" + (f": {message}" if message and message != code else "")
    text = f"{op} {where}: {detail}"
    if code == "NoSuchUpload" or (op in _UPLOAD_OPS and code == "NoSuchKey"):
        return UploadNotFound(text)
    if code == "NoSuchBucket":
        return ObjectNotFound(f"{op} {where}: bucket {bucket!r} does not exist")
    if op in _UPLOAD_OPS and status == 404:
        return UploadNotFound(text)
    if code in ("NoSuchKey", "NotFound", "404") or status == 404:
        return ObjectNotFound(f"{op} {where}: no such object")
    if code == "PreconditionFailed" or status == 412:
        return PreconditionFailed(text)
    if code in _ACCESS_DENIED_CODES or status == 403:
        return AccessDenied(text)
    if code in _UNAVAILABLE_CODES or status == 503:
        return StoreUnavailable(text)
    return StoreError(text)
