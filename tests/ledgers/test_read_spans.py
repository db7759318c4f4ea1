"""``ClosedLedgerReader.read_spans``: the payloads ``read`` returns, as spans of one buffer,
and on damaged or truncated files the same ``CorruptLedgerError`` (message and offset) as
``read``, with the C record check and its Python twin."""

from __future__ import annotations

import os
import random
from collections.abc import Iterator
from itertools import accumulate
from pathlib import Path
from typing import Any

import pytest

from formats import framing
from formats.spans import EntrySpans
from offloader.errors import CorruptLedgerError, EntryOutOfRange, LedgerStoreError
from offloader.ledgers import (
    ClosedLedgerReader,
    InMemoryLedger,
    LedgerReader,
    LedgerStore,
    SpanLedgerReader,
)
from offloader.ledgers import reader as reader_module
from offloader.ledgers.fileformat import HEADER_SIZE, RECORD_HEADER_SIZE

try:
    from formats import _speedups  # type: ignore[attr-defined]
except ImportError:  # tests/formats/test_framing.py::test_the_c_loops_are_built says why
    _speedups = None

TOPIC = "acme/orders/spans"
RNG = random.Random(11)
PAYLOADS = [RNG.randbytes(RNG.choice([0, 1, 5, 40])) for _ in range(9)]
ENDS = [HEADER_SIZE + e for e in accumulate(RECORD_HEADER_SIZE + len(p) for p in PAYLOADS)]
STARTS = [HEADER_SIZE, *ENDS[:-1]]
LAST = len(PAYLOADS) - 1
#: (first, last) ranges each damaged file is read with
RANGES = [(0, LAST), (0, 0), (3, 6), (LAST, LAST)]


def _record_spans_impl(name: str) -> Any:
    if name == "python":
        return framing.record_spans_py
    assert _speedups is not None, "formats._speedups is not built: run `make install`"
    return _speedups.record_spans


@pytest.fixture(params=["c", "python"])
def impl(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run the test with the C record check, then with its Python twin."""
    name: str = request.param
    monkeypatch.setattr(reader_module, "record_spans", _record_spans_impl(name))
    return name


@pytest.fixture()
def ledger(tmp_path: Path) -> Iterator[tuple[ClosedLedgerReader, Path]]:
    store = LedgerStore(tmp_path, fsync="never")
    writer = store.create_ledger(TOPIC, 4)
    writer.append_batch(PAYLOADS)
    writer.close()
    with store.open_reader(TOPIC, 4) as reader:
        yield reader, store.ledger_path(TOPIC, 4)


def _payloads(spans: EntrySpans) -> list[bytes]:
    return [bytes(spans.payload(i)) for i in range(spans.count)]


def _error(call: Any) -> tuple[str, int | None] | None:
    try:
        call()
    except CorruptLedgerError as exc:
        return str(exc), exc.offset
    return None


def test_read_spans_returns_what_read_returns(
    impl: str, ledger: tuple[ClosedLedgerReader, Path]
) -> None:
    reader, _ = ledger
    assert isinstance(reader, SpanLedgerReader) and isinstance(reader, LedgerReader)
    assert not isinstance(InMemoryLedger(1, [b"x"]), SpanLedgerReader)
    for first in range(len(PAYLOADS)):
        for last in range(first, len(PAYLOADS)):
            spans = reader.read_spans(first, last)
            assert spans.count == last - first + 1
            assert _payloads(spans) == reader.read(first, last) == PAYLOADS[first : last + 1]
            assert list(spans.lengths) == [len(p) for p in PAYLOADS[first : last + 1]]
    with pytest.raises(EntryOutOfRange):
        reader.read_spans(0, len(PAYLOADS))
    with pytest.raises(EntryOutOfRange):
        reader.read_spans(2, 1)
    reader.close()
    with pytest.raises(LedgerStoreError, match="reader is closed"):
        reader.read_spans(0, 0)


def test_every_flipped_record_byte_raises_the_same_error(
    impl: str, ledger: tuple[ClosedLedgerReader, Path]
) -> None:
    reader, path = ledger
    fd = os.open(path, os.O_RDWR)
    try:
        for offset in range(HEADER_SIZE, ENDS[-1]):
            entry = next(i for i, end in enumerate(ENDS) if offset < end)
            original = os.pread(fd, 1, offset)
            for mask in (0x01, 0x80, 0xFF):
                os.pwrite(fd, bytes([original[0] ^ mask]), offset)
                for first, last in RANGES:
                    via_read = _error(lambda f=first, la=last: reader.read(f, la))
                    via_spans = _error(lambda f=first, la=last: reader.read_spans(f, la))
                    assert via_spans == via_read, (offset, mask, first, last)
                    if first <= entry <= last:
                        assert via_read is not None and via_read[1] == STARTS[entry]
                        in_length = offset < STARTS[entry] + 4
                        kind = "record length field" if in_length else "CRC32C mismatch"
                        assert f"entry {entry}: {kind}" in via_read[0], (offset, mask)
                    else:
                        assert via_read is None
            os.pwrite(fd, original, offset)
    finally:
        os.close(fd)
    assert reader.read(0, LAST) == PAYLOADS


def test_every_truncation_raises_the_same_error(
    impl: str, ledger: tuple[ClosedLedgerReader, Path]
) -> None:
    reader, path = ledger  # the reader keeps its layout: the file shrinks under it
    data = path.read_bytes()
    for cut in range(ENDS[-1] - 1, HEADER_SIZE - 1, -1):
        os.truncate(path, cut)
        for first, last in RANGES:
            via_read = _error(lambda f=first, la=last: reader.read(f, la))
            assert via_read == _error(lambda f=first, la=last: reader.read_spans(f, la))
            end = ENDS[last]
            if cut < end:
                assert via_read == (
                    f"{path}: file ends before entry {last} (read {max(0, cut - STARTS[first])} "
                    f"of {end - STARTS[first]} bytes) at offset {max(cut, STARTS[first])}",
                    max(cut, STARTS[first]),
                )
            else:
                assert via_read is None
    path.write_bytes(data)
    assert _payloads(reader.read_spans(0, LAST)) == PAYLOADS


def test_the_messages_are_those_read_always_raised(
    impl: str, ledger: tuple[ClosedLedgerReader, Path]
) -> None:
    reader, path = ledger
    entry = 3
    fd = os.open(path, os.O_RDWR)
    try:
        os.pwrite(fd, (len(PAYLOADS[entry]) + 1).to_bytes(4, "big"), STARTS[entry])
        assert _error(lambda: reader.read_spans(0, LAST)) == (
            f"{path}: entry {entry}: record length field {len(PAYLOADS[entry]) + 1} does not "
            f"match the index at offset {STARTS[entry]}",
            STARTS[entry],
        )
        os.pwrite(fd, len(PAYLOADS[entry]).to_bytes(4, "big"), STARTS[entry])
        os.pwrite(fd, b"\x00\x00\x00\x00", STARTS[entry] + 4)
        assert _error(lambda: reader.read_spans(0, LAST)) == (
            f"{path}: entry {entry}: CRC32C mismatch at offset {STARTS[entry]}",
            STARTS[entry],
        )
    finally:
        os.close(fd)


def test_entry_lengths_come_from_the_index_and_damage_fails_the_offload(
    ledger: tuple[ClosedLedgerReader, Path], tmp_path: Path
) -> None:
    """The writer plans from the offset index (no first read of the records); a damaged
    record still fails the offload, when it is read, and nothing is left in the store."""
    from formats.keys import data_key, index_key
    from offloader.config import OffloadSettings
    from offloader.offload.writer import offload_ledger
    from offloader.store.local import LocalObjectStore

    reader, path = ledger
    assert reader.entry_lengths() == [len(p) for p in PAYLOADS]
    calls: list[tuple[int, int]] = []
    real = reader.read_spans

    def counted(first: int, last: int) -> EntrySpans:
        calls.append((first, last))
        return real(first, last)

    reader.read_spans = counted  # type: ignore[method-assign]
    store = LocalObjectStore(tmp_path / "objects")
    uuid = "5b0a7c2e-52a4-4b5f-a9a4-1d8b2d7e0c11"
    offload_ledger(reader, store, uuid, OffloadSettings())
    assert calls == [(0, LAST)]  # one pass over the records: the upload's
    fd = os.open(path, os.O_RDWR)
    try:
        os.pwrite(fd, b"\xff", STARTS[5] + RECORD_HEADER_SIZE - 1)  # a CRC byte of entry 5
    finally:
        os.close(fd)
    with pytest.raises(CorruptLedgerError, match="entry 5: CRC32C mismatch"):
        offload_ledger(reader, store, "6c1b8d3f-52a4-4b5f-a9a4-1d8b2d7e0c11", OffloadSettings())
    # only the first offload's two objects: the failed one left no object and no upload
    assert sorted(o.key for o in store.list("")) == sorted([data_key(uuid, 4), index_key(uuid, 4)])
    assert not list(store.list_multipart_uploads(""))
