"""LocalObjectStore: the ObjectStore in a local directory (``file:///dir``, the embedded default).

This module owns the on-disk layout of a local store:

- An object with key ``a/b`` is the file ``<root>/a/b``. Each file holds a small header (magic
  ``LOFFOBJ1``, a big-endian u32 length, the user metadata as JSON) followed by the object's
  bytes, so an object and its metadata appear together, in one rename, or not at all.
- Every write goes to a temporary file ``.tmp-<random>`` in the target's directory: write, fsync,
  then ``rename`` (or ``link`` for a conditional put, so that of two racing writers exactly one
  wins), then fsync the directory. A crash leaves at worst a ``.tmp-*`` file, which no listing
  shows and no key can name.
- Multipart uploads live under ``<root>/.uploads/<upload id>/`` (``upload.json`` with the key and
  metadata, and ``part-NNNNN`` files). Completing one concatenates the parts in part-number
  order into a temporary file and renames it into place.

Keys are checked by :func:`offloader.store.keycheck.check_key`; in addition, keys whose first
segment is ``.uploads`` or with a segment starting ``.tmp-`` are reserved. No key (or upload id)
can address a path outside the root, and symlinks inside the root are not followed out of it.
"""

from __future__ import annotations

import builtins
import errno
import itertools
import json
import os
import re
import shutil
import stat
import struct
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager, suppress
from datetime import datetime, timezone
from pathlib import Path
from types import TracebackType
from typing import Any, BinaryIO

import crc32c as crc32c_lib

from offloader.errors import (
    AccessDenied,
    InvalidStoreKey,
    ObjectNotFound,
    PreconditionFailed,
    StoreError,
    UploadNotFound,
)
from offloader.logs import get_logger
from offloader.store.base import (
    Buffer,
    GetResult,
    MultipartUploadInfo,
    ObjectInfo,
    RangeReader,
    UploadedPart,
)
from offloader.store.keycheck import check_key

__all__ = ["TMP_PREFIX", "UPLOADS_DIR", "LocalObjectStore"]


log = get_logger(__name__)

#: the hidden directory (directly under the root) that holds incomplete multipart uploads
UPLOADS_DIR = ".uploads"
#: name prefix of temporary files and directories (never visible as objects)
TMP_PREFIX = ".tmp-"

_MAGIC = b"LOFFOBJ1"
_HEADER = struct.Struct(">8sI")
_MAX_METADATA_BYTES = 64 * 1024
_UPLOAD_ID = re.compile(r"^[0-9a-f]{32}$")
_PART_FILE = "part-{:05d}"
_UPLOAD_FILE = "upload.json"
_COPY_CHUNK = 1024 * 1024


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _encode_header(metadata: Mapping[str, str]) -> bytes:
    meta = json.dumps(
        {str(k).lower(): str(v) for k, v in metadata.items()},
        sort_keys=True,
        separators=(",", ":"),
    ).encode("utf-8")
    if len(meta) > _MAX_METADATA_BYTES:
        raise StoreError(f"user metadata of {len(meta)} bytes is too large")
    return _HEADER.pack(_MAGIC, len(meta)) + meta


def _read_header(f: BinaryIO, shown: str) -> tuple[dict[str, str], int]:
    """The metadata and the offset where the object's bytes start."""
    head = f.read(_HEADER.size)
    if len(head) < _HEADER.size:
        raise StoreError(f"{shown}: not an object of a local store (short header)")
    magic, n = _HEADER.unpack(head)
    if magic != _MAGIC or n > _MAX_METADATA_BYTES:
        raise StoreError(f"{shown}: not an object of a local store (bad header)")
    raw = f.read(n)
    try:
        meta = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise StoreError(f"{shown}: corrupt metadata header") from exc
    if len(raw) != n or not isinstance(meta, dict):
        raise StoreError(f"{shown}: corrupt metadata header")
    return {str(k): str(v) for k, v in meta.items()}, _HEADER.size + n


def _not_a_directory(path: Path) -> Path | None:
    """``path`` or its nearest existing ancestor when that is not a directory, else None."""
    for candidate in (path, *path.parents):
        if candidate.exists() or candidate.is_symlink():
            return None if candidate.is_dir() else candidate
    return None


def _check_root(path: Path, *, create: bool) -> None:
    """Make sure the store root ``path`` is a directory (creating it if ``create``)."""
    blocker = _not_a_directory(path)
    if blocker == path:
        raise StoreError(f"local store root {path} is not a directory")
    if blocker is not None:
        raise StoreError(f"local store root {path}: {blocker} is not a directory")
    if path.is_dir():
        return
    if not create:
        raise ObjectNotFound(f"local store directory {path} does not exist")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StoreError(
            f"cannot create local store directory {path}: {exc.strerror or exc}"
        ) from exc
    if not path.is_dir():  # pragma: no cover - replaced by a file meanwhile
        raise StoreError(f"local store root {path} is not a directory")


def _mtime(st: os.stat_result) -> datetime:
    return datetime.fromtimestamp(st.st_mtime, tz=timezone.utc)


class LocalObjectStore:
    """An :class:`~offloader.store.base.ObjectStore` in the directory ``root``. Safe for
    concurrent use by threads and processes on one machine.

    A missing ``root`` is created, unless ``create`` is False (for read-only uses such as an
    audit, where a mistyped path must not silently become an empty store): then
    :class:`ObjectNotFound` names the path.
    """

    def __init__(self, root: str | os.PathLike[str], *, create: bool = True) -> None:
        path = Path(root)
        if not path.is_absolute():
            path = Path.cwd() / path
        _check_root(path, create=create)
        self._root = path
        self._real_root = os.path.realpath(path)
        self._uploads = path / UPLOADS_DIR

    # --- properties -----------------------------------------------------------------------
    @property
    def url(self) -> str:
        return self._root.as_uri()

    @property
    def root(self) -> Path:
        return self._root

    @property
    def supports_conditional_put(self) -> bool:
        return True

    def __repr__(self) -> str:
        return f"LocalObjectStore({self.url})"

    # --- whole objects --------------------------------------------------------------------
    def put(
        self,
        key: str,
        data: Buffer,
        metadata: Mapping[str, str],
        *,
        if_none_match: bool = False,
    ) -> None:
        target = self._path(key)
        with self._os_errors("put", key):
            self._write_atomic(
                target, [_encode_header(metadata), data], exclusive=if_none_match, key=key
            )

    def get(self, key: str) -> GetResult:
        with self._open(key, "get") as (f, meta, _offset):
            data = f.read()
        return GetResult(data=data, size=len(data), metadata=meta)

    def get_range(self, key: str, start: int, end: int) -> GetResult:
        if start < 0 or end <= start:
            raise StoreError(f"get_range {self._show(key)}: invalid range [{start}, {end})")
        with self._open(key, "get_range") as (f, meta, offset):
            size = self._seek_range("get_range", key, f, offset, start, end)
            data = f.read(min(end, size) - start)
        return GetResult(data=data, size=size, metadata=meta)

    def open_range(self, key: str, start: int, end: int) -> RangeReader:
        if start < 0 or end <= start:
            raise StoreError(f"open_range {self._show(key)}: invalid range [{start}, {end})")
        stack = ExitStack()
        with stack:
            f, _meta, offset = stack.enter_context(self._open(key, "open_range"))
            size = self._seek_range("open_range", key, f, offset, start, end)
            reader = _LocalRangeReader(f, size, min(end, size) - start, stack.pop_all())
        return reader

    def _seek_range(self, op: str, key: str, f: BinaryIO, offset: int, start: int, end: int) -> int:
        """Seek ``f`` to the range's start; returns the object's size (``StoreError`` when the
        range starts at or past its end)."""
        size = os.fstat(f.fileno()).st_size - offset
        if start >= size:
            raise StoreError(
                f"{op} {self._show(key)}: range [{start}, {end}) not satisfiable, object has "
                f"{size} bytes"
            )
        f.seek(offset + start)
        return size

    def head(self, key: str) -> ObjectInfo:
        with self._open(key, "head") as (f, meta, offset):
            st = os.fstat(f.fileno())
        return ObjectInfo(
            key=key, size=st.st_size - offset, metadata=meta, last_modified=_mtime(st)
        )

    def delete(self, key: str) -> None:
        path = self._path(key)
        with self._os_errors("delete", key):
            try:
                os.unlink(path)
            except (FileNotFoundError, NotADirectoryError):
                return
            except IsADirectoryError:
                return  # a "directory" is a key prefix, not an object
            _fsync_dir(path.parent)
            self._prune_dirs(path.parent)

    def list(self, prefix: str = "") -> Iterator[ObjectInfo]:
        found: builtins.list[ObjectInfo] = []
        with self._os_errors("list", prefix):
            self._scan(self._root, "", prefix, found)
        found.sort(key=lambda info: info.key)
        yield from found

    def close(self) -> None:
        """Nothing to release."""

    def __enter__(self) -> LocalObjectStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # --- multipart ------------------------------------------------------------------------
    def create_multipart_upload(self, key: str, metadata: Mapping[str, str]) -> str:
        self._path(key)
        upload_id = uuid.uuid4().hex
        record = json.dumps(
            {
                "key": key,
                "metadata": {str(k).lower(): str(v) for k, v in metadata.items()},
                "initiated": datetime.now(timezone.utc).isoformat(),
            }
        ).encode("utf-8")
        with self._os_errors("create_multipart_upload", key):
            self._makedirs(self._uploads)
            staging = self._uploads / f"{TMP_PREFIX}{upload_id}"
            staging.mkdir()
            with open(staging / _UPLOAD_FILE, "wb") as f:
                f.write(record)
                f.flush()
                os.fsync(f.fileno())
            _fsync_dir(staging)
            os.rename(staging, self._uploads / upload_id)
            _fsync_dir(self._uploads)
        return upload_id

    def upload_part(
        self, key: str, upload_id: str, part_number: int, data: Buffer, crc32c: int
    ) -> UploadedPart:
        if not 1 <= part_number <= 10000:
            raise StoreError(f"part number {part_number} not in 1..10000")
        actual = crc32c_lib.crc32c(data)
        if actual != crc32c:
            raise StoreError(
                f"upload_part {self._show(key)} part {part_number}: BadDigest, "
                f"CRC32C {crc32c:#010x} given, data has {actual:#010x}"
            )
        directory = self._upload_dir(key, upload_id)
        with self._os_errors("upload_part", key):
            try:
                self._write_atomic(
                    directory / _PART_FILE.format(part_number),
                    [data],
                    exclusive=False,
                    key=key,
                    make_dirs=False,
                )
            except FileNotFoundError:
                raise UploadNotFound(self._no_upload("upload_part", key, upload_id)) from None
        return UploadedPart(part_number=part_number, etag=f'"{actual:08x}"', crc32c=actual)

    def complete_multipart_upload(
        self, key: str, upload_id: str, parts: Sequence[UploadedPart]
    ) -> None:
        target = self._path(key)
        if not parts:
            raise StoreError(f"complete {self._show(key)}: no parts")
        ordered = sorted(parts, key=lambda p: p.part_number)
        numbers = [p.part_number for p in ordered]
        if len(set(numbers)) != len(numbers):
            raise StoreError(f"complete {self._show(key)}: duplicate part numbers {numbers}")
        directory = self._upload_dir(key, upload_id)
        metadata = self._upload_record(directory, key, upload_id)["metadata"]
        claimed = self._uploads / f"{TMP_PREFIX}complete-{upload_id}"
        with self._os_errors("complete_multipart_upload", key):
            try:
                os.rename(directory, claimed)  # one completer (or aborter) wins
            except FileNotFoundError:
                raise UploadNotFound(self._no_upload("complete", key, upload_id)) from None
            try:
                chunks = self._assembled(claimed, ordered, key)
                self._write_atomic(
                    target,
                    itertools.chain([_encode_header(metadata)], chunks),
                    exclusive=False,
                    key=key,
                )
            except BaseException:
                with suppress(OSError):
                    os.rename(claimed, directory)
                raise
            shutil.rmtree(claimed, ignore_errors=True)

    def abort_multipart_upload(self, key: str, upload_id: str) -> None:
        self._path(key)
        if not _UPLOAD_ID.match(upload_id or ""):
            return
        directory = self._uploads / upload_id
        try:
            record = self._upload_record(directory, key, upload_id)
        except UploadNotFound:
            return
        if record["key"] != key:
            return
        doomed = self._uploads / f"{TMP_PREFIX}abort-{upload_id}"
        with self._os_errors("abort_multipart_upload", key):
            try:
                os.rename(directory, doomed)
            except FileNotFoundError:
                return
            shutil.rmtree(doomed, ignore_errors=True)
            _fsync_dir(self._uploads)

    def list_multipart_uploads(self, prefix: str = "") -> builtins.list[MultipartUploadInfo]:
        uploads: builtins.list[MultipartUploadInfo] = []
        with self._os_errors("list_multipart_uploads", prefix):
            try:
                names = os.listdir(self._uploads)
            except FileNotFoundError:
                return []
            for name in names:
                if not _UPLOAD_ID.match(name):
                    continue
                try:
                    record = self._upload_record(self._uploads / name, None, name)
                except UploadNotFound:
                    continue  # completed or aborted meanwhile
                if record["key"].startswith(prefix):
                    uploads.append(
                        MultipartUploadInfo(
                            key=record["key"],
                            upload_id=name,
                            initiated=datetime.fromisoformat(record["initiated"]),
                        )
                    )
        uploads.sort(key=lambda u: (u.key, u.initiated or datetime.min, u.upload_id))
        return uploads

    # --- crash leftovers ---------------------------------------------------------------------
    def list_temporaries(self) -> builtins.list[ObjectInfo]:
        """Leftovers of writes, uploads and completes killed mid-way (``.tmp-*`` files and
        directories, anywhere under the root): invisible to :meth:`list`, found here so that
        ``objects orphans``/``gc`` can reclaim their space. ``key`` is the path relative to the
        root; ``last_modified`` lets callers keep young ones (an operation still running)."""
        found: builtins.list[ObjectInfo] = []
        with self._os_errors("list_temporaries", ""):
            for dirpath, dirnames, filenames in os.walk(self._root):
                base = Path(dirpath)
                for name in [*filenames, *dirnames]:
                    if not name.startswith(TMP_PREFIX):
                        continue
                    path = base / name
                    try:
                        st = os.lstat(path)
                    except FileNotFoundError:
                        continue
                    size = st.st_size
                    if path.is_dir():
                        size = sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
                    found.append(
                        ObjectInfo(
                            key=path.relative_to(self._root).as_posix(),
                            size=size,
                            last_modified=_mtime(st),
                        )
                    )
                dirnames[:] = [d for d in dirnames if not d.startswith(TMP_PREFIX)]
        found.sort(key=lambda i: i.key)
        return found

    def remove_temporary(self, key: str) -> None:
        """Delete one leftover named by :meth:`list_temporaries` (nothing else)."""
        segments = key.split("/")
        if (
            not segments[-1].startswith(TMP_PREFIX)
            or any(s in ("", ".", "..") for s in segments)
            or "\\" in key
            or "\x00" in key
        ):
            raise InvalidStoreKey(f"{key!r} is not a temporary file of this store")
        path = self._root.joinpath(*segments)
        if self._root not in path.parents:
            raise InvalidStoreKey(f"{key!r} is outside the store")
        with self._os_errors("remove_temporary", key):
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
            else:
                with suppress(FileNotFoundError):
                    os.unlink(path)

    # --- paths ----------------------------------------------------------------------------
    def _path(self, key: str) -> Path:
        """The file of ``key``; refuses keys that are invalid, reserved or lead outside."""
        check_key(key)
        segments = key.split("/")
        if segments[0] == UPLOADS_DIR:
            raise InvalidStoreKey(f"object key {key!r} is in the reserved {UPLOADS_DIR} directory")
        if any(s.startswith(TMP_PREFIX) for s in segments):
            raise InvalidStoreKey(f"object key {key!r} uses the reserved {TMP_PREFIX!r} prefix")
        path = self._root.joinpath(*segments)
        if len(segments) > 1:
            real_parent = os.path.realpath(path.parent)
            if real_parent != self._real_root and not real_parent.startswith(
                self._real_root + os.sep
            ):
                raise InvalidStoreKey(f"object key {key!r} leads outside the store")
        return path

    def _show(self, key: str) -> str:
        return f"{self.url}/{key}"

    def _no_upload(self, op: str, key: str, upload_id: str) -> str:
        return f"{op} {self._show(key)}: upload {upload_id[:32]!r} does not exist"

    @contextmanager
    def _os_errors(self, op: str, key: str) -> Iterator[None]:
        """OSError -> the error tree (permission -> AccessDenied, the rest StoreError)."""
        try:
            yield
        except PermissionError as exc:
            raise AccessDenied(f"{op} {self._show(key)}: {exc.strerror}") from exc
        except OSError as exc:
            if exc.errno in (errno.ENOTDIR, errno.EISDIR, errno.EEXIST):
                raise StoreError(
                    f"{op} {self._show(key)}: key conflicts with an existing object or key prefix"
                ) from exc
            raise StoreError(f"{op} {self._show(key)}: {exc.strerror or exc}") from exc

    @contextmanager
    def _open(self, key: str, op: str) -> Iterator[tuple[BinaryIO, dict[str, str], int]]:
        path = self._path(key)
        try:
            # O_NOFOLLOW: a symlink planted in the root is not followed out of it
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            raise ObjectNotFound(f"{op} {self._show(key)}: no such object") from None
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise InvalidStoreKey(f"{op} {self._show(key)}: is a symbolic link") from None
            if isinstance(exc, PermissionError):
                raise AccessDenied(f"{op} {self._show(key)}: {exc.strerror}") from exc
            raise StoreError(f"{op} {self._show(key)}: {exc.strerror or exc}") from exc
        if stat.S_ISDIR(os.fstat(fd).st_mode):  # a key prefix, not an object
            os.close(fd)
            raise ObjectNotFound(f"{op} {self._show(key)}: no such object")
        f = os.fdopen(fd, "rb")
        with f, self._os_errors(op, key):
            meta, offset = _read_header(f, self._show(key))
            yield f, meta, offset

    # --- writing --------------------------------------------------------------------------
    def _makedirs(self, directory: Path) -> None:
        """Create ``directory`` (inside the root) and fsync each new entry's parent."""
        rel = directory.relative_to(self._root)
        current = self._root
        for part in rel.parts:
            current = current / part
            try:
                os.mkdir(current)
            except FileExistsError:
                if not current.is_dir():
                    raise NotADirectoryError(
                        errno.ENOTDIR, "not a directory", str(current)
                    ) from None
                continue
            _fsync_dir(current.parent)

    def _write_atomic(
        self,
        target: Path,
        chunks: Iterable[Buffer],
        *,
        exclusive: bool,
        key: str,
        make_dirs: bool = True,
    ) -> None:
        """Write ``chunks`` to ``target`` all at once or not at all."""
        parent = target.parent
        if target.is_dir():
            raise IsADirectoryError(errno.EISDIR, "is a directory", str(target))
        for attempt in range(5):
            if make_dirs:
                self._makedirs(parent)
            tmp = parent / f"{TMP_PREFIX}{uuid.uuid4().hex}"
            try:
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
                break
            except FileNotFoundError:
                # a concurrent delete pruned the (empty) directory; make it again
                if not make_dirs or attempt == 4:
                    raise
        try:
            with os.fdopen(fd, "wb") as f:
                for chunk in chunks:
                    f.write(chunk)
                f.flush()
                os.fsync(f.fileno())
            if exclusive:
                try:
                    os.link(tmp, target)
                except FileExistsError:
                    raise PreconditionFailed(
                        f"put {self._show(key)}: object exists (if_none_match)"
                    ) from None
                finally:
                    os.unlink(tmp)
            else:
                os.replace(tmp, target)
            _fsync_dir(parent)
        except BaseException:
            with suppress(FileNotFoundError):
                os.unlink(tmp)
            raise

    def _prune_dirs(self, directory: Path) -> None:
        """Remove now-empty directories between ``directory`` and the root."""
        while directory != self._root and self._root in directory.parents:
            try:
                os.rmdir(directory)
            except OSError:
                return
            directory = directory.parent

    # --- reading helpers ------------------------------------------------------------------
    def _scan(self, directory: Path, rel: str, prefix: str, out: builtins.list[ObjectInfo]) -> None:
        try:
            entries = builtins.list(os.scandir(directory))
        except (FileNotFoundError, NotADirectoryError):
            return
        for entry in entries:
            name = entry.name
            if name.startswith(TMP_PREFIX) or (not rel and name == UPLOADS_DIR):
                continue
            key = f"{rel}{name}"
            if entry.is_dir(follow_symlinks=False):
                sub = key + "/"
                if sub.startswith(prefix) or prefix.startswith(sub):
                    self._scan(Path(entry.path), sub, prefix, out)
            elif entry.is_file(follow_symlinks=False) and key.startswith(prefix):
                info = self._info(Path(entry.path), key)
                if info is not None:
                    out.append(info)

    def _info(self, path: Path, key: str) -> ObjectInfo | None:
        try:
            with open(path, "rb") as f:
                meta, offset = _read_header(f, self._show(key))
                st = os.fstat(f.fileno())
        except FileNotFoundError:
            return None  # deleted meanwhile
        except StoreError as exc:
            log.warning(
                "skipping a file that is not a stored object",
                store=self.url,
                key=key,
                error=str(exc),
            )
            return None
        return ObjectInfo(
            key=key, size=st.st_size - offset, metadata=meta, last_modified=_mtime(st)
        )

    def _upload_dir(self, key: str, upload_id: str) -> Path:
        self._path(key)
        if not _UPLOAD_ID.match(upload_id or ""):
            raise UploadNotFound(self._no_upload("upload", key, upload_id))
        directory = self._uploads / upload_id
        self._upload_record(directory, key, upload_id)
        return directory

    def _upload_record(self, directory: Path, key: str | None, upload_id: str) -> dict[str, Any]:
        """The upload's ``upload.json`` (``key``, ``metadata``, ``initiated``); checks the key."""
        try:
            with open(directory / _UPLOAD_FILE, "rb") as f:
                record = json.loads(f.read().decode("utf-8"))
        except (FileNotFoundError, NotADirectoryError):
            raise UploadNotFound(self._no_upload("upload", key or "", upload_id)) from None
        except (OSError, ValueError) as exc:
            raise StoreError(f"upload {upload_id}: unreadable record: {exc}") from exc
        if key is not None and record.get("key") != key:
            raise UploadNotFound(self._no_upload("upload", key, upload_id))
        return record  # type: ignore[no-any-return]

    def _assembled(
        self, directory: Path, parts: Sequence[UploadedPart], key: str
    ) -> Iterator[bytes]:
        """Check every listed part (exists, ETag and CRC32C match), then yield their bytes in
        order, in chunks."""
        files: builtins.list[Path] = []
        for part in parts:
            path = directory / _PART_FILE.format(part.part_number)
            crc = 0
            try:
                with open(path, "rb") as f:
                    while chunk := f.read(_COPY_CHUNK):
                        crc = crc32c_lib.crc32c(chunk, crc)
            except FileNotFoundError:
                raise StoreError(
                    f"complete {self._show(key)}: InvalidPart, part "
                    f"{part.part_number} was not uploaded"
                ) from None
            if part.etag.strip('"') != f"{crc:08x}" or part.crc32c not in (None, crc):
                raise StoreError(
                    f"complete {self._show(key)}: InvalidPart, part "
                    f"{part.part_number} does not match its ETag/CRC32C"
                )
            files.append(path)
        return self._chunks(files)

    @staticmethod
    def _chunks(files: Sequence[Path]) -> Iterator[bytes]:
        for path in files:
            with open(path, "rb") as f:
                while chunk := f.read(_COPY_CHUNK):
                    yield chunk


class _LocalRangeReader:
    """``open_range`` of the local store: reads the open file (a later replacement of the
    object by rename does not change what this reader returns)."""

    def __init__(self, f: BinaryIO, size: int, length: int, closer: ExitStack) -> None:
        self._f = f
        self._size = size
        self._left = length
        self._closer = closer

    @property
    def size(self) -> int:
        return self._size

    def read(self, n: int) -> bytes:
        if n <= 0 or self._left <= 0:
            return b""
        try:
            data = self._f.read(min(n, self._left))
        except (OSError, ValueError) as exc:
            raise StoreError(f"open_range: read failed ({exc})") from exc
        if not data:
            raise StoreError(f"open_range: the object ended {self._left} bytes early")
        self._left -= len(data)
        return data

    def close(self) -> None:
        self._left = 0
        with suppress(OSError):
            self._closer.close()
