"""GCSObjectStore: the ObjectStore on Google Cloud Storage (``gs://bucket/prefix``), the project's
only user of ``google-cloud-storage``.

**Library.** The official SDK, chosen by measurement and by what the contract needs. On
fake-gcs-server here, 32 MiB objects: the SDK uploads at 33 MB/s and downloads at 80 MB/s;
``obstore`` (one Rust client for S3, GCS and Azure) did not get past its credential loading on
the emulator without a service-account file, and more to the point its API has no compose, no
listing of unfinished uploads and no user-chosen part objects, so abandoned uploads could not
be found by gc. The SDK gives all of that and the generation preconditions.

**One request first.** The store says ``prefers_one_request_upload``: the offload writer then
sends a data object of at most ``one_request_upload_max`` bytes (64 MiB) in one request
(:class:`~offloader.offload.writer.OneRequestUpload`, :meth:`GCSObjectStore.put_parts`): a
resumable session opened by the SDK (``create_resumable_upload_session``, with the metadata and
the object's CRC32C, which GCS checks) and one PUT of the session whose body is the framed
blocks one after the other, never joined. That is what ``upload_from_string`` itself does for
more than 8 MiB, minus a joined copy of the object; parts would cost a part object per block, a
marker, a compose (a server-side copy of the whole object) and a delete per part. It is atomic:
a session that did not get every byte leaves no object. Measured on fake-gcs-server (32 MiB, 8
MiB blocks, ``python -m bench clouds`` three times,
bench/results/2026-11-28-clouds-one-request.json): 0.71-2.83 of ``upload_from_string`` of the
same bytes (median above 1), where parts composed were 0.52-1.33 and a joined ``put`` 0.58-1.06
(the join was most of the offload's own time: client CPU 0.04 s, now 0.02 s per 32 MiB). The
SDK's chunked resumable upload (8 or 16 MiB chunks, which could send blocks as they are framed)
was measured too: slower on the emulator (0.75-1.1 s vs 0.5 s for 32 MiB).

**Multipart by composing parts** (larger objects; not the XML API's multipart upload): each part
is a temporary object ``.uploads/p/<upload id>/<n>`` (see :mod:`offloader.store.staged`), and
completion is one ``compose`` (a tree of composes past GCS's 32 sources per call) into the
target with the upload's metadata, then the parts are deleted. Why not the XML API's multipart
upload: the SDK exposes it only through ``transfer_manager`` (a whole local file, not parts
handed over one by one) with the part-level calls private, it has no call that lists unfinished
XML uploads, and fake-gcs-server does not serve it (``POST /bucket/key?uploads`` answers 404
here); composition is public JSON-API surface, served by the emulator as by GCS. The upload's
marker object makes it listable (``list_multipart_uploads``) so orphans and gc find uploads a
crash abandoned.

**Preconditions.** ``if_none_match`` is ``ifGenerationMatch=0``; a streamed range that is
reopened after a dropped connection pins the first answer's generation (``ifGenerationMatch``),
as S3 pins the ETag with ``If-Match``. **Reads** are one media GET each (``alt=media`` with a
``Range`` header) through the SDK's own authorized session: the user metadata comes back in its
``x-goog-meta-*`` headers, so a random read costs one request.

**Configuration** is the SDK's: ``STORAGE_EMULATOR_HOST`` (the emulator, anonymous
credentials), else Application Default Credentials; ``GOOGLE_CLOUD_PROJECT`` names the project.
Every SDK, google-auth and requests exception is translated here into :mod:`offloader.errors`,
each message naming the ``gs://`` URL.
"""

from __future__ import annotations

import base64
import builtins
import os
import re
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, NoReturn, TypeVar
from urllib.parse import quote

import crc32c as crc32c_lib
import requests
import urllib3
from google.api_core import exceptions as gexc
from google.auth import exceptions as auth_exc
from google.cloud import storage  # type: ignore[attr-defined,import-untyped]

from offloader.config import OffloadSettings
from offloader.errors import (
    AccessDenied,
    ConfigError,
    ObjectNotFound,
    PreconditionFailed,
    StoreError,
    StoreUnavailable,
    UploadNotFound,
)
from offloader.logs import get_logger
from offloader.store import staged
from offloader.store.base import (
    Buffer,
    GetResult,
    MultipartUploadInfo,
    ObjectInfo,
    RangeReader,
    UploadedPart,
)
from offloader.store.keycheck import key_prefix
from offloader.store.parts import PartsBody, check_part_number, ordered_parts
from offloader.store.ranges import Body, ResumingRangeReader

__all__ = ["GCSObjectStore"]

log = get_logger(__name__)

T = TypeVar("T")

_BUCKET_NAME = re.compile(r"^[a-z0-9][a-z0-9._\-]{1,220}[a-z0-9]$")
_CONTENT_RANGE = re.compile(r"^bytes (\d+)-(\d+)/(\d+)$")
#: GCS composes at most 32 sources per call
_COMPOSE_MAX = 32
#: parts deleted at once when an upload ends (each part is one DELETE)
_DELETE_CONCURRENCY = 8
_TRANSIENT = (
    requests.ConnectionError,
    requests.Timeout,
    auth_exc.TransportError,
    gexc.ServiceUnavailable,
    gexc.InternalServerError,
    gexc.BadGateway,
    gexc.GatewayTimeout,
    gexc.TooManyRequests,
)


def _crc_b64(crc: int) -> str:
    return base64.b64encode((crc & 0xFFFFFFFF).to_bytes(4, "big")).decode("ascii")


def _lower(metadata: Mapping[str, str] | None) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in (metadata or {}).items()}


def _bytes(data: Buffer) -> bytes:
    return data if isinstance(data, bytes) else bytes(data)


class _MediaBody:
    """A streamed media GET whose transport failures are ``StoreUnavailable`` (resumable)."""

    def __init__(self, response: requests.Response, where: str) -> None:
        self._response = response
        self._raw = response.raw
        self._where = where

    def read(self, n: int) -> bytes:
        try:
            data: bytes = self._raw.read(n)
        except (
            requests.RequestException,
            urllib3.exceptions.HTTPError,
            OSError,
            ValueError,
        ) as exc:
            raise StoreUnavailable(
                f"{self._where}: body read failed ({type(exc).__name__})"
            ) from exc
        return data

    def close(self) -> None:
        self._response.close()


class GCSObjectStore:
    """An :class:`~offloader.store.base.ObjectStore` on one GCS bucket and key prefix.

    ``endpoint`` overrides ``STORAGE_EMULATOR_HOST`` (tests); ``page_size`` bounds listing
    pages (tests use small pages so every listing paginates).
    """

    def __init__(
        self,
        bucket: str,
        prefix: str = "",
        *,
        endpoint: str | None = None,
        project: str | None = None,
        settings: OffloadSettings | None = None,
        page_size: int = 1000,
    ) -> None:
        if not _BUCKET_NAME.match(bucket or ""):
            raise ConfigError(
                f"invalid GCS bucket name {bucket!r}: 3-222 characters of a-z, 0-9, '.', '_', '-'",
                setting="store_url",
            )
        self._bucket_name = bucket
        self._prefix = key_prefix(prefix, "GCS")
        self._page_size = page_size
        self._settings = settings or OffloadSettings()
        self._timeout = (self._settings.connect_timeout, self._settings.read_timeout)
        try:
            if endpoint:
                from google.auth.credentials import AnonymousCredentials

                self._client = storage.Client(
                    project=project or "offloader",
                    credentials=AnonymousCredentials(),  # type: ignore[no-untyped-call]
                    client_options={"api_endpoint": endpoint},
                )
            else:
                self._client = storage.Client(project=project)
        except auth_exc.GoogleAuthError as exc:
            given = os.environ.get("GOOGLE_APPLICATION_CREDENTIALS")
            hint = (
                f"GOOGLE_APPLICATION_CREDENTIALS ({given}) is not a usable key file"
                if given
                else "set GOOGLE_APPLICATION_CREDENTIALS or STORAGE_EMULATOR_HOST"
            )
            raise AccessDenied(
                f"{self.url}: no usable Google credentials ({type(exc).__name__}); {hint}"
            ) from None
        self._bucket = self._client.bucket(bucket)
        self._api_base = str(self._client._connection.API_BASE_URL).rstrip("/")
        #: uploads this instance started or checked and has not ended: their parts skip the
        #: marker check (a request per block); completion always checks the marker
        self._live: set[str] = set()

    # --- properties -----------------------------------------------------------------------
    @property
    def url(self) -> str:
        return f"gs://{self._bucket_name}/{self._prefix}".rstrip("/")

    @property
    def bucket(self) -> str:
        return self._bucket_name

    @property
    def prefix(self) -> str:
        return self._prefix

    @property
    def endpoint_url(self) -> str:
        return self._api_base

    @property
    def supports_conditional_put(self) -> bool:
        return True

    @property
    def prefers_one_request_upload(self) -> bool:
        """One upload beats parts composed then deleted (module docstring)."""
        return True

    def __repr__(self) -> str:
        return f"GCSObjectStore({self.url}, endpoint={self._api_base})"

    # --- multipart ------------------------------------------------------------------------
    def create_multipart_upload(self, key: str, metadata: Mapping[str, str]) -> str:
        staged.check_user_key(key)
        upload_id = staged.new_upload_id()
        marker = self._blob(self._prefix + staged.marker_name(key, upload_id))
        marker.metadata = _lower(metadata)
        self._call(
            "create_multipart_upload",
            key,
            lambda: marker.upload_from_string(
                b"", if_generation_match=0, timeout=self._timeout, retry=None
            ),
        )
        self._live.add(upload_id)
        return upload_id

    def upload_part(
        self, key: str, upload_id: str, part_number: int, data: Buffer, crc32c: int
    ) -> UploadedPart:
        check_part_number(part_number)
        if upload_id not in self._live:
            self._marker(key, upload_id, "upload_part")
            self._live.add(upload_id)
        part = self._blob(self._prefix + staged.part_name(upload_id, part_number))
        part.crc32c = _crc_b64(crc32c)
        body = _bytes(data)
        self._call(
            "upload_part",
            key,
            lambda: part.upload_from_string(body, timeout=self._timeout, retry=None),
        )
        return UploadedPart(part_number=part_number, etag=str(part.generation), crc32c=crc32c)

    def complete_multipart_upload(
        self, key: str, upload_id: str, parts: Sequence[UploadedPart]
    ) -> None:
        ordered = ordered_parts(parts, self._show(key))
        marker = self._marker(key, upload_id, "complete_multipart_upload")
        stored = {
            info.key: info.etag
            for info in self._list_raw(staged.part_prefix(upload_id), "complete_multipart_upload")
        }
        for p in ordered:
            name = self._prefix + staged.part_name(upload_id, p.part_number)
            if stored.get(name) != p.etag:
                raise StoreError(
                    f"complete {self._show(key)}: InvalidPart: part {p.part_number} "
                    "was not uploaded with that etag"
                )
        sources = [
            self._blob(
                self._prefix + staged.part_name(upload_id, p.part_number), generation=int(p.etag)
            )
            for p in ordered
        ]
        level = 0
        while len(sources) > _COMPOSE_MAX:  # a tree of composes: 32 sources per call
            merged = []
            for i in range(0, len(sources), _COMPOSE_MAX):
                inter = self._blob(f"{self._prefix}{staged.part_prefix(upload_id)}c{level}-{i:05d}")
                group = sources[i : i + _COMPOSE_MAX]
                self._call(
                    "complete_multipart_upload",
                    key,
                    lambda inter=inter, group=group: inter.compose(  # type: ignore[misc]
                        group, timeout=self._timeout, retry=None
                    ),
                )
                merged.append(inter)
            sources, level = merged, level + 1
        target = self._blob(self._prefix + key)
        target.metadata = dict(marker.metadata or {})
        self._call(
            "complete_multipart_upload",
            key,
            lambda: target.compose(sources, timeout=self._timeout, retry=None),
        )
        self._drop_upload(key, upload_id)

    def abort_multipart_upload(self, key: str, upload_id: str) -> None:
        if not staged.could_be_ours(key, upload_id):
            return
        self._drop_upload(key, upload_id)

    def list_multipart_uploads(self, prefix: str = "") -> builtins.list[MultipartUploadInfo]:
        listed = self._list_raw(staged.marker_prefix(prefix), "list_multipart_uploads")
        return staged.uploads_from_markers(
            (info.key[len(self._prefix) :], info.last_modified) for info in listed
        )

    # --- whole objects --------------------------------------------------------------------
    def put(
        self,
        key: str,
        data: Buffer,
        metadata: Mapping[str, str],
        *,
        if_none_match: bool = False,
    ) -> None:
        staged.check_user_key(key)
        body = _bytes(data)
        blob = self._blob(self._prefix + key)
        blob.metadata = _lower(metadata)
        blob.crc32c = _crc_b64(crc32c_lib.crc32c(body))
        condition = 0 if if_none_match else None
        self._call(
            "put",
            key,
            lambda: blob.upload_from_string(
                body, if_generation_match=condition, timeout=self._timeout, retry=None
            ),
        )

    def put_parts(self, key: str, parts: Sequence[Buffer], metadata: Mapping[str, str]) -> None:
        """The whole object, the concatenation of ``parts``, in one request and without joining
        them: a resumable session of the object's size (the SDK's call; metadata and CRC32C in
        it, so GCS checks the bytes), then one PUT of the session streaming the parts."""
        staged.check_user_key(key)
        body = PartsBody(parts)
        total = len(body)
        crc = 0
        for view in body.views:
            crc = crc32c_lib.crc32c(view, crc)
        blob = self._blob(self._prefix + key)
        blob.metadata = _lower(metadata)
        blob.crc32c = _crc_b64(crc)

        def send() -> None:
            url = blob.create_resumable_upload_session(
                size=total, checksum=None, timeout=self._timeout, retry=None
            )
            response: requests.Response = self._client._http.put(
                url,
                data=body,
                headers={"Content-Length": str(total)},
                timeout=self._timeout,
            )
            if response.status_code >= 300:
                raise gexc.from_http_status(  # type: ignore[no-untyped-call]
                    response.status_code, response.text[:300] or response.reason
                )

        self._call("put", key, send)

    def get(self, key: str) -> GetResult:
        response = self._media("get", key, None, None, stream=False)
        data = response.content
        return GetResult(data=data, size=len(data), metadata=self._meta(response))

    def get_range(self, key: str, start: int, end: int) -> GetResult:
        if start < 0 or end <= start:
            raise StoreError(f"get_range {self._show(key)}: invalid range [{start}, {end})")
        response = self._media("get_range", key, (start, end), None, stream=False)
        data = response.content
        size = self._total_size(response, len(data))
        if response.status_code == 200:  # the whole object came back
            data = data[start:end]
        return GetResult(data=data, size=size, metadata=self._meta(response))

    def open_range(self, key: str, start: int, end: int) -> RangeReader:
        if start < 0 or end <= start:
            raise StoreError(f"open_range {self._show(key)}: invalid range [{start}, {end})")
        generation: list[str] = []
        metadata: list[dict[str, str]] = []

        def opener(offset: int) -> tuple[Body, int]:
            pin = generation[0] if generation else None
            response = self._media("open_range", key, (offset, end), pin, stream=True)
            answered = response.headers.get("x-goog-generation")
            if pin is not None and answered and answered != pin:
                # GCS answers 412 to ifGenerationMatch; a server that ignores it is caught here
                response.close()
                raise PreconditionFailed(
                    f"open_range {self._show(key)}: the object was replaced while being read "
                    f"(generation {pin}, now {answered})"
                )
            if not generation and answered:
                generation.append(answered)
            if not metadata:
                metadata.append(self._meta(response))
            size = self._total_size(response, int(response.headers.get("content-length", 0)))
            body = _MediaBody(response, f"open_range {self._show(key)}")
            if response.status_code == 200 and offset:
                body.read(offset)  # a server that ignored Range: skip to the offset
            return body, size

        return ResumingRangeReader(
            opener,
            start,
            end,
            attempts=self._settings.max_attempts,
            what=self._show(key),
            metadata=lambda: metadata[0] if metadata else {},
        )

    def head(self, key: str) -> ObjectInfo:
        staged.check_user_key(key)
        blob = self._call(
            "head",
            key,
            lambda: self._bucket.get_blob(self._prefix + key, timeout=self._timeout, retry=None),
        )
        if blob is None:
            raise ObjectNotFound(f"head {self._show(key)}: no such object")
        return ObjectInfo(
            key=key,
            size=int(blob.size or 0),
            metadata=_lower(blob.metadata),
            last_modified=blob.updated,
            etag=blob.etag,
        )

    def delete(self, key: str) -> None:
        staged.check_user_key(key)
        self._delete_raw(self._prefix + key, "delete", key)

    def list(self, prefix: str = "") -> Iterator[ObjectInfo]:
        for info in self._list_raw(prefix, "list"):
            relative = info.key[len(self._prefix) :]
            if not staged.is_reserved(relative):
                yield ObjectInfo(relative, info.size, {}, info.last_modified, info.etag)

    def close(self) -> None:
        self._client.close()  # type: ignore[no-untyped-call]

    # --- helpers --------------------------------------------------------------------------
    def _blob(self, name: str, generation: int | None = None) -> Any:
        return self._bucket.blob(name, generation=generation)

    def _show(self, key: str) -> str:
        return f"gs://{self._bucket_name}/{self._prefix}{key}"

    def _marker(self, key: str, upload_id: str, op: str) -> Any:
        """The upload's marker blob (its metadata loaded), or ``UploadNotFound``."""
        staged.check_user_key(key)
        if not staged.valid_upload_id(upload_id):
            raise UploadNotFound(f"{op} {self._show(key)}: no upload {upload_id[:40]!r}")
        name = self._prefix + staged.marker_name(key, upload_id)
        blob = self._call(
            op, key, lambda: self._bucket.get_blob(name, timeout=self._timeout, retry=None)
        )
        if blob is None:
            raise UploadNotFound(
                f"{op} {self._show(key)}: upload {upload_id[:16]}... does not exist"
            )
        return blob

    def _drop_upload(self, key: str, upload_id: str) -> None:
        """Delete the upload's parts (a few at a time: each is a request) then its marker."""
        self._live.discard(upload_id)
        names = [
            info.key
            for info in self._list_raw(staged.part_prefix(upload_id), "abort_multipart_upload")
        ]
        if len(names) > 1:
            with ThreadPoolExecutor(min(_DELETE_CONCURRENCY, len(names))) as pool:
                list(pool.map(lambda n: self._delete_raw(n, "abort_multipart_upload", key), names))
        else:
            for name in names:
                self._delete_raw(name, "abort_multipart_upload", key)
        self._delete_raw(
            self._prefix + staged.marker_name(key, upload_id), "abort_multipart_upload", key
        )

    def _delete_raw(self, name: str, op: str, key: str) -> None:
        def delete() -> None:
            try:
                self._bucket.delete_blob(name, timeout=self._timeout, retry=None)
            except gexc.NotFound as exc:
                if "bucket" in str(exc).lower():
                    raise

        self._call(op, key, delete)

    def _list_raw(self, prefix: str, op: str) -> Iterator[ObjectInfo]:
        """Objects under the store prefix + ``prefix``, full names, in name order."""

        def page_iter() -> Iterator[ObjectInfo]:
            blobs = self._client.list_blobs(
                self._bucket,
                prefix=self._prefix + prefix,
                page_size=self._page_size,
                timeout=self._timeout,
                retry=None,
            )
            for blob in blobs:
                yield ObjectInfo(
                    key=blob.name,
                    size=int(blob.size or 0),
                    last_modified=blob.time_created or blob.updated,
                    etag=str(blob.generation),
                )

        it = page_iter()
        while True:
            try:
                info = next(it)
            except StopIteration:
                return
            except Exception as exc:  # translated: SDK errors never escape
                self._raise(op, prefix, exc)
            yield info

    def _media(
        self,
        op: str,
        key: str,
        span: tuple[int, int] | None,
        generation: str | None,
        *,
        stream: bool,
    ) -> requests.Response:
        """One media GET (``alt=media``), optionally ranged and pinned to a generation."""
        staged.check_user_key(key)
        name = quote(self._prefix + key, safe="")
        url = f"{self._api_base}/download/storage/v1/b/{self._bucket_name}/o/{name}?alt=media"
        if generation is not None:
            url += f"&ifGenerationMatch={generation}"
        headers = {"Accept-Encoding": "identity"}
        if span is not None:
            headers["Range"] = f"bytes={span[0]}-{span[1] - 1}"

        def send() -> requests.Response:
            response: requests.Response = self._client._http.get(
                url, headers=headers, stream=stream, timeout=self._timeout
            )
            if response.status_code < 300:
                return response
            text = response.text[:300] if not stream else ""
            response.close()
            if response.status_code == 416:
                raise StoreError(f"{op} {self._show(key)}: range not satisfiable {span}")
            raise gexc.from_http_status(  # type: ignore[no-untyped-call]
                response.status_code, text or response.reason
            )

        return self._call(op, key, send)

    def _meta(self, response: requests.Response) -> dict[str, str]:
        return {
            name[len("x-goog-meta-") :].lower(): value
            for name, value in response.headers.items()
            if name.lower().startswith("x-goog-meta-")
        }

    def _total_size(self, response: requests.Response, received: int) -> int:
        content_range = response.headers.get("content-range")
        if response.status_code != 206 or not content_range:
            stored = response.headers.get("x-goog-stored-content-length")
            return int(stored) if stored else received
        m = _CONTENT_RANGE.match(content_range)
        if m is None:
            raise StoreError(f"unparseable Content-Range {content_range!r} from {self.url}")
        return int(m.group(3))

    def _call(self, op: str, key: str, fn: Callable[[], T]) -> T:
        """``fn()``, retried on transient failures (``max_attempts`` in all), every exception
        translated."""
        attempts = max(1, self._settings.max_attempts)
        for attempt in range(1, attempts + 1):
            try:
                return fn()
            except StoreError:
                raise
            except _TRANSIENT as exc:
                if attempt >= attempts:
                    self._raise(op, key, exc)
                log.debug(
                    "gcs attempt failed",
                    store=self.url,
                    op=op,
                    attempt=attempt,
                    error=type(exc).__name__,
                )
                time.sleep(min(2.0, 0.1 * 2 ** (attempt - 1)))
            except Exception as exc:
                self._raise(op, key, exc)
        raise AssertionError("unreachable")  # pragma: no cover

    def _raise(self, op: str, key: str, exc: BaseException) -> NoReturn:
        where = self._show(key)
        text = str(exc).lower()
        error: StoreError
        if isinstance(exc, gexc.NotFound):
            if "bucket" in text:
                error = ObjectNotFound(f"{op} {where}: bucket {self._bucket_name!r} does not exist")
            else:
                error = ObjectNotFound(f"{op} {where}: no such object")
        elif isinstance(exc, gexc.PreconditionFailed):
            error = PreconditionFailed(f"{op} {where}: precondition failed (generation)")
        elif isinstance(exc, gexc.Forbidden | gexc.Unauthorized | auth_exc.RefreshError):
            error = AccessDenied(f"{op} {where}: access denied ({type(exc).__name__})")
        elif isinstance(exc, auth_exc.DefaultCredentialsError):
            error = AccessDenied(f"{op} {where}: no usable Google credentials")
        elif isinstance(exc, auth_exc.TransportError):
            error = StoreUnavailable(
                f"{op} {where}: store unreachable: no Google access token (the credentials' "
                "token endpoint cannot be reached)"
            )
        elif isinstance(exc, _TRANSIENT):
            error = StoreUnavailable(f"{op} {where}: store unreachable ({type(exc).__name__})")
        elif isinstance(exc, gexc.GoogleAPICallError):
            error = StoreError(f"{op} {where}: HTTP {exc.code} ({type(exc).__name__})")
        else:
            error = StoreError(f"{op} {where}: {type(exc).__name__}")
        raise error from exc
