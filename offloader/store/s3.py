"""S3ObjectStore: the ObjectStore on S3 (AWS, Ceph RGW, moto), the project's only boto3 user.

This module owns everything that touches boto3/botocore: building the client (standard AWS
configuration, explicit or ``AWS_ENDPOINT_URL`` endpoints with path-style addressing, timeouts and
bounded retries from :class:`~offloader.config.OffloadSettings`), sending CRC32C checksums
computed with the ``crc32c`` package (no ``awscrt``), and translating every botocore exception
into :mod:`offloader.errors`. Nothing from botocore escapes, and no message carries credentials.

Server quirks handled here (see ``ceph-rgw-notes.md`` and ``tooling-notes.md``):

- RGW returns an empty ETag from CompleteMultipartUpload: we never use it.
- RGW has no GetObjectAttributes: we never call it.
- RGW answers ``NoSuchKey`` (404) for operations on an aborted upload id; AWS says
  ``NoSuchUpload``. Both become :class:`UploadNotFound`.
- moto answers HTTP 500 to UploadPart/CompleteMultipartUpload on an aborted upload id: after a
  500 on those calls we ask ListParts whether the upload still exists.
"""

from __future__ import annotations

import base64
import builtins
import re
from collections.abc import Iterator, Mapping, Sequence
from types import TracebackType
from typing import Any, NoReturn

import crc32c as crc32c_lib
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
)

from offloader.config import OffloadSettings
from offloader.errors import (
    ConfigError,
    StoreError,
    UploadNotFound,
)
from offloader.logs import get_logger, redact
from offloader.store.base import (
    Buffer,
    GetResult,
    MultipartUploadInfo,
    ObjectInfo,
    RangeReader,
    UploadedPart,
)
from offloader.store.keycheck import check_key, key_prefix
from offloader.store.parts import check_part_number, ordered_parts
from offloader.store.ranges import Body, ResumingRangeReader
from offloader.store.s3_client import make_client, resolve_endpoint, retry_logger
from offloader.store.s3_errors import TRANSPORT_ERRORS, S3Body, error_code, http_status, translate

__all__ = ["S3ObjectStore", "crc32c_header"]


log = get_logger(__name__)

_CONTENT_RANGE = re.compile(r"^bytes (\d+)-(\d+)/(\d+|\*)$")
_BUCKET_NAME = re.compile(r"^[a-z0-9][a-z0-9.\-]{1,61}[a-z0-9]$")


def crc32c_header(crc: int) -> str:
    """The ``x-amz-checksum-crc32c`` value: base64 of the big-endian CRC32C."""
    return base64.b64encode((crc & 0xFFFFFFFF).to_bytes(4, "big")).decode("ascii")


def _body(data: Buffer) -> bytes | bytearray:
    """botocore accepts bytes and bytearray bodies; a memoryview is copied once."""
    if isinstance(data, bytes | bytearray):
        return data
    return bytes(data)


def _lower(metadata: Mapping[str, str] | None) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in (metadata or {}).items()}


class S3ObjectStore:
    """An :class:`~offloader.store.base.ObjectStore` on one bucket and key prefix.

    Keys are relative to ``prefix`` (``"a/b"`` in ``s3://bucket/a/b`` stores ``key`` as
    ``a/b/key``); listings return relative keys. Credentials come from the standard AWS chain
    (environment, profiles, instance roles) unless ``aws_access_key_id`` and
    ``aws_secret_access_key`` are given; they are never stored outside the boto3 client and
    never logged. ``page_size`` bounds ListObjectsV2 pages (tests use small pages).
    """

    def __init__(
        self,
        bucket: str,
        prefix: str = "",
        *,
        endpoint_url: str | None = None,
        region: str | None = None,
        settings: OffloadSettings | None = None,
        aws_access_key_id: str | None = None,
        aws_secret_access_key: str | None = None,
        aws_session_token: str | None = None,
        page_size: int = 1000,
    ) -> None:
        if not _BUCKET_NAME.match(bucket or ""):
            raise ConfigError(
                f"invalid S3 bucket name {bucket!r}: 3-63 characters of a-z, 0-9, '.', '-'",
                setting="store_url",
            )
        if not 1 <= page_size <= 1000:
            raise ConfigError(f"page_size {page_size} not in 1..1000")
        if (aws_access_key_id is None) != (aws_secret_access_key is None):
            raise ConfigError("give both aws_access_key_id and aws_secret_access_key, or neither")
        self._bucket = bucket
        self._prefix = key_prefix(prefix, "S3")
        self._page_size = page_size
        self._settings = settings or OffloadSettings()
        self._endpoint = resolve_endpoint(endpoint_url)
        self._client: Any = make_client(
            self._settings,
            self._endpoint,
            region,
            (aws_access_key_id, aws_secret_access_key, aws_session_token),
            shown=self.url,
        )
        self._client.meta.events.register(
            "needs-retry.s3", retry_logger(self.url, self._settings.max_attempts)
        )

    # --- properties -----------------------------------------------------------------------
    @property
    def url(self) -> str:
        return f"s3://{self._bucket}/{self._prefix}".rstrip("/")

    @property
    def bucket(self) -> str:
        return self._bucket

    @property
    def prefix(self) -> str:
        """The key prefix, ``""`` or ending with ``/``."""
        return self._prefix

    @property
    def endpoint_url(self) -> str | None:
        return self._endpoint

    @property
    def supports_conditional_put(self) -> bool:
        return True

    def __repr__(self) -> str:
        endpoint = f", endpoint={redact(self._endpoint)}" if self._endpoint else ""
        return f"S3ObjectStore({self.url}{endpoint})"

    # --- multipart ------------------------------------------------------------------------
    def create_multipart_upload(self, key: str, metadata: Mapping[str, str]) -> str:
        full = self._full(key)
        try:
            resp = self._client.create_multipart_upload(
                Bucket=self._bucket,
                Key=full,
                Metadata=_lower(metadata),
                ChecksumAlgorithm="CRC32C",
            )
        except (ClientError, BotoCoreError) as exc:
            self._raise("create_multipart_upload", key, exc)
        return str(resp["UploadId"])

    def upload_part(
        self, key: str, upload_id: str, part_number: int, data: Buffer, crc32c: int
    ) -> UploadedPart:
        check_part_number(part_number)
        full = self._full(key)
        try:
            resp = self._client.upload_part(
                Bucket=self._bucket,
                Key=full,
                UploadId=upload_id,
                PartNumber=part_number,
                Body=_body(data),
                ChecksumAlgorithm="CRC32C",
                ChecksumCRC32C=crc32c_header(crc32c),
            )
        except (ClientError, BotoCoreError) as exc:
            self._raise_upload("upload_part", key, upload_id, exc)
        return UploadedPart(part_number=part_number, etag=str(resp["ETag"]), crc32c=crc32c)

    def complete_multipart_upload(
        self, key: str, upload_id: str, parts: Sequence[UploadedPart]
    ) -> None:
        ordered = ordered_parts(parts, self._show(key))
        listed: builtins.list[dict[str, Any]] = []
        for p in ordered:
            entry: dict[str, Any] = {"PartNumber": p.part_number, "ETag": p.etag}
            if p.crc32c is not None:
                entry["ChecksumCRC32C"] = crc32c_header(p.crc32c)
            listed.append(entry)
        try:
            # The response's ETag is empty on RGW Pacific; nothing here depends on it.
            self._client.complete_multipart_upload(
                Bucket=self._bucket,
                Key=self._full(key),
                UploadId=upload_id,
                MultipartUpload={"Parts": listed},
            )
        except (ClientError, BotoCoreError) as exc:
            self._raise_upload("complete_multipart_upload", key, upload_id, exc)

    def abort_multipart_upload(self, key: str, upload_id: str) -> None:
        try:
            self._client.abort_multipart_upload(
                Bucket=self._bucket, Key=self._full(key), UploadId=upload_id
            )
        except (ClientError, BotoCoreError) as exc:
            try:
                self._raise_upload("abort_multipart_upload", key, upload_id, exc)
            except UploadNotFound:
                log.debug("abort of unknown upload", store=self.url, key=key)

    def list_multipart_uploads(self, prefix: str = "") -> builtins.list[MultipartUploadInfo]:
        uploads: builtins.list[MultipartUploadInfo] = []
        try:
            pages = self._client.get_paginator("list_multipart_uploads").paginate(
                Bucket=self._bucket,
                Prefix=self._prefix + prefix,
                PaginationConfig={"PageSize": self._page_size},
            )
            for page in pages:
                for u in page.get("Uploads", []):
                    uploads.append(
                        MultipartUploadInfo(
                            key=self._relative(u["Key"]),
                            upload_id=str(u["UploadId"]),
                            initiated=u.get("Initiated"),
                        )
                    )
        except (ClientError, BotoCoreError) as exc:
            self._raise("list_multipart_uploads", prefix, exc)
        # S3 lists by key, then initiation time; moto keeps creation order: sort like S3
        uploads.sort(key=lambda u: (u.key, u.initiated.timestamp() if u.initiated else 0.0))
        return uploads

    # --- whole objects --------------------------------------------------------------------
    def put(
        self,
        key: str,
        data: Buffer,
        metadata: Mapping[str, str],
        *,
        if_none_match: bool = False,
    ) -> None:
        body = _body(data)
        extra: dict[str, Any] = {"IfNoneMatch": "*"} if if_none_match else {}
        try:
            self._client.put_object(
                Bucket=self._bucket,
                Key=self._full(key),
                Body=body,
                Metadata=_lower(metadata),
                ChecksumAlgorithm="CRC32C",
                ChecksumCRC32C=crc32c_header(crc32c_lib.crc32c(body)),
                **extra,
            )
        except (ClientError, BotoCoreError) as exc:
            self._raise("put", key, exc)

    def get(self, key: str) -> GetResult:
        resp, data = self._get("get", key)
        return GetResult(data=data, size=len(data), metadata=_lower(resp.get("Metadata")))

    def get_range(self, key: str, start: int, end: int) -> GetResult:
        if start < 0 or end <= start:
            raise StoreError(f"get_range {self._show(key)}: invalid range [{start}, {end})")
        resp, data = self._get("get_range", key, Range=f"bytes={start}-{end - 1}")
        total = self._total_size(resp, len(data))
        if resp.get("ContentRange") is None:
            # The server ignored the Range header and sent the whole object.
            data = data[start:end]
        return GetResult(data=data, size=total, metadata=_lower(resp.get("Metadata")))

    def open_range(self, key: str, start: int, end: int) -> RangeReader:
        if start < 0 or end <= start:
            raise StoreError(f"open_range {self._show(key)}: invalid range [{start}, {end})")
        full = self._full(key)
        etags: list[str] = []
        metadata: list[dict[str, str]] = []

        def opener(offset: int) -> tuple[Body, int]:
            # a reopened range must come from the same object: If-Match its first ETag
            pin = {"IfMatch": etags[0]} if etags else {}
            try:
                resp = self._client.get_object(
                    Bucket=self._bucket, Key=full, Range=f"bytes={offset}-{end - 1}", **pin
                )
            except (ClientError, BotoCoreError) as exc:
                self._raise("open_range", key, exc)
            if not etags and resp.get("ETag"):
                etags.append(str(resp["ETag"]))
            if not metadata:
                metadata.append(_lower(resp.get("Metadata")))
            size = self._total_size(resp, int(resp.get("ContentLength") or 0))
            # a server that ignored the Range header sends the whole object: skip to offset
            skip = offset if resp.get("ContentRange") is None else 0
            return S3Body(resp["Body"], f"open_range {self._show(key)}", skip), size

        return ResumingRangeReader(
            opener,
            start,
            end,
            attempts=self._settings.max_attempts,
            what=self._show(key),
            metadata=lambda: metadata[0] if metadata else {},
        )

    def head(self, key: str) -> ObjectInfo:
        try:
            resp = self._client.head_object(Bucket=self._bucket, Key=self._full(key))
        except (ClientError, BotoCoreError) as exc:
            self._raise("head", key, exc)
        return ObjectInfo(
            key=key,
            size=int(resp["ContentLength"]),
            metadata=_lower(resp.get("Metadata")),
            last_modified=resp.get("LastModified"),
            etag=resp.get("ETag"),
        )

    def delete(self, key: str) -> None:
        try:
            self._client.delete_object(Bucket=self._bucket, Key=self._full(key))
        except ClientError as exc:
            if error_code(exc) in ("NoSuchKey", "404"):
                return
            self._raise("delete", key, exc)
        except BotoCoreError as exc:
            self._raise("delete", key, exc)

    def list(self, prefix: str = "") -> Iterator[ObjectInfo]:
        try:
            pages = self._client.get_paginator("list_objects_v2").paginate(
                Bucket=self._bucket,
                Prefix=self._prefix + prefix,
                PaginationConfig={"PageSize": self._page_size},
            )
            for page in pages:
                for obj in page.get("Contents", []):
                    yield ObjectInfo(
                        key=self._relative(obj["Key"]),
                        size=int(obj["Size"]),
                        last_modified=obj.get("LastModified"),
                        etag=obj.get("ETag"),
                    )
        except (ClientError, BotoCoreError) as exc:
            self._raise("list", prefix, exc)

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> S3ObjectStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # --- helpers --------------------------------------------------------------------------
    def _full(self, key: str) -> str:
        return self._prefix + check_key(key)

    def _relative(self, full_key: str) -> str:
        return full_key[len(self._prefix) :] if full_key.startswith(self._prefix) else full_key

    def _show(self, key: str) -> str:
        return f"s3://{self._bucket}/{self._prefix}{key}"

    def _get(self, op: str, key: str, **extra: Any) -> tuple[dict[str, Any], bytes]:
        """GET and read the body. The request itself is retried by botocore; a body cut short
        while streaming is retried here (the same bounded number of attempts)."""
        full = self._full(key)
        attempts = self._settings.max_attempts
        for attempt in range(1, attempts + 1):
            try:
                resp: dict[str, Any] = self._client.get_object(
                    Bucket=self._bucket, Key=full, **extra
                )
            except (ClientError, BotoCoreError) as exc:
                self._raise(op, key, exc)
            try:
                with resp["Body"] as body:
                    data: bytes = body.read()
                return resp, data
            except TRANSPORT_ERRORS as exc:
                if attempt >= attempts:
                    self._raise(op, key, exc)
                log.debug(
                    "s3 body read failed, retrying",
                    store=self.url,
                    key=key,
                    attempt=attempt,
                    error=type(exc).__name__,
                )
        raise AssertionError("unreachable")  # pragma: no cover

    def _total_size(self, resp: Mapping[str, Any], received: int) -> int:
        content_range = resp.get("ContentRange")
        if content_range is None:
            return received
        m = _CONTENT_RANGE.match(str(content_range))
        if m is None or m.group(3) == "*":
            raise StoreError(f"unparseable Content-Range {content_range!r} from {self.url}")
        return int(m.group(3))

    def _upload_exists(self, key: str, upload_id: str) -> bool | None:
        """Whether the upload exists (ListParts), or None when that cannot be told."""
        try:
            self._client.list_parts(
                Bucket=self._bucket, Key=self._full(key), UploadId=upload_id, MaxParts=1
            )
        except ClientError as exc:
            if error_code(exc) in ("NoSuchUpload", "NoSuchKey") or http_status(exc) == 404:
                return False
            return None
        except BotoCoreError:
            return None
        return True

    def _raise_upload(
        self, op: str, key: str, upload_id: str, exc: ClientError | BotoCoreError
    ) -> NoReturn:
        """Like :meth:`_raise`, for calls that name an upload id."""
        if (
            isinstance(exc, ClientError)
            and http_status(exc) == 500
            and self._upload_exists(key, upload_id) is False
        ):
            raise UploadNotFound(
                f"{op} {self._show(key)}: upload {upload_id[:16]}... does not exist"
            ) from exc
        self._raise(op, key, exc)

    def _raise(self, op: str, key: str, exc: ClientError | BotoCoreError) -> NoReturn:
        """Translate a botocore exception into the project's error tree (and raise it)."""
        raise translate(op, self._show(key), self._bucket, exc) from exc
