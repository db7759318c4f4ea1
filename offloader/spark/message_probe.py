"""Ledgers that are not in Pulsar message format, for the ``pulsar-messages`` source.

A bucket (or a topic) may hold ledgers whose entries are not Pulsar messages: raw payloads
written by ``topics produce``, Pulsar's golden objects of raw entries. Decoding one as messages
can only fail, so the source finds them before the job starts: :func:`check_ledgers` (driver)
looks at the first planned entry of each ledger (:func:`formats.pulsar.entry.not_a_message`)
and, with the source's ``on_error`` option, either fails with
:class:`~formats.pulsar.errors.NotPulsarMessagesError` naming the ledger (``fail``, the
default) or leaves those ledgers out with one warning naming each of them (``skip``).

Cost: nothing for a ledger whose index records zone maps for the block (our writer records
them only when every entry of the block decoded as Pulsar messages); otherwise one ranged GET
of at most :data:`PROBE_BYTES` from the start of the ledger's first planned block (for a
transformed ledger, its first chunk), made in parallel on :data:`PROBE_THREADS` threads, or
one read of the entry from a local ledger file.

In executors, :func:`parse_message_entry` gives an entry that is not a Pulsar message (one
further into a ledger whose first entry was) the same error, naming the ledger.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any

from formats.block import DataBlockHeader
from formats.errors import FormatError
from formats.pulsar.entry import ParsedEntry, not_a_message, parse_entry
from formats.pulsar.errors import NotPulsarMessagesError, PulsarMessageError
from formats.wire import BLOCK_HEADER_LEN, ENTRY_HEADER, ENTRY_HEADER_LEN
from offloader.errors import ConfigError
from offloader.logs import get_logger, redact
from offloader.naming import TopicName
from offloader.spark.plan import BlockTask, LocalLedgerTask, StoreSpec, Task
from offloader.spark.tasks import read_open_entries, task_store
from offloader.store.base import ObjectStore

__all__ = [
    "ON_ERROR_VALUES",
    "PROBE_BYTES",
    "check_ledgers",
    "on_error_option",
    "parse_message_entry",
]

log = get_logger(__name__)

#: the values of the ``on_error`` option
ON_ERROR_VALUES = ("fail", "skip")
#: payload bytes of a ledger's first entry the driver reads (Pulsar's metadata is ~100 bytes)
PROBE_BYTES = 1024
#: ledgers probed at once
PROBE_THREADS = 8
#: what to do about a ledger that is not in Pulsar message format
HINT_READ_RAW = "read its entries with the offloaded-ledger source"
HINT_SKIP = f"{HINT_READ_RAW}, or set the option on_error=skip to leave such ledgers out"


def on_error_option(options: Any) -> str:
    """The ``on_error`` option: ``fail`` (default) or ``skip``; ConfigError for anything else."""
    value = str(options.get("on_error") or "fail").strip().lower()
    if value not in ON_ERROR_VALUES:
        raise ConfigError(
            f"option on_error={options.get('on_error')!r}: expected fail or skip (what to do "
            "about ledgers that are not in Pulsar message format)"
        )
    return value


def ledger_source(task: Task) -> str:
    """Where a task's ledger comes from, for messages: its managed ledger (or topic) and its
    object, or its local ledger store."""
    if isinstance(task, LocalLedgerTask):
        name = TopicName.parse(task.topic).managed_ledger_name
        state = "open" if task.open else "closed"
        return f"managed ledger {name}, {state} in the local ledger store of {task.home}"
    parts = []
    if task.managed_ledger:
        parts.append(f"managed ledger {task.managed_ledger}")
    elif task.topic:
        parts.append(f"topic {task.topic}")
    parts.append(f"object {task.ref.data_key} of {redact(task.store.url)}")
    return ", ".join(parts)


@dataclass(frozen=True)
class _Finding:
    task: Task
    entry_id: int
    reason: str

    @property
    def ledger_id(self) -> int:
        return self.task.ledger_id

    def error(self, others: int) -> NotPulsarMessagesError:
        hint = HINT_SKIP
        if others:
            hint += f" ({others} more ledger{'s' if others > 1 else ''} of this read too)"
        return NotPulsarMessagesError(
            self.reason,
            ledger_id=self.ledger_id,
            entry_id=self.entry_id,
            source=ledger_source(self.task),
            hint=hint,
        )


def _ledger_key(task: Task) -> tuple[Any, ...]:
    if isinstance(task, BlockTask):
        return ("object", task.ref.ledger_id, task.ref.uuid)
    return ("local", task.topic, task.ledger_id)


def check_ledgers(tasks: Sequence[Task], on_error: str) -> list[Task]:
    """``tasks`` without the ledgers whose first planned entry is not a Pulsar message entry
    (``on_error="skip"``: one warning names them), or NotPulsarMessagesError for the first
    such ledger (``"fail"``). See the module's docstring for the cost."""
    firsts: dict[tuple[Any, ...], Task] = {}
    for task in tasks:
        firsts.setdefault(_ledger_key(task), task)
    todo = [t for t in firsts.values() if not (isinstance(t, BlockTask) and t.zone is not None)]
    if not todo:
        return list(tasks)
    stores: dict[StoreSpec, ObjectStore] = {}
    try:
        for task in todo:
            if isinstance(task, BlockTask) and task.store not in stores:
                stores[task.store] = task.store.open()
        if len(todo) == 1:
            found = [_probe(todo[0], stores)]
        else:
            with ThreadPoolExecutor(min(PROBE_THREADS, len(todo))) as pool:
                found = list(pool.map(lambda t: _probe(t, stores), todo))
    finally:
        for store in stores.values():
            store.close()
    bad = [f for f in found if f is not None]
    if not bad:
        return list(tasks)
    if on_error != "skip":
        raise bad[0].error(len(bad) - 1)
    log.warning(
        "ledgers left out: not in Pulsar message format (on_error=skip)",
        ledgers=len(bad),
        left_out="; ".join(
            f"ledger {f.ledger_id} ({ledger_source(f.task)}) entry {f.entry_id}: {f.reason}"
            for f in bad
        ),
    )
    dropped = {_ledger_key(f.task) for f in bad}
    return [t for t in tasks if _ledger_key(t) not in dropped]


def _probe(task: Task, stores: dict[StoreSpec, ObjectStore]) -> _Finding | None:
    """The finding for the task's first entry, or None when it may be a Pulsar message (or
    cannot be judged here: the read then raises whatever error it meets)."""
    if isinstance(task, LocalLedgerTask):
        entry_id = task.first_entry_id
        payload = _local_entry(task)
        if payload is None:  # not in the open ledger's file yet
            return None
        reason = not_a_message(payload)
        return None if reason is None else _Finding(task, entry_id, reason)
    ref = task.ref
    end = min(ref.end, ref.start + BLOCK_HEADER_LEN + ENTRY_HEADER_LEN + PROBE_BYTES)
    store = task_store(task, stores[task.store])
    head = store.get_range(ref.data_key, ref.start, end).data
    try:
        header = DataBlockHeader.decode(head)
    except FormatError:
        return None  # damage the block read reports with its own typed error
    at = header.header_len
    if len(head) < at + ENTRY_HEADER_LEN:
        return None
    length, entry_id = ENTRY_HEADER.unpack_from(head, at)
    if length < 0:
        return None
    payload = head[at + ENTRY_HEADER_LEN : at + ENTRY_HEADER_LEN + length]
    reason = not_a_message(payload, length)
    return None if reason is None else _Finding(task, entry_id, reason)


def _local_entry(task: LocalLedgerTask) -> bytes | None:
    if task.open:
        first = replace(task, last_entry_id=task.first_entry_id)
        return next((payload for _id, payload in read_open_entries(first)), None)
    from offloader.ledgers import LedgerStore

    with LedgerStore(task.home).open_reader(task.topic, task.ledger_id) as reader:
        return bytes(reader.read(task.first_entry_id, task.first_entry_id)[0])


def parse_message_entry(
    payload: bytes, ledger_id: int, entry_id: int, task: Task | None = None
) -> ParsedEntry:
    """:func:`~formats.pulsar.entry.parse_entry`, but an entry that is not a Pulsar message at
    all is :class:`NotPulsarMessagesError` naming the ledger (``task``: the ledger's task, for
    where it comes from). Damage to a message keeps its own error (a CRC32C mismatch...)."""
    try:
        return parse_entry(payload, ledger_id=ledger_id, entry_id=entry_id)
    except PulsarMessageError:
        reason = not_a_message(payload)
        if reason is None:
            raise
    source = ledger_source(task) if task is not None and task.ledger_id == ledger_id else ""
    raise NotPulsarMessagesError(
        reason, ledger_id=ledger_id, entry_id=entry_id, source=source, hint=HINT_READ_RAW
    ) from None
