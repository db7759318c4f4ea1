"""The writer with span readers (``read_spans``, offloader.ledgers.base.SpanLedgerReader):
the objects are byte-identical to those of a plain ``read`` reader, a ledger that changes
after planning is refused with the same errors, and a real closed local ledger goes through
``read_spans``."""

from __future__ import annotations

import random
from array import array
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from bench.common import SyntheticLedger
from formats.keys import data_key, index_key
from formats.ledger_metadata import LedgerMetadata
from formats.spans import EntrySpans
from offloader.errors import IndexInconsistentError
from offloader.ledgers import ClosedLedgerReader, InMemoryLedger, LedgerReader, LedgerStore
from offloader.offload.writer import offload_ledger
from offloader.store.local import LocalObjectStore
from tests.offload.conftest import assert_empty, new_uuid, settings_for

RNG = random.Random(17)
PAYLOADS = [RNG.randbytes(RNG.choice([0, 1, 30, 200, 900])) for _ in range(120)]


class SpanLedger(InMemoryLedger):
    """An in-memory ledger that also reads spans: each batch copied into one buffer, with
    a few junk bytes between payloads so that starts are not just running sums."""

    def __init__(self, ledger_id: int, payloads: Sequence[bytes], **kwargs: Any) -> None:
        super().__init__(ledger_id, payloads, **kwargs)
        self.span_reads = 0
        self.reads = 0

    def read(self, first: int, last: int) -> Sequence[bytes]:
        self.reads += 1
        return super().read(first, last)

    def read_spans(self, first: int, last: int) -> EntrySpans:
        self.span_reads += 1
        buf = bytearray(b"#" * 3)
        starts, lengths = array("q"), array("q")
        for payload in InMemoryLedger.read(self, first, last):
            starts.append(len(buf))
            lengths.append(len(payload))
            buf += payload + b"junk"
        return EntrySpans(bytes(buf), starts, lengths)


class PlainReader:
    """Only the ``LedgerReader`` Protocol of another reader (hides ``read_spans`` and
    ``entry_lengths``)."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.reads = 0

    ledger_id = property(lambda self: self._inner.ledger_id)
    last_entry_id = property(lambda self: self._inner.last_entry_id)
    length = property(lambda self: self._inner.length)
    metadata = property(lambda self: self._inner.metadata)

    def read(self, first: int, last: int) -> Sequence[bytes]:
        self.reads += 1
        result: Sequence[bytes] = self._inner.read(first, last)
        return result


class CountingSpanReader(PlainReader):
    """A reader's Protocol plus its ``read_spans``, counting the span reads."""

    def __init__(self, inner: Any) -> None:
        super().__init__(inner)
        self.span_reads = 0

    def read_spans(self, first: int, last: int) -> EntrySpans:
        self.span_reads += 1
        result: EntrySpans = self._inner.read_spans(first, last)
        return result


def _offload(reader: LedgerReader, root: Path, uuid: str, **changes: Any) -> tuple[bytes, bytes]:
    """(data object, index) written for ``reader`` into a fresh local store under ``root``."""
    store = LocalObjectStore(root)
    settings = settings_for("local", changes.pop("block", 4096), **changes)
    result = offload_ledger(reader, store, uuid, settings)
    return store.get(result.data_key).data, store.get(result.index_key).data


@pytest.mark.parametrize("batch", [1, 7, 100, 1000])
@pytest.mark.parametrize("block", [1200, 4096, 65536])
def test_span_and_plain_readers_write_the_same_objects(
    tmp_path: Path, batch: int, block: int
) -> None:
    uuid = new_uuid()
    spans = SpanLedger(3, PAYLOADS)
    got_spans = _offload(
        spans, tmp_path / "spans", uuid, block=block, ledger_read_batch_entries=batch
    )
    plain = PlainReader(InMemoryLedger(3, PAYLOADS, spans.metadata))
    got_plain = _offload(
        plain, tmp_path / "plain", uuid, block=block, ledger_read_batch_entries=batch
    )
    assert got_spans == got_plain
    assert spans.span_reads > 0 and spans.reads == 0  # planning and upload both used spans
    assert plain.reads > 0


def test_synthetic_ledger_spans_write_what_its_reads_write(tmp_path: Path) -> None:
    ledger = SyntheticLedger(9, 3000, 100)
    assert all(
        bytes(ledger.read_spans(5, 2000).payload(i)) == bytes(ledger.read(5, 2000)[i])
        for i in range(1996)
    )
    uuid = new_uuid()
    reader = CountingSpanReader(ledger)
    got_spans = _offload(reader, tmp_path / "spans", uuid, block=64 * 1024)
    got_plain = _offload(PlainReader(ledger), tmp_path / "plain", uuid, block=64 * 1024)
    assert got_spans == got_plain and reader.span_reads > 0 and reader.reads == 0


class _ChangingSpanLedger(SpanLedger):
    """Changes the last entry of a batch (one byte longer, or drops it) on a chosen call of
    ``read_spans`` and of ``read`` alike."""

    def __init__(self, payloads: Sequence[bytes], change_on: int, drop: bool) -> None:
        super().__init__(3, payloads)
        self.calls = 0
        self.change_on = change_on
        self.drop = drop

    def _changed(self, got: list[bytes]) -> list[bytes]:
        self.calls += 1
        if self.calls != self.change_on:
            return got
        return got[:-1] if self.drop else [*got[:-1], got[-1] + b"!"]

    def read(self, first: int, last: int) -> Sequence[bytes]:
        return self._changed(list(InMemoryLedger.read(self, first, last)))

    def read_spans(self, first: int, last: int) -> EntrySpans:
        got = self._changed(list(InMemoryLedger.read(self, first, last)))
        return SpanLedger(3, got).read_spans(0, len(got) - 1)


@pytest.mark.parametrize("drop", [False, True])
@pytest.mark.parametrize("change_on", [3, 9])  # while planning, while uploading
def test_a_changed_ledger_is_refused_alike(tmp_path: Path, drop: bool, change_on: int) -> None:
    payloads = [bytes([i]) * 700 for i in range(40)]
    errors = []
    for name, reader in (
        ("spans", _ChangingSpanLedger(payloads, change_on, drop)),
        ("plain", PlainReader(_ChangingSpanLedger(payloads, change_on, drop))),
    ):
        store = LocalObjectStore(tmp_path / name)
        settings = settings_for("local", 4096, ledger_read_batch_entries=7)
        with pytest.raises(IndexInconsistentError) as info:
            offload_ledger(reader, store, new_uuid(), settings)
        assert_empty(store)
        errors.append(str(info.value))
    assert errors[0] == errors[1]
    if change_on == 9 and not drop:  # the 9th batch is entries 14..20 of the upload pass
        assert errors[0] == (
            "ledger 3: entry 20 is 701 bytes now, 700 when the offload was planned: the ledger "
            "changed during the offload"
        )
    if change_on == 9 and drop:
        assert "read(14, 20) returned 6 entries: the ledger changed" in errors[0]


def test_a_closed_local_ledger_offloads_through_read_spans(tmp_path: Path) -> None:
    store = LedgerStore(tmp_path / "ledgers", fsync="never")
    writer = store.create_ledger("acme/orders/t", 5)
    writer.append_batch(PAYLOADS)
    writer.close()
    with store.open_reader("acme/orders/t", 5) as closed:
        assert isinstance(closed, ClosedLedgerReader)
        counting = CountingSpanReader(closed)
        uuid = new_uuid()
        got = _offload(counting, tmp_path / "spans", uuid, ledger_read_batch_entries=9)
        assert counting.span_reads == 2 * -(-len(PAYLOADS) // 9)  # planning + upload
        assert counting.reads == 0
        metadata: LedgerMetadata = closed.metadata
    expected = _offload(InMemoryLedger(5, PAYLOADS, metadata), tmp_path / "memory", uuid)
    assert got == expected
    objects = LocalObjectStore(tmp_path / "spans")
    assert objects.head(data_key(uuid, 5)).size == len(got[0])
    assert objects.head(index_key(uuid, 5)).size == len(got[1])
