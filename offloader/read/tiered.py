"""Reading a topic's entries from whichever tier holds each ledger (Pulsar's
``offloadedReadPriority`` namespace policy).

* the current (OPEN) ledger: from its file, read-only (a recovery scan, nothing changed), so
  a topic can be read while another process produces to it;
* a CLOSED ledger whose offload is complete: from the object store (one streamed
  ``ReadHandle.iter_entries`` read, checking the CRC32C of every block it reads whole) under
  ``tiered-storage-first`` (Pulsar's default), or from the local file under
  ``bookkeeper-first`` while it exists; once the local copy is deleted, always from the object
  store;
* any other CLOSED ledger: from its local file (``ClosedLedgerReader``); if the file vanished
  meanwhile (the deletion lag ran) the read switches to the object store.

Reads from the object store are recorded into ``rt.metrics`` as Pulsar does: the open (index
GET) latency, the data latency (time spent reading entries, per read), the bytes read, and
read errors.

On a shared metadata store a broker reads other brokers' topics the same way: their
offloaded ledgers from the object store; a ledger still only in the owner's home stops the read
with a LedgerNotFound naming the owner, and the owner's current (OPEN) ledger reads as empty.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from typing import Literal, Protocol

from offloader.errors import (
    EntryOutOfRange,
    LedgerNotFound,
    NotFound,
    ObjectNotFound,
    OffloaderError,
)
from offloader.ledgers.reader import read_entries
from offloader.ledgers.scan import read_closed, scan
from offloader.metadata.base import LedgerRecord
from offloader.naming import TopicName
from offloader.read.handle import ReadHandle
from offloader.read.objects import RecordedOffload
from offloader.runtime import Runtime, store_hint

Tier = Literal["local", "offloaded"]
BATCH = 256

__all__ = ["Tier", "TopicLedgers", "read_entries_from", "read_ledger"]


class TopicLedgers(Protocol):
    """What a tiered read needs of a topic (``offloader.topics.ManagedLedger`` is one)."""

    rt: Runtime
    topic: TopicName
    name: str

    @property
    def namespace(self) -> str: ...

    def ledgers(self, *, include_deleted: bool = False) -> list[LedgerRecord]: ...


def _read_open(ml: TopicLedgers, ledger_id: int, first: int) -> Iterator[tuple[int, bytes]]:
    path = ml.rt.ledgers.ledger_path(ml.topic, ledger_id)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return
    try:
        layout = read_closed(fd, str(path)) or scan(fd, str(path))
        count = len(layout.offsets)
        for start in range(first, count, BATCH):
            last = min(start + BATCH, count) - 1
            got = read_entries(fd, str(path), layout.offsets, layout.data_end, start, last)
            yield from enumerate(got, start)
    finally:
        os.close(fd)


def _read_offloaded(
    ml: TopicLedgers, record: LedgerRecord, first: int, limit: int | None
) -> Iterator[tuple[int, bytes, bool]]:
    """One streamed read (``ReadHandle.iter_entries``) of entries ``first..``, at most
    ``limit``, as ``(entry_id, payload, verified)``: with span CRC32Cs every span is checked
    before its entries are returned (``verified``); without them (older objects) every block
    the read covers whole has its CRC32C checked at its end, so a corrupt block fails the read,
    but after its entries were returned (not ``verified``)."""
    assert record.offload is not None
    rt = ml.rt
    metrics = rt.metrics
    started = time.perf_counter()
    try:
        handle = ReadHandle.open(
            rt.store,
            record.ledger_id,
            record.offload.uuid,
            rt.broker.offload,
            recorded=RecordedOffload.of(record.offload),
        )
    except ObjectNotFound as exc:
        metrics.record_read_offload_error(ml.name)
        hint = store_hint(record.offload, rt.store.url)
        if not hint:
            raise
        raise ObjectNotFound(f"{exc}{hint}") from exc
    except OffloaderError:
        metrics.record_read_offload_error(ml.name)
        raise
    metrics.record_read_offload_index_latency(ml.name, time.perf_counter() - started)
    with handle:
        last_id = handle.last_add_confirmed
        if limit is not None:
            last_id = min(last_id, first + limit - 1)
        if first > last_id:
            return
        verified = handle.verifies_spans
        entries = handle.iter_entries(first, last_id)
        if not metrics.enabled:  # no clock reads per entry
            for entry in entries:
                yield entry.entry_id, entry.payload, verified
            return
        busy, size = 0.0, 0
        try:
            while True:  # timed while reading, not while the caller works on an entry
                started = time.perf_counter()
                try:
                    entry = next(entries)
                except StopIteration:
                    break
                finally:
                    busy += time.perf_counter() - started
                size += len(entry.payload)
                yield entry.entry_id, entry.payload, verified
        except OffloaderError:
            metrics.record_read_offload_error(ml.name)
            raise
        finally:
            metrics.record_read_offload_bytes(ml.name, size)
            metrics.record_read_offload_data_latency(ml.name, busy)


def _read_local(ml: TopicLedgers, ledger_id: int, first: int) -> Iterator[tuple[int, bytes]]:
    with ml.rt.ledgers.open_reader(ml.topic, ledger_id) as reader:
        last_id = reader.last_entry_id
        for start in range(first, last_id + 1, BATCH):
            got = reader.read(start, min(start + BATCH - 1, last_id))
            yield from enumerate(got, start)


def read_ledger(
    ml: TopicLedgers,
    record: LedgerRecord,
    first: int,
    prefer_local: bool,
    limit: int | None = None,
) -> Iterator[tuple[int, bytes, Tier, bool]]:
    """Entries ``first..`` of one ledger as ``(entry_id, payload, tier, verified)``; ``limit``
    bounds what is fetched from the object store (the caller stops after that many entries).
    ``verified``: the entry's bytes were checked before it was returned (local records carry
    their own CRC32C; offloaded ones, their span's)."""
    if record.state == "OPEN":
        for entry_id, payload in _read_open(ml, record.ledger_id, first):
            yield entry_id, payload, "local", True
        return
    offloaded = record.offload_complete
    if offloaded and (record.local_deleted or not prefer_local):
        for entry_id, payload, verified in _read_offloaded(ml, record, first, limit):
            yield entry_id, payload, "offloaded", verified
        return
    try:
        reader = _read_local(ml, record.ledger_id, first)
        entry_id, payload = next(reader)
    except StopIteration:
        return
    except LedgerNotFound:
        try:
            record = ml.rt.meta.get_ledger(record.ledger_id)  # deleted after its offload?
        except NotFound:
            return
        if not record.offload_complete:
            owner = ml.rt.cluster.get_topic_owner(ml.name) if ml.rt.cluster.shared else None
            if owner is not None and owner.broker_id != ml.rt.me:
                raise LedgerNotFound(
                    f"ledger {record.ledger_id} of {ml.name} is not offloaded yet: its only "
                    f"copy is in the home of broker {owner.broker_id}, which owns the topic "
                    "(read it there, or once it is offloaded)"
                ) from None
            raise
        for entry_id, payload, verified in _read_offloaded(ml, record, first, limit):
            yield entry_id, payload, "offloaded", verified
        return
    yield entry_id, payload, "local", True
    for entry_id, payload in reader:
        yield entry_id, payload, "local", True


def read_entries_from(
    ml: TopicLedgers, start: tuple[int, int] | None, count: int | None
) -> Iterator[tuple[int, int, bytes, Tier, bool]]:
    """``(ledger_id, entry_id, payload, tier, verified)`` from ``start`` (default: the first
    entry), at most ``count``; the ledger list is read once, now. A ``start`` in a ledger the
    topic does not have raises :class:`EntryOutOfRange` here, before any entry is read."""
    records = ml.ledgers()
    if start is not None and all(r.ledger_id != start[0] for r in records):
        raise EntryOutOfRange(
            f"invalid position {start[0]}:{start[1]} for {ml.name}: the topic has no ledger "
            f"{start[0]}"
        )
    return _entries_from(ml, records, start, count)


def _entries_from(
    ml: TopicLedgers,
    records: list[LedgerRecord],
    start: tuple[int, int] | None,
    count: int | None,
) -> Iterator[tuple[int, int, bytes, Tier, bool]]:
    if count is not None and count <= 0:
        return
    prefer_local = ml.rt.policies(ml.namespace, ml.name).prefers_local
    produced = 0
    for record in records:
        if start is not None and record.ledger_id < start[0]:
            continue
        first = start[1] if start is not None and record.ledger_id == start[0] else 0
        if record.state != "OPEN" and first >= record.entries:
            continue
        limit = None if count is None else count - produced
        for entry_id, payload, tier, ok in read_ledger(ml, record, first, prefer_local, limit):
            yield record.ledger_id, entry_id, payload, tier, ok
            produced += 1
            if count is not None and produced >= count:
                return
