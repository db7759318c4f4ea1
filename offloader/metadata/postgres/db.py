"""The PostgreSQL connection of the metadata store: connect, transactions, migrations, errors.

This module owns how the PostgreSQL backend talks to the server: one ``psycopg`` connection per
store instance (autocommit mode; every operation is one explicit ``BEGIN ... COMMIT`` through
:meth:`PgDatabase.write` or :meth:`PgDatabase.read`), reconnecting when a connection the server
dropped fails at ``BEGIN`` (nothing was sent: safe to redo on a new connection) or at the next
transaction after any failure; the schema migrations of
:mod:`offloader.metadata.postgres.schema` (serialized across processes by a transaction-scoped
advisory lock); and the translation of every ``psycopg`` exception into the
:class:`~offloader.errors.MetadataError` tree. Together with the other modules of
:mod:`offloader.metadata.postgres` it is the only code that imports ``psycopg``.

Isolation levels (ARCHITECTURE.md says why): changes run at READ COMMITTED and make their
read-modify-write atomic with row locks (``SELECT ... FOR UPDATE``) or single-statement
conditional updates and upserts; reads run at REPEATABLE READ, READ ONLY, so the several SELECTs
of one call see one snapshot. Waiting for a row lock is bounded by ``lock_timeout`` (the busy
timeout): past it the change fails with MetadataBusy, as SQLite's busy timeout does.

Messages name the server as ``host:port/dbname``, never the password of the URL.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg import errors as pgerrors
from psycopg.conninfo import conninfo_to_dict
from psycopg.rows import dict_row

from offloader.errors import (
    AlreadyExists,
    ConfigError,
    MetadataBusy,
    MetadataError,
    MetadataUnavailable,
    SchemaVersionError,
)
from offloader.metadata.postgres.schema import (
    APPLICATION,
    OUR_TABLES,
    PG_MIGRATIONS,
    VERSION_TABLE,
)
from offloader.metadata.rules import POSTGRES, Dialect, Row
from offloader.metadata.statements import Transacting

DEFAULT_BUSY_TIMEOUT_S = 10.0
DEFAULT_CONNECT_TIMEOUT_S = 10
#: the advisory lock key taken while migrating ("LOFF"), with the schema name's hash
_MIGRATION_LOCK = 0x4C4F4646

Cursor = psycopg.Cursor[dict[str, Any]]
Connection = psycopg.Connection[dict[str, Any]]


def describe_url(url: str) -> str:
    """``host:port/dbname`` of a libpq URL: safe in messages and logs (no user, no password)."""
    try:
        params = conninfo_to_dict(url)
    except (psycopg.Error, UnicodeEncodeError):
        return "postgresql://(unparsable URL)"
    host = params.get("host") or "localhost"
    port = params.get("port") or "5432"
    return f"postgresql://{host}:{port}/{params.get('dbname') or ''}"


def translate_error(
    exc: BaseException, where: str, busy_timeout_s: float, *, changing: bool = False
) -> MetadataError:
    """The MetadataError for a psycopg exception (the message names the server, never data;
    the server as ``postgresql://host:port/db``, never the URL's user or password).
    ``changing``: the error ended a transaction that was making a change (rolled back, so
    the message says the change was not committed); otherwise nothing was being changed (a
    connection that could not be made, a ``BEGIN`` never sent, a read), and the message does
    not claim a change. A string the driver cannot encode (a name holding bytes that are not
    UTF-8: ``UnicodeEncodeError``) is a MetadataError too."""
    if isinstance(exc, UnicodeEncodeError):
        outcome = "nothing was changed" if changing else "nothing was read"
        return MetadataError(
            f"metadata database {where}: a name or value holds bytes that are not UTF-8 text "
            f"(position {exc.start}); {outcome}"
        )
    detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if isinstance(exc, pgerrors.UniqueViolation):
        return AlreadyExists(f"metadata record already exists ({detail})")
    if isinstance(exc, pgerrors.IntegrityConstraintViolation):
        return MetadataError(f"metadata constraint violated in {where}: {detail}")
    if isinstance(exc, pgerrors.NumericValueOutOfRange):
        use, outcome = (
            ("store", "nothing was changed") if changing else ("look up", "nothing was read")
        )
        return MetadataError(
            f"metadata database {where}: a value is too large to {use} (PostgreSQL BIGINT is "
            f"signed 64-bit); {outcome}"
        )
    if isinstance(
        exc,
        (pgerrors.LockNotAvailable, pgerrors.SerializationFailure, pgerrors.DeadlockDetected),
    ):
        return MetadataBusy(
            f"metadata database {where}: a row stayed locked by another process for more than "
            f"{busy_timeout_s:g} s (or a concurrent change conflicted); retry"
        )
    if isinstance(exc, pgerrors.ReadOnlySqlTransaction):
        return MetadataError(f"metadata database {where} is read-only: {detail}")
    if isinstance(exc, (psycopg.OperationalError, psycopg.InterfaceError)):
        if changing:
            return MetadataUnavailable(
                f"metadata server {where} is unavailable ({detail}); the change in progress "
                "was not committed: retry when the server is back"
            )
        return MetadataUnavailable(
            f"metadata server {where} is unreachable ({detail}): retry when the server is back"
        )
    return MetadataError(f"metadata database {where}: {detail}")


class PgExecutor:
    """The :class:`~offloader.metadata.statements.Executor` of one PostgreSQL transaction:
    the shared statements' ``?`` marks become ``%s``."""

    dialect: Dialect = POSTGRES

    def __init__(self, cur: Cursor) -> None:
        self.cur = cur

    def one(self, sql: str, args: Sequence[object] = ()) -> dict[str, Any] | None:
        self.cur.execute(POSTGRES.sql(sql).encode(), tuple(args))
        return self.cur.fetchone()

    def all(self, sql: str, args: Sequence[object] = ()) -> list[Row]:
        self.cur.execute(POSTGRES.sql(sql).encode(), tuple(args))
        return list(self.cur.fetchall())

    def run(self, sql: str, args: Sequence[object] = ()) -> int:
        self.cur.execute(POSTGRES.sql(sql).encode(), tuple(args))
        return self.cur.rowcount


class PgDatabase(Transacting[Cursor]):
    """One connection to the PostgreSQL metadata database, shared by the threads of a process.

    The URL is any libpq URL (``postgresql://user:pass@host:port/db?options=...``); a schema
    other than ``public`` is chosen with ``options=-csearch_path%3Dname``."""

    def __init__(
        self,
        url: str,
        *,
        busy_timeout_s: float = DEFAULT_BUSY_TIMEOUT_S,
        connect_timeout_s: int = DEFAULT_CONNECT_TIMEOUT_S,
        migrations: Sequence[Sequence[str]] = PG_MIGRATIONS,
    ) -> None:
        self.url = url
        self.where = describe_url(url)
        try:
            url.encode("utf-8")
        except UnicodeEncodeError:
            raise ConfigError(
                "the metadata store URL holds bytes that are not UTF-8 text (check --metadata)"
            ) from None
        self.busy_timeout_s = busy_timeout_s
        self.connect_timeout_s = connect_timeout_s
        self._lock = threading.RLock()
        self._closed = False
        self._conn: Connection | None = None
        with self._lock:
            self._conn = self._connect()
            try:
                self._migrate(migrations)
            except BaseException:
                self.close()
                raise

    def _connect(self) -> Connection:
        try:
            conn: Connection = psycopg.connect(
                self.url,
                autocommit=True,
                row_factory=dict_row,
                connect_timeout=self.connect_timeout_s,
                application_name="ledger-offloader",
                keepalives=1,
                keepalives_idle=10,
                keepalives_interval=5,
                keepalives_count=3,
            )
            conn.execute(f"SET lock_timeout = {int(self.busy_timeout_s * 1000)}")
        except psycopg.Error as exc:
            raise translate_error(exc, self.where, self.busy_timeout_s) from None
        return conn

    def _live(self) -> Connection:
        """The connection, reconnected first if the server closed the previous one."""
        if self._closed:
            raise MetadataError(f"metadata store {self.where} is closed")
        conn = self._conn
        if conn is None or conn.closed or conn.broken:
            if conn is not None:
                conn.close()
            self._conn = None
            self._conn = conn = self._connect()
        return conn

    def close(self) -> None:
        with self._lock:
            self._closed = True
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    # --- transactions ---------------------------------------------------------------------
    @contextmanager
    def write(self) -> Iterator[Cursor]:
        """A READ COMMITTED transaction: committed on success, rolled back on any error. The
        body takes the row locks its read-modify-write needs."""
        with self._transaction("BEGIN ISOLATION LEVEL READ COMMITTED") as cur:
            yield cur

    @contextmanager
    def read(self) -> Iterator[Cursor]:
        """A REPEATABLE READ, READ ONLY transaction: several SELECTs see one snapshot."""
        with self._transaction("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY") as cur:
            yield cur

    def executor(self, handle: Cursor) -> PgExecutor:
        return PgExecutor(handle)

    def translate(self, exc: BaseException) -> BaseException:
        if isinstance(exc, (psycopg.Error, UnicodeEncodeError)):
            return translate_error(exc, self.where, self.busy_timeout_s, changing=True)
        return exc

    def _begin(self, begin: str) -> Connection:
        """The connection, in a new transaction. A connection the server dropped while it was
        idle (a restart, a failover) fails at ``BEGIN``, before anything was sent: that one is
        replaced by a new connection once, so a change after a server restart just works."""
        for attempt in (1, 2):
            conn = self._live()
            try:
                conn.execute(begin.encode())
                return conn
            except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
                conn.close()
                if attempt == 2:
                    raise translate_error(exc, self.where, self.busy_timeout_s) from exc
            except psycopg.Error as exc:
                raise translate_error(exc, self.where, self.busy_timeout_s) from exc
        raise AssertionError("unreachable")  # pragma: no cover

    @contextmanager
    def _transaction(self, begin: str) -> Iterator[Cursor]:
        changing = "READ ONLY" not in begin
        with self._lock:
            conn = self._begin(begin)
            committing = False
            try:
                with conn.cursor() as cur:
                    yield cur
                committing = True
                conn.execute(b"COMMIT")
            except BaseException as exc:
                if not (conn.closed or conn.broken):
                    try:
                        conn.execute(b"ROLLBACK")
                    except psycopg.Error:
                        conn.close()
                if isinstance(exc, (psycopg.Error, UnicodeEncodeError)):
                    error = translate_error(exc, self.where, self.busy_timeout_s, changing=changing)
                    if isinstance(error, MetadataUnavailable) and committing:
                        error = MetadataUnavailable(
                            f"metadata server {self.where} went away while a change was being "
                            "committed: it may or may not have been recorded"
                        )
                    raise error from exc
                raise

    # --- session locks --------------------------------------------------------------------
    @contextmanager
    def session_lock(self, name: str, timeout_s: float, poll_s: float = 0.05) -> Iterator[bool]:
        """Hold the advisory lock ``name`` (of this schema) for the body, on a connection of
        its own: the server releases it when that connection ends, so a process killed with
        -9 never leaves it held. Yields False, holding nothing, when another session kept it
        for ``timeout_s``. A connection lost during the body loses the lock with it."""
        conn = self._connect()
        try:
            deadline = time.monotonic() + timeout_s
            while True:
                try:
                    row = conn.execute(
                        b"SELECT pg_try_advisory_lock(hashtextextended(%s || current_schema(), 0))"
                        b" AS held",
                        (name + "\x1f",),
                    ).fetchone()
                except psycopg.Error as exc:
                    raise translate_error(exc, self.where, self.busy_timeout_s) from exc
                if row is not None and row["held"]:
                    break
                if time.monotonic() >= deadline:
                    yield False
                    return
                time.sleep(poll_s)
            yield True
        finally:
            conn.close()

    # --- migrations -----------------------------------------------------------------------
    def _migrate(self, migrations: Sequence[Sequence[str]]) -> None:
        target = len(migrations)
        if self._version(target) == target:
            return
        with self.write() as cur:
            # one migrating process per schema; the others wait here (lock_timeout bounds it),
            # then find the work done
            cur.execute(
                "SELECT pg_advisory_xact_lock(%s, hashtext(current_schema()))", (_MIGRATION_LOCK,)
            )
            cur.execute(VERSION_TABLE)
            version = self._check(cur, target)
            if version == 0:
                cur.execute(
                    "INSERT INTO offloader_schema (application, version) VALUES (%s, 0)",
                    (APPLICATION,),
                )
            for step in migrations[version:]:
                for statement in step:
                    cur.execute(statement.encode())
            cur.execute("UPDATE offloader_schema SET version = %s", (target,))

    def _version(self, supported: int) -> int:
        with self.read() as cur:
            cur.execute("SELECT to_regclass('offloader_schema') IS NOT NULL AS present")
            row = cur.fetchone()
            if row is None or not row["present"]:
                self._refuse_foreign(cur)
                return 0
            return self._check(cur, supported)

    def _refuse_foreign(self, cur: Cursor) -> None:
        cur.execute(
            "SELECT count(*) AS n FROM information_schema.tables "
            "WHERE table_schema = current_schema() AND table_name = ANY(%s)",
            (list(OUR_TABLES),),
        )
        row = cur.fetchone()
        if row is not None and row["n"]:
            raise SchemaVersionError(
                f"{self.where} has tables named like ours but no offloader_schema table: it is "
                "not a ledger-offloader metadata database (choose another database or schema)"
            )

    def _check(self, cur: Cursor, supported: int) -> int:
        cur.execute("SELECT application, version FROM offloader_schema")
        row = cur.fetchone()
        if row is None:
            self._refuse_foreign(cur)
            return 0
        if row["application"] != APPLICATION:
            raise SchemaVersionError(
                f"{self.where} is not a ledger-offloader metadata database "
                f"(application {row['application']!r})"
            )
        version = int(row["version"])
        if version > supported:
            raise SchemaVersionError(
                f"metadata database {self.where} has schema version {version}, newer than the "
                f"{supported} this ledger-offloader supports; upgrade ledger-offloader"
            )
        return version
