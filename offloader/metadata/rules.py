"""The decisions the SQLite and PostgreSQL metadata stores share: one place, both call it.

This module owns what the two ``MetadataStore`` backends decide alike, apart from how each
reads and writes its rows: the state checks of ledgers and of the offload lifecycle and the
errors (types and messages) they raise, the NotFound and AlreadyExists of lookups and inserts,
argument validation (ledger ids, attempt states, offload statuses), the tenant filter, the
policy values to store, and the ``list_attempts`` filter, and the :class:`Dialect` in which
the statements written once (:mod:`offloader.metadata.store`, :mod:`~offloader.metadata.offload`,
:mod:`~offloader.metadata.export`, :mod:`~offloader.metadata.kafka`) differ per backend
(placeholder mark, list membership, ``max``/``greatest``, row locks). Pure: no I/O and no
database module; the shared stores call these between their statements, inside the backend's
transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from offloader.errors import (
    AlreadyExists,
    InvalidLedgerState,
    MetadataError,
    NamespaceNotEmpty,
    NotFound,
    OffloadAlreadyComplete,
    OffloadConflict,
)
from offloader.metadata.base import (
    ATTEMPT_STATES,
    OFFLOAD_STATUSES,
    AttemptState,
    LedgerRecord,
    NamespaceRecord,
    OffloadAttempt,
    OffloadContext,
)

T = TypeVar("T")


class Row(Protocol):
    """A result row by column name: ``sqlite3.Row`` in the SQLite backend, a dict in the
    PostgreSQL one (both map rows to records with the same functions)."""

    def __getitem__(self, key: str, /) -> Any: ...


# --- the SQL dialect ------------------------------------------------------------------------
@dataclass(frozen=True)
class Dialect:
    """How a backend's SQL differs from the other's, for the statements written once
    (:mod:`offloader.metadata.statements`): the parameter mark (SQLite's ``?``, PostgreSQL's
    ``%s``; shared statements are written with ``?`` and :meth:`sql` turns them into the
    backend's), list membership (``IN (?, ...)`` or ``= ANY(%s)`` with one array parameter),
    the larger of two values (``max`` or ``greatest``), and whether row locks exist
    (PostgreSQL's ``FOR UPDATE``; SQLite's ``BEGIN IMMEDIATE`` already holds the whole
    database's write lock, so it drops them)."""

    mark: str
    array_any: bool
    greatest: str = "max"
    row_locks: bool = False

    def sql(self, text: str) -> str:
        """``text``, written with ``?`` marks, in this dialect (no ``?`` may stand in a
        literal of a shared statement)."""
        return text if self.mark == "?" else text.replace("?", self.mark)

    def marks(self, count: int) -> str:
        """``count`` placeholders separated by commas."""
        return ", ".join([self.mark] * count)

    def assignments(self, columns: Sequence[str]) -> str:
        """``a = ?, b = ?`` for an UPDATE of ``columns``."""
        return ", ".join(f"{column} = {self.mark}" for column in columns)

    def one_of(self, column: str, values: Sequence[object]) -> tuple[str, list[object]]:
        """``column`` is one of ``values``: the clause and its parameters."""
        if self.array_any:
            return f"{column} = ANY({self.mark})", [list(values)]
        return f"{column} IN ({self.marks(len(values))})", list(values)

    def lock(self, clause: str) -> str:
        """`` FOR UPDATE`` (or another locking ``clause``) where rows are locked, else ``""``."""
        return f" {clause}" if self.row_locks else ""


SQLITE = Dialect("?", array_any=False)
POSTGRES = Dialect("%s", array_any=True, greatest="greatest", row_locks=True)


# --- lookups and inserts --------------------------------------------------------------------
def need(found: T | None, what: str) -> T:
    """``found``, or NotFound "<what> does not exist" (``what``: "ledger 7", "topic ...")."""
    if found is None:
        raise NotFound(f"{what} does not exist")
    return found


def need_namespace(found: T | None, name: str) -> T:
    """``found``, or NotFound for namespace ``name`` with the command that creates it."""
    if found is None:
        raise NotFound(
            f"namespace {name} does not exist (create it with: offloader namespaces create {name})"
        )
    return found


def already_exists(what: str) -> AlreadyExists:
    """The error for an insert whose key is taken (``what``: "namespace a/b", ...)."""
    return AlreadyExists(f"{what} already exists")


# --- namespaces, topics and their policies --------------------------------------------------
def of_tenant(records: list[NamespaceRecord], tenant: str | None) -> list[NamespaceRecord]:
    """The namespaces of ``tenant`` (all of them when None), in the order given."""
    if tenant is None:
        return records
    return [r for r in records if r.name.split("/", 1)[0] == tenant]


def check_namespace_empty(name: str, topics: int) -> None:
    """A namespace is deleted only once it has no topic."""
    if topics:
        raise NamespaceNotEmpty(f"namespace {name} still has {topics} topic(s)")


def policy_values(policies: object, columns: Sequence[str]) -> list[Any]:
    """The values of ``columns`` in ``policies`` (namespace or topic policies), in order."""
    return [getattr(policies, column) for column in columns]


# --- ledgers --------------------------------------------------------------------------------
def check_ledger_id(ledger_id: int) -> None:
    """Ledger ids given by callers are never negative."""
    if ledger_id < 0:
        raise InvalidLedgerState(f"ledger id {ledger_id} is negative")


def check_newer(ledger_id: int, newest: int | None, topic: str) -> None:
    """A ledger appended to ``topic`` has an id above its ``newest`` one (None: no ledger)."""
    if newest is not None and newest >= ledger_id:
        raise InvalidLedgerState(f"ledger {ledger_id} is not newer than ledger {newest} of {topic}")


def counter_value(value: int | None) -> int:
    """The allocated ledger id (the counter row is created by the first migration)."""
    if value is None:  # pragma: no cover - the row is created by the first migration
        raise InvalidLedgerState("the ledger id counter is missing")
    return int(value)


def require_open(ledger: LedgerRecord) -> None:
    """Stats and closing change only an OPEN ledger."""
    if ledger.state != "OPEN":
        raise InvalidLedgerState(f"ledger {ledger.ledger_id} is {ledger.state}, not OPEN")


def is_repeated_close(ledger: LedgerRecord, final: tuple[int, int, int]) -> bool:
    """True when the ledger is already CLOSED with these ``(closed_ms, entries, size_bytes)``
    (the close is then a no-op); otherwise it must be OPEN (InvalidLedgerState)."""
    if ledger.state == "CLOSED" and (ledger.closed_ms, ledger.entries, ledger.size_bytes) == final:
        return True
    require_open(ledger)
    return False


# --- the offload lifecycle ------------------------------------------------------------------
def previous_offload(ledger: LedgerRecord) -> OffloadContext | None:
    """``begin_offload``'s checks; the ledger's previous (incomplete) offload context."""
    ledger_id = ledger.ledger_id
    if ledger.state == "DELETED":
        raise NotFound(f"ledger {ledger_id} was deleted")
    if ledger.state != "CLOSED":
        raise InvalidLedgerState(
            f"ledger {ledger_id} is {ledger.state}; only a closed ledger can be offloaded"
        )
    previous = ledger.offload
    if previous is not None and previous.complete:
        raise OffloadAlreadyComplete(
            f"ledger {ledger_id} is already offloaded (uuid {previous.uuid})"
        )
    return previous


def check_attempt_of(attempt: OffloadAttempt, ledger_id: int) -> None:
    """The attempt named by a caller belongs to the ledger the caller names."""
    if attempt.ledger_id != ledger_id:
        raise OffloadConflict(
            f"offload attempt {attempt.uuid} belongs to ledger {attempt.ledger_id}, not {ledger_id}"
        )


def lost_reason(ledger: LedgerRecord | None, uuid: str, ledger_id: int) -> str | None:
    """Why ``uuid`` no longer owns the ledger's offload, or None when it still does."""
    if ledger is None:
        return f"ledger {ledger_id} no longer exists; offload {uuid} is not claimed"
    if ledger.state == "DELETED":
        return f"ledger {ledger_id} was deleted; offload {uuid} is not claimed"
    if ledger.offload is None or ledger.offload.uuid != uuid:
        current = ledger.offload.uuid if ledger.offload is not None else None
        return f"Existing UUID {current} of ledger {ledger_id} does not match {uuid}"
    return None


@dataclass(frozen=True)
class Completion:
    """What ``complete_offload`` does: ``done`` (already complete: return it), ``lost`` (the
    compare-and-set lost: the attempt becomes SUPERSEDED with this reason, then OffloadConflict),
    or neither (:attr:`now`: mark the attempt COMPLETED and the ledger's offload complete)."""

    done: OffloadContext | None = None
    lost: str | None = None

    @property
    def now(self) -> bool:
        return self.done is None and self.lost is None


def decide_completion(
    ledger: LedgerRecord | None, attempt: OffloadAttempt, uuid: str, ledger_id: int
) -> Completion:
    """The compare-and-set of ``complete_offload`` (the attempt's ledger already checked)."""
    reason = lost_reason(ledger, uuid, ledger_id)
    if reason is not None or ledger is None or ledger.offload is None:
        return Completion(lost=reason)
    if ledger.offload.complete:
        return Completion(done=ledger.offload)  # a repeated complete: already done
    if attempt.state != "STARTED":
        raise OffloadConflict(f"offload attempt {uuid} is {attempt.state}")
    return Completion()


def completed_context(ledger: LedgerRecord) -> OffloadContext:
    """The offload context just marked complete."""
    if ledger.offload is None:  # pragma: no cover - set two statements before
        raise MetadataError(f"ledger {ledger.ledger_id} lost its offload context")
    return ledger.offload


def fails_now(attempt: OffloadAttempt, ledger_id: int) -> bool:
    """``fail_offload``'s checks: True when the attempt is STARTED (it becomes FAILED), False
    when it already ended otherwise (only its error is filled in, if it had none)."""
    check_attempt_of(attempt, ledger_id)
    if attempt.state == "COMPLETED":
        raise OffloadConflict(
            f"offload attempt {attempt.uuid} already completed; its objects must stay"
        )
    return attempt.state == "STARTED"


def check_local_delete(ledger: LedgerRecord, uuid: str) -> None:
    """``mark_local_deleted``'s compare-and-set: ``uuid`` owns the ledger's complete offload."""
    reason = lost_reason(ledger, uuid, ledger.ledger_id)
    if reason is not None:
        raise OffloadConflict(reason)
    if not ledger.offload_complete:
        raise InvalidLedgerState(
            f"offload {uuid} of ledger {ledger.ledger_id} is not complete; the local copy stays"
        )


def check_unclaimed(uuid: str, claimed: bool) -> None:
    """An attempt's objects may be cleaned only once no live ledger claims its uuid."""
    if claimed:
        raise OffloadConflict(
            f"offload {uuid} is still claimed by its ledger; its objects must stay"
        )


def check_rewritten(uuid: str, changed: int) -> None:
    """``record_index_rewrite`` changed exactly one completed attempt."""
    if changed != 1:
        raise NotFound(f"no completed offload attempt {uuid}")


def attempt_filter(
    dialect: Dialect,
    *,
    ledger_id: int | None,
    topic: str | None,
    states: Sequence[AttemptState] | None,
) -> tuple[str, list[object]]:
    """``list_attempts``'s WHERE clause ("" for no filter) and its parameters."""
    clauses: list[str] = []
    args: list[object] = []
    if ledger_id is not None:
        clauses.append(f"ledger_id = {dialect.mark}")
        args.append(ledger_id)
    if topic is not None:
        clauses.append(f"topic = {dialect.mark}")
        args.append(topic)
    if states is not None:
        unknown = set(states) - set(ATTEMPT_STATES)
        if unknown:
            raise MetadataError(f"unknown attempt state(s): {sorted(unknown)}")
        clause, values = dialect.one_of("state", states)
        clauses.append(clause)
        args.extend(values)
    where = f" WHERE {' AND '.join(clauses)}" if clauses else ""
    return where, args


def check_offload_status(status: str) -> None:
    if status not in OFFLOAD_STATUSES:
        raise MetadataError(f"unknown offload status {status!r}")
