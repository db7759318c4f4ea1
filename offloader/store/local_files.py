"""The file-level half of the local store: the object file format (header + bytes), atomic
writes (temporary file, fsync, rename or link, fsync of the directory), key-to-path mapping
with its reserved names, and OSError translation. :class:`LocalFiles` is the base of
:class:`~offloader.store.local_multipart.LocalMultipart` and
:class:`~offloader.store.local.LocalObjectStore` (the on-disk layout is described there).
"""

from __future__ import annotations

import builtins
import errno
import os
import stat
import uuid
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager, suppress
from datetime import datetime, timezone
from pathlib import Path
from typing import BinaryIO

from formats.errors import FormatError, MetadataTooLargeError
from formats.local_object import (
    LOCAL_HEADER,
    decode_local_metadata,
    encode_local_header,
    local_metadata_length,
)
from offloader.errors import (
    AccessDenied,
    InvalidStoreKey,
    ObjectNotFound,
    PreconditionFailed,
    StoreError,
)
from offloader.logs import get_logger
from offloader.store.base import (
    Buffer,
    ObjectInfo,
)
from offloader.store.keycheck import check_key

__all__ = ["TMP_PREFIX", "UPLOADS_DIR", "LocalFiles"]

log = get_logger("offloader.store.local")

#: the hidden directory (directly under the root) that holds incomplete multipart uploads
UPLOADS_DIR = ".uploads"
#: name prefix of temporary files and directories (never visible as objects)
TMP_PREFIX = ".tmp-"


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def encode_header(metadata: Mapping[str, str]) -> bytes:
    """The container header (:mod:`formats.local_object`) of an object with ``metadata``."""
    try:
        return encode_local_header(metadata)
    except MetadataTooLargeError as exc:
        raise StoreError(str(exc)) from None


def read_header(f: BinaryIO, shown: str) -> tuple[dict[str, str], int]:
    """The metadata and the offset where the object's bytes start."""
    try:
        n = local_metadata_length(f.read(LOCAL_HEADER.size))
        raw = f.read(n)
        return decode_local_metadata(raw, n), LOCAL_HEADER.size + n
    except FormatError as exc:
        raise StoreError(f"{shown}: not an object of a local store ({exc})") from None


def not_a_directory(path: Path) -> Path | None:
    """``path`` or its nearest existing ancestor when that is not a directory, else None."""
    for candidate in (path, *path.parents):
        if candidate.exists() or candidate.is_symlink():
            return None if candidate.is_dir() else candidate
    return None


def check_root(path: Path, *, create: bool) -> None:
    """Make sure the store root ``path`` is a directory (creating it if ``create``)."""
    blocker = not_a_directory(path)
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


def mtime(st: os.stat_result) -> datetime:
    return datetime.fromtimestamp(st.st_mtime, tz=timezone.utc)


class LocalFiles:
    """Paths, atomic writes and error translation under one store root."""

    _root: Path
    _real_root: str
    _uploads: Path

    @property
    def url(self) -> str:
        return self._root.as_uri()

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
            meta, offset = read_header(f, self._show(key))
            yield f, meta, offset

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
            fsync_dir(current.parent)

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
            fsync_dir(parent)
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
                meta, offset = read_header(f, self._show(key))
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
        return ObjectInfo(key=key, size=st.st_size - offset, metadata=meta, last_modified=mtime(st))
