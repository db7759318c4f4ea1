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
    """A GetObject body whose transport failures are ``StoreUnavailable`` (resumable)."""

    def __init__(self, body: Any, where: str, skip: int) -> None:
        self._body = body
        self._where = where
        self._skip = skip

    def read(self, n: int) -> bytes:
        try:
            while self._skip:
                dropped = len(self._body.read(min(self._skip, 1 << 20)))
                if not dropped:
                    return b""
                self._skip -= dropped
            data: bytes = self._body.read(n)
        except TRANSPORT_ERRORS as exc:
            raise StoreUnavailable(
                f"{self._where}: body read failed ({type(exc).__name__})"
            ) from exc
        return data

    def readinto(self, buf: memoryview) -> int:
        """Read up to ``len(buf)`` bytes straight into ``buf``; 0 at the body's end.

        The bytes go from the socket into ``buf`` with no copy on the way: through the
        ``http.client`` response under botocore's and urllib3's wrappers (whose own
        ``readinto`` reads into a new buffer and copies it), when the body is one with no
        content decoding, else through :meth:`read` and one copy. Reading this way skips
        urllib3's accounting, so the connection is closed with the body, not pooled (one
        connection per streamed range); the caller counts the bytes against the range."""
        fp = self._direct_fp()
        if fp is None:
            data = self.read(len(buf))
            buf[: len(data)] = data
            return len(data)
        try:
            n: int = fp.readinto(buf)
        except (*TRANSPORT_ERRORS, OSError, http.client.HTTPException) as exc:
            raise StoreUnavailable(
                f"{self._where}: body read failed ({type(exc).__name__})"
            ) from exc
        return n

    def _direct_fp(self) -> Any:
        """The ``http.client`` response under the body, when reading it directly returns
        exactly the bytes :meth:`read` would (nothing to skip, nothing buffered above it,
        no decoder); else None."""
        if self._skip:
            return None
        raw = getattr(self._body, "_raw_stream", None)
        fp = getattr(raw, "_fp", None)
        if not isinstance(fp, http.client.HTTPResponse):
            return None
        if getattr(raw, "_decoder", None) is not None or getattr(raw, "decode_content", True):
            return None
        pending = getattr(raw, "_decoded_buffer", None)
        if pending is not None and len(pending):
            return None
        return fp

    def close(self) -> None:
        with contextlib.suppress(BotoCoreError, OSError):
            self._body.close()


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
