"""AzureObjectStore: the ObjectStore on Azure Blob Storage (``az://container/prefix``, also
``abfs://``), the project's only user of ``azure-storage-blob``.

**Library.** The official SDK, chosen by measurement and by what the contract needs. On Azurite
here, 32 MiB objects: the SDK uploads at 26-73 MB/s and downloads at 46-118 MB/s (two runs on a
busy machine); ``obstore`` (one Rust client for S3, GCS and Azure) ignored the emulator's
endpoint without extra configuration, and its API neither stages blocks under ids we choose nor
lists uncommitted blocks, so abandoned uploads could not be found by gc. The SDK does both.

**One request first.** The store says ``prefers_one_request_upload``: the offload writer then
sends a data object of at most ``one_request_upload_max`` bytes (64 MiB) as one Put Blob
(:class:`~offloader.offload.writer.OneRequestUpload`, :meth:`AzureObjectStore.put_parts`), the
request ``upload_blob`` itself makes for that size, its body the framed blocks one after the
other: ``upload_blob`` sends one request only from one ``bytes`` (a joined copy), so the blocks
go through the SDK's generated Put Blob operation that ``upload_blob`` ends in. On the wire
(traced through http.client): the body goes with its Content-Length (no chunked encoding), each
block in one ``sendall`` of its own memoryview (8 MiB blocks: 8 MiB pieces, no copy), and the
offload makes two requests, the data's Put Blob then the index's, with no HEAD, existence,
metadata or container check (an existing index is refused by ``If-None-Match: *`` on its own
Put Blob). The blocks are framed on another thread while the first ones are sent (the parts
given to :meth:`AzureObjectStore.put_parts` may be still being framed: :class:`PartsBody` takes
each when the transport asks for it). Why not staged
blocks: Azurite's Put Block computes a CRC64 of every block in JavaScript unless the request
carries Content-MD5, while its Put Blob only takes an MD5 (native); one 32 MiB ``stage_block``
took 1.4-2.5 s, 0.8-1.0 s with Content-MD5, one 32 MiB ``upload_blob`` 0.3-0.7 s on the same
busy machine (``--inMemoryPersistence`` is already on; nothing in how we called it was the
cause). A Put Blob is atomic: a crash leaves no object or the whole one, so no marker. Measured
(32 MiB, 8 MiB blocks, ``python -m bench clouds``,
bench/results/2026-11-28-clouds-framing-overlap.json): 0.72-0.84 of ``upload_blob`` of the same
bytes at load 5 on 2 cores (0.42-0.98 at load 15-28 before the framing overlapped the send);
``put_parts`` of blocks already framed takes as long as ``upload_blob`` (73-90 ms vs 74-96 ms);
the offload adds the framing's CPU (on 2 shared cores the framing thread slows the send about
as much as it overlaps it) and the index object's own Put Blob (5-9 ms), which must follow the
data's answer.

**Multipart as Azure does it** (larger objects): each part (one Pulsar block) is one staged
block of the target blob (``stage_block``, block id = the upload id and the part number), and
completion is ``commit_block_list`` with the upload's metadata. Each block is sent with its
Content-MD5 (``validate_content``: Azure checks it on arrival, as S3 and GCS check our parts'
CRC32C; the MD5 costs ~1.2 ms of client CPU per MiB, and spares Azurite its CRC64: staged 32 MiB
offloads went from 0.14-0.36 to 0.17-0.54 of the one-request baseline, the machine's load
making most of the spread). Azure has no upload ids and no
listing of unfinished uploads, so each upload also has a marker blob
(:mod:`offloader.store.staged`); its abort deletes the marker and, when no committed blob and no
other upload exist for the key, drops the uncommitted blocks (an empty block list committed then
deleted). Azure keeps one pool of uncommitted blocks per blob: completing one upload of a key
discards the blocks of another upload of the same key (the offloader never runs two uploads of
one key).

**Preconditions** are ETag conditions: ``if_none_match`` is ``If-None-Match: *``; a streamed
range reopened after a dropped connection must match the first answer's ETag.

**Metadata.** Azure metadata names must be C# identifiers. A name that is not (``Mixed-Case``)
is stored as ``ofx_`` + its UTF-8 in hex and decoded back on reads, so every backend returns the
same names. Pulsar's own names (``role``, ``s3managedledgeroffloaderformatversion``, ...) are
identifiers, stored as they are.

**Configuration** is Azure's own: ``AZURE_STORAGE_CONNECTION_STRING``, else
``AZURE_STORAGE_ACCOUNT`` with ``AZURE_STORAGE_KEY`` (and ``AZURE_STORAGE_BLOB_ENDPOINT`` for a
non-default endpoint). Every SDK exception is translated here into :mod:`offloader.errors`, each
message naming the ``az://`` URL and never the key.
"""

from __future__ import annotations

import base64
import builtins
import contextlib
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, NoReturn

from azure.core import MatchConditions
from azure.core.exceptions import (
    AzureError,
    ClientAuthenticationError,
    HttpResponseError,
    ResourceExistsError,
    ResourceModifiedError,
    ResourceNotFoundError,
    ServiceRequestError,
    ServiceResponseError,
)
from azure.storage.blob import BlobBlock, BlobServiceClient, LinearRetry

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

__all__ = ["AzureObjectStore", "decode_metadata", "encode_metadata"]

log = get_logger(__name__)

_CONTAINER_NAME = re.compile(r"^[a-z0-9](?!.*--)[a-z0-9-]{1,61}[a-z0-9]$")
_IDENTIFIER = re.compile(r"^[a-z_][a-z0-9_]*$")
_ESCAPED = "ofx_"


def _meta_headers(metadata: Mapping[str, str]) -> dict[str, str]:
    """User metadata as the request headers Put Blob takes."""
    return {f"x-ms-meta-{name}": value for name, value in encode_metadata(metadata).items()}


def encode_metadata(metadata: Mapping[str, str] | None) -> dict[str, str]:
    """Lower-cased names; a name that is no C# identifier is stored hex-escaped."""
    out = {}
    for name, value in (metadata or {}).items():
        low = str(name).lower()
        if not _IDENTIFIER.match(low) or low.startswith(_ESCAPED):
            low = _ESCAPED + low.encode("utf-8").hex()
        out[low] = str(value)
    return out


def decode_metadata(metadata: Mapping[str, str] | None) -> dict[str, str]:
    out = {}
    for name, value in (metadata or {}).items():
        low = str(name).lower()
        if low.startswith(_ESCAPED):
            with contextlib.suppress(ValueError):
                low = bytes.fromhex(low[len(_ESCAPED) :]).decode("utf-8")
        out[low] = str(value)
    return out


def _block_id(upload_id: str, part_number: int) -> str:
    return base64.b64encode(f"{upload_id}-{part_number:05d}".encode("ascii")).decode("ascii")


def _bytes(data: Buffer) -> bytes:
    return data if isinstance(data, bytes) else bytes(data)


def service_client_from_environment(
    settings: OffloadSettings, environ: Mapping[str, str] | None = None, *, where: str = "Azure"
) -> tuple[BlobServiceClient, str]:
    """A client from Azure's own variables, and the account's blob endpoint (for messages)."""
    env = os.environ if environ is None else environ
    options: dict[str, Any] = {
        # a whole object of up to one_request_upload_max bytes is one Put Blob
        "max_single_put_size": max(64 * 1024 * 1024, settings.one_request_upload_max),
        "connection_timeout": settings.connect_timeout,
        "read_timeout": settings.read_timeout,
        "retry_policy": LinearRetry(
            backoff=0.2,  # type: ignore[arg-type]
            random_jitter_range=0,
            retry_total=max(0, settings.max_attempts - 1),
        ),
    }
    conn = env.get("AZURE_STORAGE_CONNECTION_STRING")
    try:
        if conn:
            client = BlobServiceClient.from_connection_string(conn, **options)
        elif env.get("AZURE_STORAGE_ACCOUNT") and env.get("AZURE_STORAGE_KEY"):
            account = env["AZURE_STORAGE_ACCOUNT"]
            endpoint = env.get("AZURE_STORAGE_BLOB_ENDPOINT") or (
                f"https://{account}.blob.core.windows.net"
            )
            client = BlobServiceClient(
                endpoint,
                credential={"account_name": account, "account_key": env["AZURE_STORAGE_KEY"]},
                **options,
            )
        else:
            raise ConfigError(
                f"{where}: no Azure credentials: set AZURE_STORAGE_CONNECTION_STRING, or "
                "AZURE_STORAGE_ACCOUNT and AZURE_STORAGE_KEY",
                setting="store_url",
            )
    except (ValueError, AzureError) as exc:
        raise ConfigError(
            f"{where}: unusable Azure storage configuration ({type(exc).__name__})",
            setting="store_url",
        ) from None
    return client, str(client.url)


class _ChunkBody:
    """The chunks of an Azure download as a ``Body`` (transport failures are resumable)."""

    def __init__(self, chunks: Iterator[bytes], where: str) -> None:
        self._chunks = chunks
        self._buffer = memoryview(b"")
        self._where = where

    def read(self, n: int) -> bytes:
        if not self._buffer:
            try:
                self._buffer = memoryview(next(self._chunks, b""))
            except (ServiceRequestError, ServiceResponseError, OSError) as exc:
                raise StoreUnavailable(
                    f"{self._where}: body read failed ({type(exc).__name__})"
                ) from exc
            except AzureError as exc:
                raise StoreError(f"{self._where}: {type(exc).__name__}") from exc
        data = bytes(self._buffer[:n])
        self._buffer = self._buffer[n:]
        return data

    def close(self) -> None:
        self._buffer = memoryview(b"")
        self._chunks = iter(())


class AzureObjectStore:
    """An :class:`~offloader.store.base.ObjectStore` on one Azure container and key prefix.

    ``connection_string`` overrides the environment (tests); ``page_size`` bounds listing
    pages (tests use small pages).
    """

    def __init__(
        self,
        container: str,
        prefix: str = "",
        *,
        connection_string: str | None = None,
        settings: OffloadSettings | None = None,
        page_size: int = 1000,
        scheme: str = "az",
        account: str = "",
    ) -> None:
        if not _CONTAINER_NAME.match(container or ""):
            raise ConfigError(
                f"invalid Azure container name {container!r}: 3-63 characters of a-z, 0-9, '-'",
                setting="store_url",
            )
        self._container_name = container
        self._prefix = key_prefix(prefix, "Azure")
        self._scheme = scheme
        self._page_size = page_size
        self._settings = settings or OffloadSettings()
        environ: Mapping[str, str] | None = None
        if connection_string:
            environ = {"AZURE_STORAGE_CONNECTION_STRING": connection_string}
        elif account and os.environ.get("AZURE_STORAGE_ACCOUNT", account) != account:
            raise ConfigError(
                f"{self.url}: the URL names account {account!r} but AZURE_STORAGE_ACCOUNT is "
                f"{os.environ['AZURE_STORAGE_ACCOUNT']!r}",
                setting="store_url",
            )
        self._service, self._endpoint = service_client_from_environment(
            self._settings, environ, where=self.url
        )
        self._container = self._service.get_container_client(container)
        #: uploads this instance started or checked and has not ended: their parts skip the
        #: marker check (a request per block); completion always checks the marker
        self._live: set[str] = set()

    # --- properties -----------------------------------------------------------------------
    @property
    def url(self) -> str:
        return f"{self._scheme}://{self._container_name}/{self._prefix}".rstrip("/")

    @property
    def container(self) -> str:
        return self._container_name

    @property
    def prefix(self) -> str:
        return self._prefix

    @property
    def endpoint_url(self) -> str:
        return self._endpoint

    @property
    def supports_conditional_put(self) -> bool:
        return True

    @property
    def prefers_one_request_upload(self) -> bool:
        """One Put Blob beats staged blocks and a commit (module docstring)."""
        return True

    def __repr__(self) -> str:
        return f"AzureObjectStore({self.url}, endpoint={self._endpoint})"

    # --- multipart ------------------------------------------------------------------------
    def create_multipart_upload(self, key: str, metadata: Mapping[str, str]) -> str:
        staged.check_user_key(key)
        upload_id = staged.new_upload_id()
        marker = self._prefix + staged.marker_name(key, upload_id)
        try:
            self._container.upload_blob(
                marker, b"", metadata=encode_metadata(metadata), overwrite=False
            )
        except AzureError as exc:
            self._raise("create_multipart_upload", key, exc)
        self._live.add(upload_id)
        return upload_id

    def upload_part(
        self, key: str, upload_id: str, part_number: int, data: Buffer, crc32c: int
    ) -> UploadedPart:
        check_part_number(part_number, limit=50000)
        if upload_id not in self._live:
            self._marker(key, upload_id, "upload_part")
            self._live.add(upload_id)
        block_id = _block_id(upload_id, part_number)
        try:
            # Content-MD5 (validate_content): the block is checked on arrival, and Azurite
            # then checks that in place of a CRC64 of its own (module docstring)
            self._container.get_blob_client(self._prefix + key).stage_block(
                block_id, _bytes(data), validate_content=True
            )
        except AzureError as exc:
            self._raise("upload_part", key, exc)
        return UploadedPart(part_number=part_number, etag=block_id, crc32c=crc32c)

    def complete_multipart_upload(
        self, key: str, upload_id: str, parts: Sequence[UploadedPart]
    ) -> None:
        ordered = ordered_parts(parts, self._show(key))
        metadata = self._marker(key, upload_id, "complete_multipart_upload")
        for p in ordered:
            if p.etag != _block_id(upload_id, p.part_number):
                raise StoreError(
                    f"complete {self._show(key)}: InvalidPart: part {p.part_number} "
                    "was not staged with that id"
                )
        blob = self._container.get_blob_client(self._prefix + key)
        try:
            blob.commit_block_list([BlobBlock(block_id=p.etag) for p in ordered], metadata=metadata)
        except HttpResponseError as exc:
            if _code(exc) == "InvalidBlockList":  # a part that was never staged
                raise StoreError(
                    f"complete {self._show(key)}: InvalidPart: a part was not staged"
                ) from exc
            self._raise("complete_multipart_upload", key, exc)
        except AzureError as exc:
            self._raise("complete_multipart_upload", key, exc)
        self._live.discard(upload_id)
        self._delete_raw(self._prefix + staged.marker_name(key, upload_id), "complete", key)

    def abort_multipart_upload(self, key: str, upload_id: str) -> None:
        if not staged.could_be_ours(key, upload_id):
            return
        self._live.discard(upload_id)
        self._delete_raw(self._prefix + staged.marker_name(key, upload_id), "abort", key)
        if self.list_multipart_uploads_of(key):
            return  # another upload of the key still needs its blocks
        blob = self._container.get_blob_client(self._prefix + key)
        try:
            # drop the uncommitted blocks: a Put Blob where no blob exists (If-None-Match: *)
            # discards them, then the empty blob is deleted
            blob.upload_blob(b"", overwrite=False)
            blob.delete_blob()
        except (ResourceExistsError, ResourceModifiedError, ResourceNotFoundError):
            pass  # a committed blob exists: its uncommitted blocks expire with Azure's 7 days
        except AzureError as exc:
            self._raise("abort_multipart_upload", key, exc)

    def list_multipart_uploads_of(self, key: str) -> builtins.list[MultipartUploadInfo]:
        """The unfinished uploads of exactly ``key``."""
        return [u for u in self.list_multipart_uploads(key) if u.key == key]

    def list_multipart_uploads(self, prefix: str = "") -> builtins.list[MultipartUploadInfo]:
        listed = self._list_raw(staged.marker_prefix(prefix), "list_multipart_uploads")
        return staged.uploads_from_markers(
            (name[len(self._prefix) :], blob.creation_time or blob.last_modified)
            for name, blob in listed
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
        try:
            upload = self._put_blob(key)
            if upload is None:
                self._container.upload_blob(
                    self._prefix + key,
                    _bytes(data),
                    metadata=encode_metadata(metadata),
                    overwrite=not if_none_match,
                )
            else:  # the request upload_blob makes, without its option handling (~1-2 ms)
                body = _bytes(data)
                headers = _meta_headers(metadata)
                if if_none_match:
                    headers["If-None-Match"] = "*"
                upload(body=body, content_length=len(body), headers=headers)
        except ResourceExistsError as exc:
            raise PreconditionFailed(f"put {self._show(key)}: the object exists") from exc
        except AzureError as exc:
            self._raise("put", key, exc)

    def put_parts(self, key: str, parts: Sequence[Buffer], metadata: Mapping[str, str]) -> None:
        """The whole object, the concatenation of ``parts``, as one Put Blob that streams the
        parts, never joined. ``upload_blob`` sends one request only from one ``bytes`` (a
        joined copy of the object: measured, that copy is most of what separated our offload
        from the SDK's own upload), so this calls the SDK's generated Put Blob operation
        (``BlobClient._client.block_blob.upload``, the call ``upload_blob`` itself ends in)
        with the parts as its body; where an SDK lacks it, the parts are joined for
        ``upload_blob``."""
        staged.check_user_key(key)
        upload = self._put_blob(key)
        if upload is None:
            self.put(key, b"".join(parts), metadata)
            return
        body = PartsBody(parts)
        headers = _meta_headers(metadata)
        try:
            upload(body=body, content_length=len(body), headers=headers)
        except AzureError as exc:
            self._raise("put", key, exc)

    def _put_blob(self, key: str) -> Any:
        """The SDK's generated Put Blob operation of ``key``'s blob (the call ``upload_blob``
        ends in), or None where the installed SDK lacks it."""
        blob = self._container.get_blob_client(self._prefix + key)
        operations = getattr(getattr(blob, "_client", None), "block_blob", None)
        upload = getattr(operations, "upload", None)
        return upload if callable(upload) else None

    def get(self, key: str) -> GetResult:
        staged.check_user_key(key)
        try:
            downloader = self._container.download_blob(self._prefix + key)
            data = downloader.readall()
        except AzureError as exc:
            self._raise("get", key, exc)
        return GetResult(
            data=data, size=len(data), metadata=decode_metadata(downloader.properties.metadata)
        )

    def get_range(self, key: str, start: int, end: int) -> GetResult:
        if start < 0 or end <= start:
            raise StoreError(f"get_range {self._show(key)}: invalid range [{start}, {end})")
        staged.check_user_key(key)
        try:
            downloader = self._container.download_blob(
                self._prefix + key, offset=start, length=end - start
            )
            data = downloader.readall()
        except AzureError as exc:
            self._raise("get_range", key, exc)
        props = downloader.properties
        total = _total(props)
        if start >= total:  # Azurite answers an empty 206 where Azure says 416
            raise StoreError(f"get_range {self._show(key)}: range [{start}, {end}) past {total}")
        return GetResult(data=data, size=total, metadata=decode_metadata(props.metadata))

    def open_range(self, key: str, start: int, end: int) -> RangeReader:
        if start < 0 or end <= start:
            raise StoreError(f"open_range {self._show(key)}: invalid range [{start}, {end})")
        staged.check_user_key(key)
        etags: list[str] = []
        metadata: list[dict[str, str]] = []

        def opener(offset: int) -> tuple[Body, int]:
            pin: dict[str, Any] = (
                {"etag": etags[0], "match_condition": MatchConditions.IfNotModified}
                if etags
                else {}
            )
            try:
                downloader = self._container.download_blob(
                    self._prefix + key, offset=offset, length=end - offset, **pin
                )
            except AzureError as exc:
                self._raise("open_range", key, exc)
            props = downloader.properties
            if offset >= _total(props):
                raise StoreError(
                    f"open_range {self._show(key)}: offset {offset} past {_total(props)}"
                )
            if not etags and props.etag:
                etags.append(str(props.etag))
            if not metadata:
                metadata.append(decode_metadata(props.metadata))
            return _ChunkBody(downloader.chunks(), f"open_range {self._show(key)}"), _total(props)

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
        try:
            props = self._container.get_blob_client(self._prefix + key).get_blob_properties()
        except AzureError as exc:
            self._raise("head", key, exc)
        return ObjectInfo(
            key=key,
            size=int(props.size),
            metadata=decode_metadata(props.metadata),
            last_modified=props.last_modified,
            etag=props.etag,
        )

    def delete(self, key: str) -> None:
        staged.check_user_key(key)
        self._delete_raw(self._prefix + key, "delete", key)

    def list(self, prefix: str = "") -> Iterator[ObjectInfo]:
        for name, blob in self._list_raw(prefix, "list"):
            relative = name[len(self._prefix) :]
            if not staged.is_reserved(relative):
                yield ObjectInfo(relative, int(blob.size), {}, blob.last_modified, blob.etag)

    def close(self) -> None:
        self._container.close()
        self._service.close()

    # --- helpers --------------------------------------------------------------------------
    def _show(self, key: str) -> str:
        return f"{self._scheme}://{self._container_name}/{self._prefix}{key}"

    def _marker(self, key: str, upload_id: str, op: str) -> dict[str, str]:
        """The upload's metadata (its marker's), or ``UploadNotFound``."""
        staged.check_user_key(key)
        if not staged.valid_upload_id(upload_id):
            raise UploadNotFound(f"{op} {self._show(key)}: no upload {upload_id[:40]!r}")
        name = self._prefix + staged.marker_name(key, upload_id)
        try:
            props = self._container.get_blob_client(name).get_blob_properties()
        except ResourceNotFoundError as exc:
            if _code(exc) == "ContainerNotFound":
                self._raise(op, key, exc)
            raise UploadNotFound(
                f"{op} {self._show(key)}: upload {upload_id[:16]}... does not exist"
            ) from None
        except AzureError as exc:
            self._raise(op, key, exc)
        return dict(props.metadata or {})

    def _delete_raw(self, name: str, op: str, key: str) -> None:
        try:
            self._container.delete_blob(name)
        except ResourceNotFoundError as exc:
            if _code(exc) == "ContainerNotFound":
                self._raise(op, key, exc)
        except AzureError as exc:
            self._raise(op, key, exc)

    def _list_raw(self, prefix: str, op: str) -> Iterator[tuple[str, Any]]:
        try:
            pages = self._container.list_blobs(
                name_starts_with=self._prefix + prefix, results_per_page=self._page_size
            ).by_page()
            for page in pages:
                for blob in page:
                    yield str(blob.name), blob
        except AzureError as exc:
            self._raise(op, prefix, exc)

    def _raise(self, op: str, key: str, exc: AzureError) -> NoReturn:
        where = self._show(key)
        code = _code(exc)
        status = getattr(exc, "status_code", None)
        error: StoreError
        if code == "ContainerNotFound":
            error = ObjectNotFound(
                f"{op} {where}: container {self._container_name!r} does not exist"
            )
        elif isinstance(exc, ResourceNotFoundError) or status == 404:
            error = ObjectNotFound(f"{op} {where}: no such object")
        elif isinstance(exc, ResourceModifiedError | ResourceExistsError) or status == 412:
            error = PreconditionFailed(f"{op} {where}: precondition failed ({code or status})")
        elif isinstance(exc, ClientAuthenticationError) or status in (401, 403):
            error = AccessDenied(f"{op} {where}: access denied ({code or status})")
        elif isinstance(exc, ServiceRequestError | ServiceResponseError):
            error = StoreUnavailable(f"{op} {where}: store unreachable ({type(exc).__name__})")
        elif isinstance(exc, HttpResponseError) and status is not None and status >= 500:
            error = StoreUnavailable(f"{op} {where}: HTTP {status} ({code})")
        elif isinstance(exc, HttpResponseError):
            error = StoreError(f"{op} {where}: HTTP {status} ({code or type(exc).__name__})")
        else:
            error = StoreError(f"{op} {where}: {type(exc).__name__}")
        raise error from exc


_CONTENT_RANGE = re.compile(r"^bytes (\d+)-(\d+)/(\d+)$")


def _total(props: Any) -> int:
    """The whole blob's size: from Content-Range on a ranged answer, else its length."""
    m = _CONTENT_RANGE.match(str(getattr(props, "content_range", "") or ""))
    return int(m.group(3)) if m else int(props.size)


def _code(exc: AzureError) -> str:
    """The service's error code: the SDK's (its public calls set it), else the answer's
    ``x-ms-error-code`` header (the generated Put Blob of ``put_parts`` does not set it)."""
    code = getattr(exc, "error_code", "") or ""
    if not code:
        response = getattr(exc, "response", None)
        headers = getattr(response, "headers", None) or {}
        code = headers.get("x-ms-error-code", "") or ""
    return str(code)
