"""The local ledger store (the BookKeeper stand-in): ledger files of topics under one home dir.

:class:`LedgerStore` owns the lifecycle of ledger files: creating them (the caller, the managed
ledger, allocates ledger ids; a duplicate id is refused), reopening a ledger after a crash
(recovery: keep every valid record, truncate a torn tail, report what was dropped, refuse
corruption), closing, opening closed ledgers for reading, listing and deleting. File layout is
in :mod:`~offloader.ledgers.fileformat`, paths in :mod:`~offloader.ledgers.paths`.

A new ledger file is born complete: its header is written and fsynced in a temporary file that
is then hard-linked into place (which fails if the id exists), and the directory is fsynced.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import time
import uuid
from array import array
from collections.abc import Callable
from pathlib import Path

from offloader.errors import (
    CorruptLedgerError,
    LedgerClosedError,
    LedgerExistsError,
    LedgerNotClosedError,
    LedgerNotFound,
    LedgerStoreError,
)
from offloader.ledgers.fileformat import HEADER_SIZE, Header, encode_header
from offloader.ledgers.info import FSYNC_POLICIES, FsyncPolicy, LedgerInfo, RecoveryReport
from offloader.ledgers.paths import (
    SUFFIX,
    TMP_SUFFIX,
    ledger_file,
    parse_ledger_file,
    topic_dir,
)
from offloader.ledgers.reader import ClosedLedgerReader
from offloader.ledgers.scan import LedgerLayout, read_closed, scan
from offloader.ledgers.writer import LedgerWriter
from offloader.naming import TopicName

DEFAULT_BUFFER_BYTES = 1024 * 1024


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class LedgerStore:
    """Ledger files under ``<home>/ledgers``."""

    def __init__(
        self,
        home: str | os.PathLike[str],
        *,
        fsync: FsyncPolicy = "always",
        buffer_bytes: int = DEFAULT_BUFFER_BYTES,
        clock_ms: Callable[[], int] = _now_ms,
    ) -> None:
        if fsync not in FSYNC_POLICIES:
            raise LedgerStoreError(f"fsync policy {fsync!r} is not one of {FSYNC_POLICIES}")
        if buffer_bytes < 1:
            raise LedgerStoreError("buffer_bytes must be positive")
        self.root = Path(home) / "ledgers"
        self.fsync: FsyncPolicy = fsync
        self.buffer_bytes = buffer_bytes
        self._clock_ms = clock_ms

    # --- paths -----------------------------------------------------------------------------
    def topic_dir(self, topic: TopicName | str) -> Path:
        return topic_dir(self.root, TopicName.of(topic))

    def ledger_path(self, topic: TopicName | str, ledger_id: int) -> Path:
        return ledger_file(self.root, TopicName.of(topic), ledger_id)

    # --- writing ---------------------------------------------------------------------------
    def create_ledger(
        self, topic: TopicName | str, ledger_id: int, *, fsync: FsyncPolicy | None = None
    ) -> LedgerWriter:
        """Create an empty open ledger; :class:`LedgerExistsError` if the id is taken."""
        path = self.ledger_path(topic, ledger_id)
        self._make_dirs(path.parent)
        tmp = path.with_name(f"{path.name}.{uuid.uuid4().hex}{TMP_SUFFIX}")
        ctime = self._clock_ms()
        fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            os.pwrite(fd, encode_header(ledger_id, ctime), 0)
            os.fsync(fd)
            try:
                os.link(tmp, path)
            except FileExistsError:
                raise LedgerExistsError(f"ledger {ledger_id} already exists: {path}") from None
        except BaseException:
            os.close(fd)
            raise
        finally:
            tmp.unlink(missing_ok=True)
        _fsync_dir(path.parent)
        layout = LedgerLayout(Header(ledger_id, ctime), array("Q"), HEADER_SIZE, 0, None, 0)
        return self._writer(fd, path, layout, fsync)

    def open_for_append(
        self, topic: TopicName | str, ledger_id: int, *, fsync: FsyncPolicy | None = None
    ) -> LedgerWriter:
        """Reopen an open ledger after a restart, recovering it; ``writer.recovery`` says how."""
        path = self.ledger_path(topic, ledger_id)
        fd = self._open_locked(path, ledger_id)
        try:
            if read_closed(fd, str(path)) is not None:
                raise LedgerClosedError(f"ledger {ledger_id} is closed: {path}")
            layout, report = self._recover_open(fd, path, ledger_id)
        except BaseException:
            os.close(fd)
            raise
        writer = self._writer(fd, path, layout, fsync)
        writer.recovery = report
        return writer

    def recover(self, topic: TopicName | str, ledger_id: int) -> RecoveryReport:
        """Recover and close a ledger left open by a crash (a no-op on a closed ledger)."""
        path = self.ledger_path(topic, ledger_id)
        fd = self._open_locked(path, ledger_id)
        try:
            closed = read_closed(fd, str(path))
            if closed is not None:
                self._check_id(closed, path, ledger_id)
                os.close(fd)
                return RecoveryReport(ledger_id, len(closed.offsets), closed.total_length, 0, True)
            layout, report = self._recover_open(fd, path, ledger_id)
        except BaseException:
            os.close(fd)
            raise
        self._writer(fd, path, layout, "always").close()
        return report

    # --- reading ---------------------------------------------------------------------------
    def open_reader(self, topic: TopicName | str, ledger_id: int) -> ClosedLedgerReader:
        """A reader of a closed ledger; :class:`LedgerNotClosedError` if it is still open."""
        path = self.ledger_path(topic, ledger_id)
        fd = self._open(path, ledger_id, os.O_RDONLY)
        try:
            layout = read_closed(fd, str(path))
            if layout is None:
                raise LedgerNotClosedError(
                    f"ledger {ledger_id} has no valid close footer (open, or its close was torn); "
                    f"recover it first: {path}"
                )
            self._check_id(layout, path, ledger_id)
            return ClosedLedgerReader(fd, str(path), layout)
        except BaseException:
            os.close(fd)
            raise

    def info(self, topic: TopicName | str, ledger_id: int) -> LedgerInfo:
        """What the ledger holds (a read-only scan if it is not closed; nothing is changed)."""
        path = self.ledger_path(topic, ledger_id)
        fd = self._open(path, ledger_id, os.O_RDONLY)
        try:
            layout = read_closed(fd, str(path)) or scan(fd, str(path))
            self._check_id(layout, path, ledger_id)
            size = os.fstat(fd).st_size
        finally:
            os.close(fd)
        closed_ms = None if layout.footer is None else layout.footer.closed_ms
        return LedgerInfo(
            ledger_id,
            len(layout.offsets),
            layout.total_length,
            layout.header.ctime_ms,
            closed_ms,
            size,
        )

    def list_ledgers(self, topic: TopicName | str) -> list[int]:
        """Ids of the topic's ledger files, ascending (empty if the topic has none)."""
        try:
            names = os.listdir(self.topic_dir(topic))
        except FileNotFoundError:
            return []
        return sorted(i for i in map(parse_ledger_file, names) if i is not None)

    # --- deleting --------------------------------------------------------------------------
    def delete_ledger(self, topic: TopicName | str, ledger_id: int) -> bool:
        """Delete the ledger file; False if it did not exist (idempotent)."""
        path = self.ledger_path(topic, ledger_id)
        try:
            path.unlink()
        except FileNotFoundError:
            return False
        _fsync_dir(path.parent)
        return True

    def delete_topic(self, topic: TopicName | str) -> int:
        """Delete every ledger of the topic and its directory; the number of ledgers deleted."""
        directory = self.topic_dir(topic)
        try:
            names = os.listdir(directory)
        except FileNotFoundError:
            return 0
        deleted = 0
        for name in names:
            if parse_ledger_file(name) is not None or (
                name.endswith(TMP_SUFFIX) and SUFFIX in name
            ):
                with contextlib.suppress(FileNotFoundError):
                    (directory / name).unlink()
                    deleted += name.endswith(SUFFIX)
        for level in (directory, directory.parent, directory.parent.parent):
            try:
                level.rmdir()
            except OSError as exc:
                if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOENT):
                    raise LedgerStoreError(f"removing {level} failed: {exc}") from exc
                break
        if self.root.exists():
            _fsync_dir(self.root)
        return deleted

    # --- internals -------------------------------------------------------------------------
    def _writer(
        self, fd: int, path: Path, layout: LedgerLayout, fsync: FsyncPolicy | None
    ) -> LedgerWriter:
        policy = fsync or self.fsync
        if policy not in FSYNC_POLICIES:
            raise LedgerStoreError(f"fsync policy {policy!r} is not one of {FSYNC_POLICIES}")
        return LedgerWriter(
            fd,
            str(path),
            layout,
            fsync=policy,
            buffer_bytes=self.buffer_bytes,
            clock_ms=self._clock_ms,
        )

    def _make_dirs(self, directory: Path) -> None:
        missing = []
        level = directory
        while not level.exists():
            missing.append(level)
            level = level.parent
        if not missing:
            return
        directory.mkdir(parents=True, exist_ok=True)
        for created in missing:
            _fsync_dir(created.parent)

    def _open(self, path: Path, ledger_id: int, flags: int) -> int:
        try:
            return os.open(path, flags | os.O_CLOEXEC)
        except FileNotFoundError:
            raise LedgerNotFound(f"ledger {ledger_id} does not exist: {path}") from None

    def _open_locked(self, path: Path, ledger_id: int) -> int:
        fd = self._open(path, ledger_id, os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise LedgerStoreError(
                f"ledger {ledger_id} is open for writing elsewhere: {path}"
            ) from None
        return fd

    @staticmethod
    def _check_id(layout: LedgerLayout, path: Path, ledger_id: int) -> None:
        if layout.header.ledger_id != ledger_id:
            raise CorruptLedgerError(
                f"header says ledger {layout.header.ledger_id}, file name says {ledger_id}",
                path=str(path),
                offset=0,
            )

    def _recover_open(
        self, fd: int, path: Path, ledger_id: int
    ) -> tuple[LedgerLayout, RecoveryReport]:
        layout = scan(fd, str(path))
        self._check_id(layout, path, ledger_id)
        if layout.footer is not None:  # valid trailer the fast path missed: treat as closed
            raise LedgerClosedError(f"ledger {ledger_id} is closed: {path}")
        if layout.torn_bytes:
            os.ftruncate(fd, layout.data_end)
            os.fsync(fd)
        report = RecoveryReport(
            ledger_id, len(layout.offsets), layout.total_length, layout.torn_bytes, False
        )
        return layout, report
