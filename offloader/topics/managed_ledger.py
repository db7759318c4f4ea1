"""A topic as a managed ledger: a list of ledgers (metadata records + local ledger files).

The last ledger of a topic is its *current* ledger, OPEN in the metadata and appended to by
:meth:`ManagedLedger.produce`. When it is full (:class:`~offloader.ledgers.RolloverPolicy`:
entry count, size, age) it is closed in the file (durable trailer) and then in the metadata, and
the next ledger is created at once (metadata first, then the file), as Pulsar does. After a
rollover the topic's housekeeping runs (:mod:`offloader.topics.tasks`: retention trim, deletion lag,
auto-offload), like Pulsar's ``ledgerClosed``.

Crash safety of the tail. Every change of the tail runs under the topic's writer lock
(:mod:`offloader.topics.lock`). When the current ledger is reopened it is recovered
(``LedgerStore.open_for_append``: torn tail dropped, every acknowledged entry kept) and the
metadata's entry count and size are reconciled with the file, which is the truth. The windows
a crash can leave are all repaired on the next open:

* file closed, metadata still OPEN -> the metadata is closed from the file's trailer;
* metadata CLOSED, no next ledger -> a new current ledger is created;
* next ledger in the metadata, no file yet -> the (empty) file is created.

The writer is held only for the duration of one call, so the CLI and a running service (other
processes) can take turns on a topic.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from dataclasses import dataclass

from offloader.crashpoints import crash_point
from offloader.errors import (
    InvalidLedgerState,
    LedgerClosedError,
    LedgerNotFound,
    LedgerStoreError,
    TopicOwnedElsewhere,
)
from offloader.ledgers import LedgerWriter
from offloader.logs import get_logger
from offloader.metadata.base import LedgerRecord
from offloader.naming import TopicName
from offloader.runtime import Runtime
from offloader.topics.lock import topic_write_lock

__all__ = ["ManagedLedger", "ProduceOutcome"]

log = get_logger(__name__)

#: entries appended with one ``append_batch`` (one write, one fsync) at most
BATCH_ENTRIES = 1000
BATCH_BYTES = 4 * 1024 * 1024

Payload = bytes | bytearray | memoryview


@dataclass(frozen=True)
class ProduceOutcome:
    """What :meth:`ManagedLedger.produce` did; positions are ``(ledger_id, entry_id)``."""

    entries: int
    bytes: int
    first: tuple[int, int] | None
    last: tuple[int, int] | None
    ledgers_closed: tuple[int, ...]


class ManagedLedger:
    """One topic's ledger list (see the module docstring)."""

    def __init__(self, rt: Runtime, topic: TopicName | str) -> None:
        self.rt = rt
        self.topic = TopicName.of(topic)
        self.name = str(self.topic)

    @property
    def namespace(self) -> str:
        return self.topic.namespace

    @property
    def managed_ledger_name(self) -> str:
        return self.topic.managed_ledger_name

    def ledgers(self, *, include_deleted: bool = False) -> list[LedgerRecord]:
        """The topic's ledgers, ascending (NotFound if the topic does not exist)."""
        return self.rt.meta.list_ledgers(self.name, include_deleted=include_deleted)

    # --- ownership (a shared metadata store: several brokers) -------------------------------
    def check_owner(self, *, claim: bool = True) -> None:
        """Refuse (:class:`TopicOwnedElsewhere`, naming the owner) unless this broker owns the
        topic: its home holds the topic's local ledgers, so only it produces to the topic,
        rolls it over, offloads or deletes its local ledgers, even while it is down.
        ``claim``: a topic without an owner becomes this broker's (its first writer);
        without it an unowned topic is allowed through unclaimed (work on what is remote
        only). The embedded store has one broker, which owns everything."""
        cluster = self.rt.cluster
        if not cluster.shared:
            return
        me = self.rt.me
        found = cluster.get_topic_owner(self.name)  # a read; claiming (a write) only if unowned
        if found is None and claim:
            found = cluster.claim_topic(self.name, me, self.rt.now_ms())
        owner = me if found is None else found.broker_id
        if owner != me:
            raise TopicOwnedElsewhere(self.name, owner, me)

    def _lock(self, timeout: float = 10.0) -> AbstractContextManager[None]:
        return topic_write_lock(self.rt.lock_dir, self.name, timeout=timeout)

    # --- the current ledger -----------------------------------------------------------------
    def _reopen(self, record: LedgerRecord) -> LedgerWriter | None:
        """The OPEN ledger's writer, recovered and reconciled; None if its file was closed
        (the metadata is closed from the file then)."""
        rt, ledger_id = self.rt, record.ledger_id
        try:
            writer = rt.ledgers.open_for_append(self.topic, ledger_id)
        except LedgerNotFound:
            if record.entries > 0:
                raise LedgerStoreError(
                    f"ledger {ledger_id} of {self.name} holds {record.entries} entries in the "
                    "metadata but its file is missing"
                ) from None
            log.info(
                "creating the missing file of the current ledger",
                topic=self.name,
                ledger_id=ledger_id,
            )
            return rt.ledgers.create_ledger(self.topic, ledger_id)
        except LedgerClosedError:
            info = rt.ledgers.info(self.topic, ledger_id)
            assert info.closed_ms is not None
            rt.meta.close_ledger(ledger_id, info.closed_ms, info.entry_count, info.length)
            log.info(
                "closed ledger recorded after a crash",
                topic=self.name,
                ledger_id=ledger_id,
                entries=info.entry_count,
            )
            return None
        if (writer.entry_count, writer.length) != (record.entries, record.size_bytes):
            log.info(
                "ledger stats reconciled with the file",
                topic=self.name,
                ledger_id=ledger_id,
                metadata_entries=record.entries,
                file_entries=writer.entry_count,
                dropped_bytes=writer.recovery.dropped_bytes if writer.recovery else 0,
            )
            rt.meta.update_ledger_stats(ledger_id, writer.entry_count, writer.length)
        return writer

    def _new_ledger(self) -> LedgerWriter:
        rt = self.rt
        ledger_id = rt.meta.allocate_ledger_id()
        rt.meta.add_ledger(self.name, ledger_id, rt.now_ms())
        crash_point("rollover.after_add_ledger")
        writer = rt.ledgers.create_ledger(self.topic, ledger_id)
        log.debug("ledger created", topic=self.name, ledger_id=ledger_id)
        return writer

    def _open_current(self) -> LedgerWriter:
        """The current ledger's writer (caller holds the writer lock), creating one if the
        last ledger is closed or the topic has none."""
        records = self.ledgers()
        if records and records[-1].state == "OPEN":
            writer = self._reopen(records[-1])
            if writer is not None:
                return writer
        return self._new_ledger()

    def _roll(self, writer: LedgerWriter) -> int:
        """Close the current ledger (file, then metadata); the caller opens the next."""
        info = writer.close()
        crash_point("rollover.after_file_close")
        assert info.closed_ms is not None
        self.rt.meta.close_ledger(info.ledger_id, info.closed_ms, info.entry_count, info.length)
        crash_point("rollover.after_meta_close")
        log.info(
            "ledger rolled over",
            topic=self.name,
            ledger_id=info.ledger_id,
            entries=info.entry_count,
            size=info.length,
        )
        return info.ledger_id

    @staticmethod
    def _release(writer: LedgerWriter) -> None:
        """Hand everything appended to the OS, then let go of the file (lock included)."""
        if writer.is_closed:
            return
        try:
            writer.flush()
        finally:
            writer.abandon()

    def _full(self, writer: LedgerWriter) -> bool:
        age = (self.rt.now_ms() - writer.ctime_ms) / 1000
        return self.rt.rollover.should_roll(writer.entry_count, writer.length, age)

    # --- producing --------------------------------------------------------------------------
    def produce(
        self, payloads: Iterable[Payload], progress: Callable[[int, int], None] | None = None
    ) -> ProduceOutcome:
        """Append entries, rolling over when the current ledger is full. ``progress`` gets
        ``(entries_done, bytes_done)`` after every batch. The caller runs the housekeeping
        when ``ledgers_closed`` is not empty."""
        rt = self.rt
        rt.meta.ensure_topic(self.name, rt.now_ms())
        self.check_owner()
        policy = rt.rollover
        closed: list[int] = []
        count = total = 0
        first: tuple[int, int] | None = None
        last: tuple[int, int] | None = None
        released = False
        with self._lock():
            writer = self._open_current()
            try:
                batch: list[Payload] = []
                batch_bytes = 0

                def flush() -> None:
                    nonlocal writer, batch, batch_bytes, first, last, count, total
                    if batch:
                        start = writer.entry_count
                        end = writer.append_batch(batch)
                        crash_point("produce.after_append")
                        rt.meta.update_ledger_stats(
                            writer.ledger_id, writer.entry_count, writer.length
                        )
                        crash_point("produce.after_stats")
                        first = first or (writer.ledger_id, start)
                        last = (writer.ledger_id, end)
                        count += len(batch)
                        total += batch_bytes
                        batch, batch_bytes = [], 0
                        if progress is not None:
                            progress(count, total)
                    if self._full(writer):
                        closed.append(self._roll(writer))
                        writer = self._new_ledger()

                try:
                    for payload in payloads:
                        batch.append(payload)
                        batch_bytes += len(payload)
                        # flush when the batch reaches a rollover boundary (not past it: the
                        # minimum rollover time may keep a full ledger open), or is big enough
                        at_count = writer.entry_count + len(batch) == policy.max_entries
                        size = policy.max_size_bytes
                        at_size = writer.length < size <= writer.length + batch_bytes
                        if (
                            at_count
                            or at_size
                            or len(batch) >= BATCH_ENTRIES
                            or (batch_bytes >= BATCH_BYTES)
                        ):
                            flush()
                    flush()
                except LedgerStoreError as exc:
                    # the writer failed: letting it go fails again ("an earlier write
                    # failed"), which must not hide what this produce wrote
                    released = True
                    with contextlib.suppress(LedgerStoreError):
                        self._release(writer)
                    raise _partial_produce(exc, self.name, count, last) from exc
            finally:
                if not released:
                    self._release(writer)
        return ProduceOutcome(count, total, first, last, tuple(closed))

    def roll_over(self, *, only_if_due: bool = False, timeout: float = 10.0) -> int | None:
        """Close the current ledger now if it is non-empty (or, with ``only_if_due``, only if
        the rollover policy says it is full: the age check of the service) and open the
        next; the closed ledger's id, else None. Also repairs a tail left by a crash."""
        self.check_owner()
        with self._lock(timeout):
            records = self.ledgers()
            last = records[-1] if records else None
            if last is not None and last.state == "OPEN":
                if only_if_due:
                    age = (self.rt.now_ms() - last.created_ms) / 1000
                    if not self.rt.rollover.should_roll(last.entries, last.size_bytes, age):
                        return None
                writer = self._reopen(last)
                if writer is None:  # its file was closed by a crash: open the next one
                    self._release(self._new_ledger())
                    return None
                try:
                    if writer.entry_count == 0:
                        return None
                    closed = self._roll(writer)
                    writer = self._new_ledger()
                    return closed
                finally:
                    self._release(writer)
            if last is not None:  # CLOSED, no successor (a crash after the close)
                self._release(self._new_ledger())
            return None

    def unload(self) -> list[int]:
        """Release this broker's ownership of the topic (``topics unload``): roll the current
        ledger over (a new, empty current ledger, as Pulsar offloads every ledger but the
        current one), then give the topic up, so that another broker may own it (it writes
        the empty current ledger's file in its own home). Refused (InvalidLedgerState) while a
        closed, non-empty ledger is not offloaded (its only copy is in this home: offload it
        first, then unload again), and (TopicOwnedElsewhere) on a broker that does not own the
        topic. Returns the ids of the offloaded ledgers, readable by every broker."""
        self.check_owner(claim=False)
        self.roll_over()
        with self._lock():
            records = self.ledgers()
            local_only = [
                r.ledger_id
                for r in records
                if r.state == "CLOSED" and r.entries > 0 and not r.offload_complete
            ]
            if local_only:
                raise InvalidLedgerState(
                    f"topic {self.name} still has ledger(s) {local_only} only in this broker's "
                    "home: offload them first (`offloader topics offload-prefix`), then unload"
                )
            self.rt.cluster.release_topic(self.name, self.rt.me)
        log.info("topic unloaded: ownership released", topic=self.name, broker=self.rt.me)
        return [r.ledger_id for r in records if r.offload_complete]


def _partial_produce(
    exc: LedgerStoreError, topic: str, written: int, last: tuple[int, int] | None
) -> LedgerStoreError:
    """A write failure in the middle of a produce, saying how much of it was written, so that
    a retry does not write those entries twice (the error of the ledger store alone said only
    "reopen it to recover")."""
    if written == 0:
        done = f"no entry of this produce was written; {topic} is unchanged"
    else:
        assert last is not None
        done = (
            f"the first {written} entries of this produce were written and stay: {topic} now "
            f"ends at {last[0]}:{last[1]}; a retry must skip them"
        )
    return LedgerStoreError(f"{exc}; {done}")
