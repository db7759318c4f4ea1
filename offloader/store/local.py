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
import os
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, suppress
from pathlib import Path
from types import TracebackType
from typing import BinaryIO

from offloader.errors import (
    StoreError,
)
from offloader.logs import get_logger
from offloader.store.base import (
    Buffer,
    GetResult,
    ObjectInfo,
    RangeReader,
)
from offloader.store.local_files import (
    TMP_PREFIX,
    UPLOADS_DIR,
    check_root,
    encode_header,
    fsync_dir,
    mtime,
)
from offloader.store.local_multipart import LocalMultipart

__all__ = ["TMP_PREFIX", "UPLOADS_DIR", "LocalObjectStore"]


log = get_logger(__name__)


class LocalObjectStore(LocalMultipart):
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
        check_root(path, create=create)
        self._root = path
        self._real_root = os.path.realpath(path)
        self._uploads = path / UPLOADS_DIR

    # --- properties -----------------------------------------------------------------------
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
                target, [encode_header(metadata), data], exclusive=if_none_match, key=key
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
            f, meta, offset = stack.enter_context(self._open(key, "open_range"))
            size = self._seek_range("open_range", key, f, offset, start, end)
            reader = _LocalRangeReader(f, size, min(end, size) - start, stack.pop_all(), meta)
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
        return ObjectInfo(key=key, size=st.st_size - offset, metadata=meta, last_modified=mtime(st))

    def delete(self, key: str) -> None:
        path = self._path(key)
        with self._os_errors("delete", key):
            try:
                os.unlink(path)
            except (FileNotFoundError, NotADirectoryError):
                return
            except IsADirectoryError:
                return  # a "directory" is a key prefix, not an object
            fsync_dir(path.parent)
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

    # --- crash leftovers ---------------------------------------------------------------------

    # --- paths ----------------------------------------------------------------------------

    # --- writing --------------------------------------------------------------------------

    # --- reading helpers ------------------------------------------------------------------


class _LocalRangeReader:
    """``open_range`` of the local store: reads the open file (a later replacement of the
    object by rename does not change what this reader returns)."""

    def __init__(
        self,
        f: BinaryIO,
        size: int,
        length: int,
        closer: ExitStack,
        metadata: Mapping[str, str] | None = None,
    ) -> None:
        self._f = f
        self._size = size
        self._left = length
        self._closer = closer
        self._metadata = dict(metadata or {})

    @property
    def size(self) -> int:
        return self._size

    @property
    def metadata(self) -> Mapping[str, str]:
        return self._metadata

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

    def readinto(self, buf: memoryview) -> int:
        """Like :meth:`read`, into ``buf`` (up to ``len(buf)`` bytes; 0 once consumed)."""
        n = min(len(buf), self._left)
        if n <= 0:
            return 0
        into = getattr(self._f, "readinto", None)
        try:
            if into is not None:
                got = int(into(buf[:n]) or 0)
            else:
                data = self._f.read(n)
                got = len(data)
                buf[:got] = data
        except (OSError, ValueError) as exc:
            raise StoreError(f"open_range: read failed ({exc})") from exc
        if not got:
            raise StoreError(f"open_range: the object ended {self._left} bytes early")
        self._left -= got
        return got

    def close(self) -> None:
        self._left = 0
        with suppress(OSError):
            self._closer.close()
