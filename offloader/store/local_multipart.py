"""Multipart uploads of the local store, emulated on disk as S3 does them, and the crash
leftovers (``.tmp-*``) that ``objects orphans``/``gc`` reclaim.

An upload lives under ``<root>/.uploads/<upload id>/`` (``upload.json`` with the key and
metadata, and ``part-NNNNN`` files); completing it concatenates the parts in part-number order
into a temporary file and renames it into place. One completer (or aborter) wins the rename of
the upload directory.
"""

from __future__ import annotations

import builtins
import itertools
import json
import os
import re
import shutil
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import suppress
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import crc32c as crc32c_lib

from offloader.errors import (
    InvalidStoreKey,
    StoreError,
    UploadNotFound,
)
from offloader.store.base import (
    Buffer,
    MultipartUploadInfo,
    ObjectInfo,
    UploadedPart,
)
from offloader.store.local_files import (
    TMP_PREFIX,
    LocalFiles,
    encode_header,
    fsync_dir,
    mtime,
)
from offloader.store.parts import check_part_number, ordered_parts

__all__ = ["LocalMultipart"]

_UPLOAD_ID = re.compile(r"^[0-9a-f]{32}$")
_PART_FILE = "part-{:05d}"
_UPLOAD_FILE = "upload.json"
_COPY_CHUNK = 1024 * 1024


class LocalMultipart(LocalFiles):
    """S3's multipart calls and the crash-leftover audit, over :class:`LocalFiles`."""

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
            fsync_dir(staging)
            os.rename(staging, self._uploads / upload_id)
            fsync_dir(self._uploads)
        return upload_id

    def upload_part(
        self, key: str, upload_id: str, part_number: int, data: Buffer, crc32c: int
    ) -> UploadedPart:
        check_part_number(part_number)
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
        ordered = ordered_parts(parts, self._show(key))
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
                    itertools.chain([encode_header(metadata)], chunks),
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
            fsync_dir(self._uploads)

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
                            last_modified=mtime(st),
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

    def _no_upload(self, op: str, key: str, upload_id: str) -> str:
        return f"{op} {self._show(key)}: upload {upload_id[:32]!r} does not exist"

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
