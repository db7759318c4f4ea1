"""The export target as the driver sees it: list, delete and mark files through ``pyarrow.fs``.

A local directory (``LocalFileSystem``), ``s3://bucket/prefix`` (``S3FileSystem`` with the
export's endpoint and region; credentials from the ``AWS_*`` environment; the SDK's flexible
checksums off, see :data:`CHECKSUM_ENV`), ``gs://bucket/prefix`` (``GcsFileSystem``) or
``az://container/prefix`` (``AzureFileSystem``), each from its cloud's own environment; on
GCS and Azure the data files are put whole through :mod:`offloader.store`. Executors write data
files through it (:mod:`offloader.spark.export_write`); ``_SUCCESS`` markers are put through
:mod:`offloader.store`. The driver lists a topic's files (their names say what they
hold, :mod:`offloader.export.naming`), removes what a crashed run left (files past the
watermark, temporary files, and on S3 unfinished multipart uploads, aborted through
:mod:`offloader.store`), writes ``_SUCCESS`` markers and the watermark records
(:mod:`offloader.export.record`, written whole: a temporary file renamed, or one PUT) and
reads the Parquet footers ``export reset --to TIME`` needs. Executors write files themselves
(:mod:`offloader.spark.export_write`).
"""

from __future__ import annotations

import datetime as dt
import os
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from offloader.errors import ConfigError, StoreError
from offloader.export.naming import SUCCESS, ExportFile, is_temp_name, parse_file_name, topic_dir
from offloader.location import s3_endpoint
from offloader.logs import get_logger
from offloader.store.base import ObjectStore

if TYPE_CHECKING:  # pyarrow is imported where a filesystem is opened: not by importers
    import pyarrow.fs as pafs

__all__ = ["TargetListing", "TargetSpec", "open_filesystem"]

log = get_logger(__name__)

#: how long pyarrow's GCS client retries a transient failure (an unreachable endpoint included)
#: before the export fails with its one-line error (the client's own default is 15 minutes)
CLOUD_RETRY_SECONDS = 20

#: a google-cloud-cpp status (pyarrow's GCS errors): its code, and a CURL error's text in it
_GCS_STATUS = re.compile(r"google::cloud::Status\((?P<code>[A-Z_]+): (?P<detail>.*)", re.S)
_CURL = re.compile(r"CURL error \[\d+\]=(?P<text>[^{}]*?)\s*(?:error_info=|[{}]|$)")
_UNREACHABLE = ("UNAVAILABLE", "DEADLINE_EXCEEDED")


def fs_reason(exc: BaseException) -> str:
    """A pyarrow filesystem error as one short line: the GCS client's status dump reduced to
    its code and cause (``store unreachable (UNAVAILABLE: Could not connect to server)``),
    anything else as its text on one line (at most 300 characters)."""
    text = " ".join(str(exc).split())
    match = _GCS_STATUS.search(text)
    if match:
        code = match["code"]
        curl = _CURL.search(match["detail"])
        cause = curl["text"].strip() if curl else match["detail"].split(" error_info=")[0]
        detail = f"{code}: {cause}".rstrip(")")
        text = f"store unreachable ({detail})" if code in _UNREACHABLE else detail
    elif "could not connect" in text.lower():  # Azure's SDK, under pyarrow
        text = f"store unreachable: {text}"
    return text if len(text) <= 300 else text[:297] + "..."


@dataclass(frozen=True)
class TargetSpec:
    """Where files go (picklable: executors open their own filesystem from it)."""

    url: str  # normalized: s3://bucket/prefix or an absolute path
    endpoint_url: str | None = None
    region: str | None = None

    @property
    def scheme(self) -> str:
        """``s3``, ``gs``, ``az`` or ``file``."""
        head, sep, _ = self.url.partition("://")
        return head if sep else "file"

    @property
    def is_s3(self) -> bool:
        return self.scheme == "s3"

    @property
    def is_remote(self) -> bool:
        """An object store (S3, GCS, Azure): files are written and marked through it."""
        return self.scheme != "file"

    @property
    def root(self) -> str:
        """The root as a path of the filesystem (``bucket/prefix`` on an object store)."""
        return self.url.partition("://")[2] if self.is_remote else self.url

    def path(self, relative: str) -> str:
        return f"{self.root}/{relative}" if relative else self.root

    def open(self) -> pafs.FileSystem:
        return open_filesystem(self)

    def open_store(self) -> ObjectStore:
        """The S3 target as an :class:`ObjectStore` (whole-object puts: one PUT, never a
        multipart upload, so a file is there complete or not at all)."""
        from offloader.store import open_store

        return open_store(self.url, endpoint_url=self.endpoint_url, region=self.region)


#: the AWS SDK's flexible checksums off unless the environment says otherwise: by default
#: the C++ SDK under pyarrow sends parts as ``aws-chunked`` bodies with a checksum trailer,
#: which Ceph RGW 16 answers 411 MissingContentLength (spec/export.md, "S3 writes"); the SDK
#: reads these variables each time a client is made
CHECKSUM_ENV = {
    "AWS_REQUEST_CHECKSUM_CALCULATION": "when_required",
    "AWS_RESPONSE_CHECKSUM_VALIDATION": "when_required",
}


_ENVIRONMENT_LOCK = threading.Lock()


@contextmanager
def sdk_checksum_defaults() -> Iterator[None]:
    """:data:`CHECKSUM_ENV` in the environment (where the user has not set them) while the
    SDK builds a client, then the environment as it was: building a target leaves no lasting
    change in the process (one lock: two threads building clients see the same values)."""
    with _ENVIRONMENT_LOCK:
        saved = {key: os.environ.get(key) for key in CHECKSUM_ENV}
        for key, value in CHECKSUM_ENV.items():
            os.environ.setdefault(key, value)
        try:
            yield
        finally:
            for key, old in saved.items():
                if old is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = old


def _cloud_filesystem(spec: TargetSpec) -> pafs.FileSystem:
    """pyarrow's GCS or Azure filesystem, configured as each cloud's tools are
    (``STORAGE_EMULATOR_HOST``; ``AZURE_STORAGE_CONNECTION_STRING`` or
    ``AZURE_STORAGE_ACCOUNT`` and ``AZURE_STORAGE_KEY``)."""
    import pyarrow.fs as pafs

    if spec.scheme == "gs":
        # the GCS client retries transient errors for 15 minutes by default: an unreachable
        # endpoint would hang an export that long before its one-line error
        limit = dt.timedelta(seconds=CLOUD_RETRY_SECONDS)
        emulator = os.environ.get("STORAGE_EMULATOR_HOST")
        if not emulator:
            return pafs.GcsFileSystem(retry_time_limit=limit)
        parts = urlsplit(emulator if "://" in emulator else f"http://{emulator}")
        return pafs.GcsFileSystem(
            anonymous=True,
            endpoint_override=parts.netloc,
            scheme=parts.scheme or "http",
            project_id=os.environ.get("GOOGLE_CLOUD_PROJECT") or "offloader",
            retry_time_limit=limit,
        )
    conn = dict(
        item.split("=", 1)
        for item in os.environ.get("AZURE_STORAGE_CONNECTION_STRING", "").split(";")
        if "=" in item
    )
    account = conn.get("AccountName") or os.environ.get("AZURE_STORAGE_ACCOUNT")
    key = conn.get("AccountKey") or os.environ.get("AZURE_STORAGE_KEY")
    if not account or not key:
        raise ConfigError(
            f"export target {spec.url}: set AZURE_STORAGE_CONNECTION_STRING, or "
            "AZURE_STORAGE_ACCOUNT and AZURE_STORAGE_KEY"
        )
    kwargs: dict[str, str] = {}
    endpoint = conn.get("BlobEndpoint") or os.environ.get("AZURE_STORAGE_BLOB_ENDPOINT")
    if endpoint:
        parts = urlsplit(endpoint)
        for service in ("blob", "dfs"):
            kwargs[f"{service}_storage_authority"] = parts.netloc
            kwargs[f"{service}_storage_scheme"] = parts.scheme or "https"
    return pafs.AzureFileSystem(account_name=account, account_key=key, **kwargs)  # type: ignore[arg-type]


def open_filesystem(spec: TargetSpec) -> pafs.FileSystem:
    import pyarrow.fs as pafs

    if not spec.is_remote:
        return pafs.LocalFileSystem()
    if not spec.is_s3:
        try:
            return _cloud_filesystem(spec)
        except (OSError, ValueError) as exc:
            raise ConfigError(f"export target {spec.url}: {exc}") from None
    endpoint = s3_endpoint(spec.endpoint_url)
    kwargs: dict[str, object] = {
        "region": spec.region or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1",
        # a file smaller than a part goes in one PutObject, not a one-part multipart upload
        "allow_delayed_open": True,
    }
    if endpoint:
        parts = urlsplit(endpoint if "://" in endpoint else f"https://{endpoint}")
        kwargs["endpoint_override"] = parts.netloc
        kwargs["scheme"] = parts.scheme or "https"
    try:
        with sdk_checksum_defaults():
            return pafs.S3FileSystem(**kwargs)  # type: ignore[arg-type]
    except (OSError, ValueError) as exc:
        raise ConfigError(f"export target {spec.url}: {exc}") from None


@dataclass
class TargetListing:
    """What a topic's directory holds."""

    files: list[ExportFile] = field(default_factory=list)
    temps: list[str] = field(default_factory=list)
    markers: set[str] = field(default_factory=set)  # directories with a _SUCCESS

    def of_generation(self, generation: int) -> list[ExportFile]:
        return [f for f in self.files if f.generation == generation]


class ExportTarget:
    """The driver's handle on a target."""

    def __init__(self, spec: TargetSpec) -> None:
        self.spec = spec
        self.fs = spec.open()

    def _rel(self, path: str) -> str:
        root = self.spec.root.rstrip("/") + "/"
        return path[len(root) :] if path.startswith(root) else path

    def list_topic(self, topic: str) -> TargetListing:
        import pyarrow.fs as pafs

        selector = pafs.FileSelector(
            self.spec.path(topic_dir(topic)), recursive=True, allow_not_found=True
        )
        out = TargetListing()
        try:
            infos = self.fs.get_file_info(selector)
        except OSError as exc:
            raise StoreError(
                f"export target {self.spec.url}: cannot list: {fs_reason(exc)}"
            ) from None
        for info in infos:
            if info.type != pafs.FileType.File:
                continue
            rel = self._rel(info.path)
            name = rel.rpartition("/")[2]
            if name == SUCCESS:
                out.markers.add(rel.rpartition("/")[0])
            elif is_temp_name(rel):
                out.temps.append(rel)
            else:
                parsed = parse_file_name(rel, int(info.size or 0))
                if parsed is not None:
                    out.files.append(parsed)
        out.files.sort(key=lambda f: (f.first, f.last, f.path))
        return out

    def delete(self, relative: str) -> None:
        try:
            self.fs.delete_file(self.spec.path(relative))
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise StoreError(
                f"export target {self.spec.url}: cannot delete {relative}: {fs_reason(exc)}"
            ) from None

    def exists(self, relative: str) -> bool:
        import pyarrow.fs as pafs

        info = self.fs.get_file_info(self.spec.path(relative))
        return bool(info.type == pafs.FileType.File)

    def put_marker(self, directory: str) -> None:
        path = self.spec.path(f"{directory}/{SUCCESS}")
        try:
            if not self.spec.is_remote:
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "wb") as f:
                    os.fsync(f.fileno())
                return
            store = self.spec.open_store()
            try:
                store.put(f"{directory}/{SUCCESS}", b"", {})
            finally:
                store.close()
        except OSError as exc:
            raise StoreError(
                f"export target {self.spec.url}: cannot write {path}: {fs_reason(exc)}"
            ) from None

    def put_whole(self, relative: str, data: bytes) -> None:
        """Write a small object whole: there complete or not at all (a temporary file fsync'd
        and renamed locally; one PUT on an object store)."""
        path = self.spec.path(relative)
        try:
            if not self.spec.is_remote:
                os.makedirs(os.path.dirname(path), exist_ok=True)
                temp = f"{path}.tmp-{os.getpid()}-{threading.get_ident()}"
                with open(temp, "wb") as f:
                    f.write(data)
                    f.flush()
                    os.fsync(f.fileno())
                os.replace(temp, path)
                return
            store = self.spec.open_store()
            try:
                store.put(relative, data, {})
            finally:
                store.close()
        except OSError as exc:
            raise StoreError(f"export target {self.spec.url}: cannot write {path}: {exc}") from None

    def read_whole(self, relative: str) -> bytes:
        """A small object's bytes (a watermark record)."""
        try:
            with self.fs.open_input_stream(self.spec.path(relative)) as f:
                return bytes(f.read())
        except OSError as exc:
            raise StoreError(
                f"export target {self.spec.url}: cannot read {relative}: {exc}"
            ) from None

    def list_all(self, under: str = "") -> list[tuple[str, int]]:
        """Every file under the root (or under ``under``), as ``(relative path, size)``: one
        recursive listing."""
        import pyarrow.fs as pafs

        selector = pafs.FileSelector(self.spec.path(under), recursive=True, allow_not_found=True)
        try:
            infos = self.fs.get_file_info(selector)
        except OSError as exc:
            raise StoreError(f"export target {self.spec.url}: cannot list: {exc}") from None
        return sorted(
            (self._rel(i.path), int(i.size or 0)) for i in infos if i.type == pafs.FileType.File
        )

    def delete_marker(self, directory: str) -> None:
        self.delete(f"{directory}/{SUCCESS}")

    def publish_range(self, relative: str) -> tuple[int, int] | None:
        """The least and greatest ``publish_time`` (Kafka: ``timestamp``) in epoch ms of a
        file, from its footer (None when it records none)."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        try:
            meta = pq.read_metadata(self.spec.path(relative), filesystem=self.fs)
        except (OSError, pa.ArrowInvalid) as exc:
            raise StoreError(
                f"export target {self.spec.url}: cannot read {relative}: {fs_reason(exc)}"
            ) from None
        names = meta.schema.names
        if "publish_time" not in names and "timestamp" not in names:
            return None
        # Pulsar messages' publish time, or a Kafka record's timestamp
        column = names.index("publish_time" if "publish_time" in names else "timestamp")
        lo: int | None = None
        hi: int | None = None
        for g in range(meta.num_row_groups):
            stats = meta.row_group(g).column(column).statistics
            if stats is None or not stats.has_min_max:
                return None
            mn, mx = _ms(stats.min), _ms(stats.max)
            lo = mn if lo is None else min(lo, mn)
            hi = mx if hi is None else max(hi, mx)
        return None if lo is None or hi is None else (lo, hi)

    def abort_uploads(self, topic: str) -> int:
        """Abort unfinished multipart uploads under the topic's directory (object stores)."""
        if not self.spec.is_remote:
            return 0
        from offloader.store import open_store

        store = open_store(
            self.spec.url, endpoint_url=self.spec.endpoint_url, region=self.spec.region
        )
        try:
            uploads = store.list_multipart_uploads(topic_dir(topic) + "/")
            for up in uploads:
                store.abort_multipart_upload(up.key, up.upload_id)
                log.info("export.upload_aborted", key=up.key)
            return len(uploads)
        finally:
            store.close()


def _ms(value: object) -> int:
    import datetime as dt

    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=dt.timezone.utc)
        return int(value.timestamp() * 1000)
    return int(str(value)) // 1000
