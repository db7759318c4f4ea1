"""The statements both metadata backends run, written once over a small executor interface.

This module owns the :class:`Executor` every shared store method talks to (a transaction of
either backend: ``one``/``all``/``run`` plus its :class:`~offloader.metadata.rules.Dialect`)
and the lookups every transaction uses. Statements are written with ``?`` marks; the executor
of each backend turns them into its own (``%s`` on PostgreSQL). The lookups raise NotFound
(:func:`offloader.metadata.rules.need`); ``lock`` takes the row's lock where the backend has
row locks (PostgreSQL ``FOR UPDATE``; SQLite's write transaction already holds the database's
lock), so the caller's read-modify-write is atomic on both.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Generic, Protocol, Self, TypeVar

from offloader.metadata import rows
from offloader.metadata.base import LedgerRecord, OffloadAttempt
from offloader.metadata.rules import Dialect, Row, need, need_namespace

H = TypeVar("H")


class Executor(Protocol):
    """One open transaction of a backend (SQLite connection or PostgreSQL cursor)."""

    @property
    def dialect(self) -> Dialect: ...

    def one(self, sql: str, args: Sequence[object] = ()) -> Row | None:
        """The first row of ``sql`` (``?`` marks), or None."""
        ...

    def all(self, sql: str, args: Sequence[object] = ()) -> list[Row]:
        """Every row of ``sql``."""
        ...

    def run(self, sql: str, args: Sequence[object] = ()) -> int:
        """Run ``sql``; the number of rows it changed."""
        ...


class Transactions(Protocol):
    """What a backend's database object gives the shared stores: its transactions."""

    def close(self) -> None:
        """Close the connection (idempotent)."""
        ...

    def writing(self) -> AbstractContextManager[Executor]:
        """A transaction that changes (committed on success, rolled back on any error)."""
        ...

    def reading(self) -> AbstractContextManager[Executor]:
        """A transaction that only reads: its SELECTs see one snapshot."""
        ...

    def batch(self) -> AbstractContextManager[None]:
        """One write transaction for every change the body makes (see :class:`Transacting`)."""
        ...


#: the savepoints of a batch's changes are named ``offloader_<n>``
_SAVEPOINTS = itertools.count(1)


class Transacting(Generic[H]):
    """A backend database's :class:`Transactions`, from its own ``write``/``read`` (which yield
    its driver's handle: a connection, a cursor) and the :meth:`executor` over that handle.

    **Batches.** Inside :meth:`batch`, the thread that opened it runs every ``writing`` and
    ``reading`` in the batch's one write transaction: each change in a ``SAVEPOINT`` of its
    own (the same statement on both backends), so a change that fails is rolled back alone,
    exactly as its own transaction would have been, and the caller may go on; the batch
    commits once at its end (one fsync on SQLite, one round trip of ``COMMIT`` on PostgreSQL),
    or rolls everything back when its body raises. The batch holds the database's lock: other
    threads wait for its end. A batch inside a batch joins it."""

    _batching: tuple[int, H] | None = None

    def write(self) -> AbstractContextManager[H]:
        raise NotImplementedError

    def read(self) -> AbstractContextManager[H]:
        raise NotImplementedError

    def executor(self, handle: H) -> Executor:
        """The executor over ``handle`` (inside one transaction)."""
        raise NotImplementedError

    def translate(self, exc: BaseException) -> BaseException:
        """The backend's error for its driver's ``exc`` (``exc`` itself when not a driver
        error): what its transactions raise, raised by a batch's changes too."""
        return exc

    def _batch_handle(self) -> H | None:
        held = self._batching
        return held[1] if held is not None and held[0] == threading.get_ident() else None

    @contextmanager
    def batch(self) -> Iterator[None]:
        """One write transaction around the body's changes (see the class)."""
        if self._batch_handle() is not None:
            yield
            return
        with self.write() as handle:
            self._batching = (threading.get_ident(), handle)
            try:
                yield
            finally:
                self._batching = None

    @contextmanager
    def writing(self) -> Iterator[Executor]:
        """:meth:`write`, as the executor the shared statements run on (in a batch: a
        savepoint of its transaction)."""
        handle = self._batch_handle()
        if handle is None:
            with self.write() as handle:
                yield self.executor(handle)
            return
        ex = self.executor(handle)
        name = f"offloader_{next(_SAVEPOINTS)}"
        self._run_translated(ex, f"SAVEPOINT {name}")
        try:
            yield ex
        except BaseException as exc:
            error = self.translate(exc)
            try:
                ex.run(f"ROLLBACK TO SAVEPOINT {name}")
                ex.run(f"RELEASE SAVEPOINT {name}")
            except Exception:  # the connection is gone: the batch fails at its end
                pass
            if error is exc:
                raise
            raise error from exc
        self._run_translated(ex, f"RELEASE SAVEPOINT {name}")

    def _run_translated(self, ex: Executor, sql: str) -> None:
        try:
            ex.run(sql)
        except Exception as exc:
            error = self.translate(exc)
            if error is exc:
                raise
            raise error from exc

    @contextmanager
    def reading(self) -> Iterator[Executor]:
        """:meth:`read`, as the executor the shared statements run on (in a batch: its
        transaction, which sees the batch's changes)."""
        handle = self._batch_handle()
        if handle is not None:
            yield self.executor(handle)
            return
        with self.read() as handle:
            yield self.executor(handle)


class SqlStore:
    """What every store over one backend database has: ``close``, ``batch`` and the ``with``
    form."""

    _db: Transactions

    def batch(self) -> AbstractContextManager[None]:
        """One write transaction for the changes the body makes (a savepoint each: a change
        that fails is undone alone); committed at its end, rolled back if the body raises."""
        return self._db.batch()

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


LEDGER_SELECT = """
SELECT l.ledger_id, l.topic, l.entries, l.size_bytes, l.created_ms, l.closed_ms, l.state,
       l.offload_uuid, l.offload_complete, l.offload_local_deleted, l.offload_timestamp_ms,
       a.driver_name, a.driver_properties, a.data_key, a.index_key, a.data_size, a.index_size,
       a.block_crc32c, a.index_crc32c
FROM ledgers AS l LEFT JOIN offload_attempts AS a ON a.uuid = l.offload_uuid
"""
ATTEMPT_SELECT = "SELECT * FROM offload_attempts"


def marks(count: int) -> str:
    """``count`` ``?`` marks separated by commas."""
    return ", ".join(["?"] * count)


def assignments(columns: Sequence[str]) -> str:
    """``a = ?, b = ?`` for an UPDATE of ``columns``."""
    return ", ".join(f"{column} = ?" for column in columns)


def lock_ledger(ex: Executor, ledger_id: int) -> bool:
    """Lock the ledger's row (where rows are locked); False if it does not exist."""
    lock = ex.dialect.lock("FOR UPDATE")
    return ex.one(f"SELECT 1 FROM ledgers WHERE ledger_id = ?{lock}", (ledger_id,)) is not None


def find_ledger(ex: Executor, ledger_id: int) -> LedgerRecord | None:
    row = ex.one(LEDGER_SELECT + " WHERE l.ledger_id = ?", (ledger_id,))
    return None if row is None else rows.ledger_record(row)


def get_ledger(ex: Executor, ledger_id: int, *, lock: bool = False) -> LedgerRecord:
    locked = lock_ledger(ex, ledger_id) if lock and ex.dialect.row_locks else True
    return need(find_ledger(ex, ledger_id) if locked else None, f"ledger {ledger_id}")


def get_attempt(ex: Executor, uuid: str, *, lock: bool = False) -> OffloadAttempt:
    suffix = ex.dialect.lock("FOR UPDATE") if lock else ""
    row = ex.one(ATTEMPT_SELECT + " WHERE uuid = ?" + suffix, (uuid,))
    return rows.attempt_record(need(row, f"offload attempt {uuid}"))


def require_topic(ex: Executor, topic: str, *, lock: str = "") -> Row:
    """The topic's row; ``lock`` is "" or a locking clause (``FOR KEY SHARE``, ``FOR UPDATE``)
    taken where rows are locked."""
    clause = ex.dialect.lock(lock) if lock else ""
    return need(ex.one(f"SELECT * FROM topics WHERE name = ?{clause}", (topic,)), f"topic {topic}")


def require_namespace(ex: Executor, name: str, *, lock: str = "") -> Row:
    clause = ex.dialect.lock(lock) if lock else ""
    return need_namespace(ex.one(f"SELECT * FROM namespaces WHERE name = ?{clause}", (name,)), name)
