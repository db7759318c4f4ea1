"""The SQLite side of the metadata store: schema migrations, connection, transactions, errors.

This module owns the database file: the versioned schema (``MIGRATIONS``, one tuple of
statements per version, recorded in ``PRAGMA user_version``), how a connection is opened (WAL,
``synchronous=FULL``, foreign keys, a busy timeout), the transaction helpers (``BEGIN IMMEDIATE``
for every change, so read-modify-write is atomic across processes), and the translation of
``sqlite3`` exceptions (and of the ``OverflowError`` sqlite3 raises for an integer beyond signed
64 bits) into :class:`~offloader.errors.MetadataError` subclasses. It also gives
the shared statements their executor (:class:`SqliteExecutor`). With the other modules of
:mod:`offloader.metadata.sqlite` it is the only code that imports ``sqlite3``.

Migrations only ever append: opening an older database applies the missing steps in one
transaction; a database from a newer version (or not ours) is refused with SchemaVersionError.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

from offloader.errors import AlreadyExists, MetadataBusy, MetadataError, SchemaVersionError
from offloader.metadata import ledger_schema as ledgers
from offloader.metadata.export_schema import EXPORT_TABLES
from offloader.metadata.kafka_schema import (
    KAFKA_CHECKS_COLUMNS,
    KAFKA_ONE_COPY_TABLES,
    KAFKA_TABLES,
    KAFKA_TRANSFORM_TABLES,
)
from offloader.metadata.rules import SQLITE, Dialect, Row
from offloader.metadata.statements import Transacting

#: ``PRAGMA application_id`` of our databases ("LOFF"), to tell them from other SQLite files
APPLICATION_ID = 0x4C4F4646
DEFAULT_BUSY_TIMEOUT_S = 10.0

#: version N of the schema is reached by applying MIGRATIONS[0..N-1] in order
MIGRATIONS: tuple[tuple[str, ...], ...] = (
    ledgers.LEDGER_TABLES,
    ledgers.STATUS_AND_LOCK_TABLES,
    ledgers.TOPIC_POLICY_TABLES,
    ledgers.TRANSFORM_COLUMNS,
    KAFKA_TABLES,
    EXPORT_TABLES,
    KAFKA_TRANSFORM_TABLES,
    KAFKA_ONE_COPY_TABLES,
    KAFKA_CHECKS_COLUMNS,
)
SCHEMA_VERSION = len(MIGRATIONS)


def translate_error(exc: sqlite3.Error, path: Path, busy_timeout_s: float) -> MetadataError:
    """The MetadataError for a sqlite3 exception (the message names the file, never data)."""
    message = str(exc)
    errorname = getattr(exc, "sqlite_errorname", "")
    if isinstance(exc, sqlite3.IntegrityError) and (
        "UNIQUE" in message or "PRIMARY KEY" in message
    ):
        return AlreadyExists(f"metadata record already exists ({message})")
    if errorname in ("SQLITE_BUSY", "SQLITE_LOCKED") or "database is locked" in message:
        return MetadataBusy(
            f"metadata database {path} stayed locked by another process for more than "
            f"{busy_timeout_s:g} s; retry, or look for a stuck offloader process"
        )
    if isinstance(exc, sqlite3.IntegrityError):
        return MetadataError(f"metadata constraint violated in {path}: {message}")
    if errorname.startswith("SQLITE_READONLY") or "readonly database" in message:
        return MetadataError(
            f"metadata database {path} is read-only (a read-only filesystem, or no write "
            "permission): this command needs to change it"
        )
    return MetadataError(f"metadata database {path}: {message}")


def value_error(exc: BaseException, where: str, *, writing: bool) -> MetadataError:
    """The MetadataError for a value the driver cannot send: an integer beyond signed 64 bits
    (sqlite3's ``OverflowError``), a string that is not UTF-8 (a name holding bytes the command
    line could not decode: ``UnicodeEncodeError``). ``writing``: the transaction was a change
    (it was rolled back), else a read."""
    outcome = "nothing was changed" if writing else "nothing was read"
    if isinstance(exc, UnicodeEncodeError):
        return MetadataError(
            f"metadata database {where}: a name or value holds bytes that are not UTF-8 text "
            f"(position {exc.start}); {outcome}"
        )
    use = "store" if writing else "look up"
    return MetadataError(
        f"metadata database {where}: a value is too large to {use} (integers are signed "
        f"64-bit); {outcome}"
    )


class SqliteExecutor:
    """The :class:`~offloader.metadata.statements.Executor` of one SQLite transaction."""

    dialect: Dialect = SQLITE

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def one(self, sql: str, args: Sequence[object] = ()) -> sqlite3.Row | None:
        row: sqlite3.Row | None = self.conn.execute(sql, tuple(args)).fetchone()
        return row

    def all(self, sql: str, args: Sequence[object] = ()) -> list[Row]:
        return self.conn.execute(sql, tuple(args)).fetchall()

    def run(self, sql: str, args: Sequence[object] = ()) -> int:
        return self.conn.execute(sql, tuple(args)).rowcount


class Database(Transacting[sqlite3.Connection]):
    """One connection to the metadata file, shared by the threads of one process."""

    def __init__(
        self,
        path: Path,
        *,
        busy_timeout_s: float = DEFAULT_BUSY_TIMEOUT_S,
        migrations: Sequence[Sequence[str]] = MIGRATIONS,
        read_only: bool = False,
    ) -> None:
        """``read_only``: open an existing file for reading only (``mode=ro``; on a directory
        that cannot be written, where SQLite cannot create the WAL's shared-memory file, as
        ``immutable``): no WAL switch, no migration (an older schema is refused)."""
        self.path = path
        self.busy_timeout_s = busy_timeout_s
        self.read_only = read_only
        self._lock = threading.RLock()
        try:
            if read_only:
                self._conn: sqlite3.Connection | None = self._connect_read_only(path)
            else:
                self._conn = sqlite3.connect(
                    str(path),
                    timeout=busy_timeout_s,
                    isolation_level=None,
                    check_same_thread=False,
                )
        except sqlite3.Error as exc:
            raise translate_error(exc, path, busy_timeout_s) from exc
        try:
            conn = self._conn
            conn.row_factory = sqlite3.Row
            conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_s * 1000)}")
            conn.execute("PRAGMA foreign_keys = ON")
            if read_only:
                with self.read():
                    version = self._check_version(len(migrations))
                if version != len(migrations):
                    raise SchemaVersionError(
                        f"metadata database {path} has schema version {version}, older than "
                        f"{len(migrations)}, and is opened read-only: run a command that writes "
                        "(on a writable home) once to upgrade it"
                    )
                return
            self._enable_wal(conn)
            conn.execute("PRAGMA synchronous = FULL")
            self._migrate(migrations)
        except sqlite3.Error as exc:
            self.close()
            raise translate_error(exc, path, busy_timeout_s) from exc
        except MetadataError:
            self.close()
            raise

    def _connect_read_only(self, path: Path) -> sqlite3.Connection:
        """``mode=ro``; where that cannot open a WAL database (its directory is read-only and
        the ``-shm`` file is absent), ``immutable=1``, which is right there: nothing can
        write the file. A ``-wal`` file with changes not yet checkpointed is never ignored."""
        base = f"file:{quote(str(path.resolve()))}?mode=ro"
        conn = sqlite3.connect(
            base, uri=True, timeout=self.busy_timeout_s, isolation_level=None,
            check_same_thread=False,
        )  # fmt: skip
        try:
            conn.execute("PRAGMA user_version").fetchone()
            return conn
        except sqlite3.OperationalError:
            conn.close()
            wal = path.with_name(path.name + "-wal")
            if wal.exists() and wal.stat().st_size > 0:
                raise
        return sqlite3.connect(
            base + "&immutable=1", uri=True, timeout=self.busy_timeout_s,
            isolation_level=None, check_same_thread=False,
        )  # fmt: skip

    def _enable_wal(self, conn: sqlite3.Connection) -> None:
        """Switch to WAL (persistent in the file). Changing the journal mode does not wait on
        SQLite's busy handler, so when several processes create the file at once, retry here
        until the busy timeout."""
        deadline = time.monotonic() + self.busy_timeout_s
        delay = 0.005
        while True:
            try:
                mode = str(conn.execute("PRAGMA journal_mode").fetchone()[0]).lower()
                if mode != "wal":
                    mode = str(conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]).lower()
                break
            except sqlite3.OperationalError as exc:
                busy = translate_error(exc, self.path, self.busy_timeout_s)
                if not isinstance(busy, MetadataBusy) or time.monotonic() >= deadline:
                    raise
                time.sleep(delay)
                delay = min(2 * delay, 0.1)
        if mode != "wal":
            raise MetadataError(f"metadata database {self.path}: cannot enable WAL (got {mode})")

    @property
    def conn(self) -> sqlite3.Connection:
        if self._conn is None:
            raise MetadataError(f"metadata store {self.path} is closed")
        return self._conn

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    # --- transactions ---------------------------------------------------------------------
    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """A ``BEGIN IMMEDIATE`` transaction: committed on success, rolled back on any error."""
        with self._transaction("BEGIN IMMEDIATE") as conn:
            yield conn

    @contextmanager
    def read(self) -> Iterator[sqlite3.Connection]:
        """A read transaction: several SELECTs see one snapshot."""
        with self._transaction("BEGIN") as conn:
            yield conn

    def executor(self, handle: sqlite3.Connection) -> SqliteExecutor:
        return SqliteExecutor(handle)

    def translate(self, exc: BaseException) -> BaseException:
        if isinstance(exc, sqlite3.Error):
            return translate_error(exc, self.path, self.busy_timeout_s)
        if isinstance(exc, (OverflowError, UnicodeEncodeError)):
            return value_error(exc, str(self.path), writing=True)
        return exc

    @contextmanager
    def _transaction(self, begin: str) -> Iterator[sqlite3.Connection]:
        with self._lock:
            conn = self.conn
            try:
                conn.execute(begin)
                try:
                    yield conn
                    conn.execute("COMMIT")
                except BaseException:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    raise
            except sqlite3.Error as exc:
                raise translate_error(exc, self.path, self.busy_timeout_s) from exc
            except (OverflowError, UnicodeEncodeError) as exc:
                raise value_error(exc, str(self.path), writing=begin != "BEGIN") from exc

    # --- migrations -----------------------------------------------------------------------
    def _migrate(self, migrations: Sequence[Sequence[str]]) -> None:
        target = len(migrations)
        with self.read():  # user_version and the table count from one snapshot
            current = self._check_version(target)
        if current == target:
            return
        with self.write() as conn:
            version = self._check_version(target)  # another process may have migrated
            if version == 0:
                conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
            for step in migrations[version:]:
                for statement in step:
                    conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {target}")

    def _check_version(self, supported: int) -> int:
        conn = self.conn
        version = int(conn.execute("PRAGMA user_version").fetchone()[0])
        app_id = int(conn.execute("PRAGMA application_id").fetchone()[0])
        if version == 0:
            tables = conn.execute(
                "SELECT count(*) FROM sqlite_master WHERE type = 'table'"
            ).fetchone()[0]
            if tables:
                raise SchemaVersionError(
                    f"{self.path} is an SQLite database, but not a ledger-offloader metadata one"
                )
            return 0
        if app_id != APPLICATION_ID:
            raise SchemaVersionError(
                f"{self.path} is not a ledger-offloader metadata database "
                f"(application id {app_id:#x})"
            )
        if version > supported:
            raise SchemaVersionError(
                f"metadata database {self.path} has schema version {version}, newer than the "
                f"{supported} this ledger-offloader supports; upgrade ledger-offloader"
            )
        return version
