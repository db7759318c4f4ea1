"""Crash recovery: torn tails are truncated and reported, damage in the middle is refused."""

from __future__ import annotations

import random
from itertools import accumulate
from pathlib import Path

import pytest

from offloader.errors import CorruptLedgerError, LedgerNotClosedError
from offloader.ledgers import LedgerStore
from offloader.ledgers.fileformat import FOOTER_SIZE, HEADER_SIZE, RECORD_HEADER_SIZE

TOPIC = "acme/orders/t1"
RNG = random.Random(5)
PAYLOADS = [RNG.randbytes(RNG.choice([0, 1, 7, 100, 250])) for _ in range(20)] + [
    RNG.randbytes(120)
]
ENDS = [HEADER_SIZE + e for e in accumulate(RECORD_HEADER_SIZE + len(p) for p in PAYLOADS)]
STARTS = [HEADER_SIZE, *ENDS[:-1]]
DATA_END = ENDS[-1]


class Ledger:
    """One ledger file whose bytes the test rewrites, then recovers."""

    def __init__(self, home: Path, *, closed: bool) -> None:
        self.store = LedgerStore(home, fsync="never")
        writer = self.store.create_ledger(TOPIC, 1)
        writer.append_batch(PAYLOADS)
        if closed:
            writer.close()
        else:
            writer.flush()
            writer.abandon()
        self.path = self.store.ledger_path(TOPIC, 1)
        self.data = self.path.read_bytes()

    def put(self, data: bytes) -> None:
        self.path.write_bytes(data)

    def recover_open(self) -> tuple[int, int]:
        """(entries kept, bytes dropped) after reopening; checks every kept entry's bytes."""
        writer = self.store.open_for_append(TOPIC, 1)
        try:
            assert writer.recovery is not None
            n = writer.entry_count
            if n:
                assert writer.read(0, n - 1) == PAYLOADS[:n]
            assert self.path.stat().st_size == (ENDS[n - 1] if n else HEADER_SIZE)
            return n, writer.recovery.dropped_bytes
        finally:
            writer.abandon()


def flip(data: bytes, offset: int) -> bytes:
    return data[:offset] + bytes([data[offset] ^ 0x5A]) + data[offset + 1 :]


def test_file_layout_is_what_the_test_assumes(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path, closed=False)
    assert len(ledger.data) == DATA_END
    closed = Ledger(tmp_path / "c", closed=True)
    assert len(closed.data) == DATA_END + 4 + 8 * len(PAYLOADS) + FOOTER_SIZE


def test_truncate_at_every_offset_of_last_record(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path, closed=False)
    last_start = STARTS[-1]
    for cut in range(last_start, DATA_END + 1):
        ledger.put(ledger.data[:cut])
        expected = (len(PAYLOADS), 0) if cut == DATA_END else (len(PAYLOADS) - 1, cut - last_start)
        assert ledger.recover_open() == expected, cut


def test_truncate_at_random_offsets(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path, closed=False)
    rng = random.Random(11)
    for cut in sorted({rng.randrange(HEADER_SIZE, DATA_END + 1) for _ in range(150)}):
        ledger.put(ledger.data[:cut])
        kept = sum(1 for end in ENDS if end <= cut)
        dropped = cut - (ENDS[kept - 1] if kept else HEADER_SIZE)
        assert ledger.recover_open() == (kept, dropped), cut


def test_truncate_into_header_is_corruption(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path, closed=False)
    for cut in (0, 1, HEADER_SIZE - 1):
        ledger.put(ledger.data[:cut])
        with pytest.raises(CorruptLedgerError) as info:
            ledger.store.open_for_append(TOPIC, 1)
        assert info.value.offset == 0


def test_torn_close_trailer_at_every_offset(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path, closed=True)
    for cut in range(DATA_END, len(ledger.data)):
        ledger.put(ledger.data[:cut])
        with pytest.raises(LedgerNotClosedError):
            ledger.store.open_reader(TOPIC, 1)
        assert ledger.recover_open() == (len(PAYLOADS), cut - DATA_END), cut


def test_flipped_byte_in_last_record_is_a_torn_tail(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path, closed=False)
    for offset in range(STARTS[-1], DATA_END):
        ledger.put(flip(ledger.data, offset))
        assert ledger.recover_open() == (len(PAYLOADS) - 1, DATA_END - STARTS[-1]), offset


@pytest.mark.parametrize("entry", [0, 9, len(PAYLOADS) - 2])
def test_flipped_byte_in_the_middle_is_refused(tmp_path: Path, entry: int) -> None:
    ledger = Ledger(tmp_path, closed=False)
    for offset in range(STARTS[entry], ENDS[entry]):
        damaged = flip(ledger.data, offset)
        ledger.put(damaged)
        with pytest.raises(CorruptLedgerError) as info:
            ledger.store.open_for_append(TOPIC, 1)
        assert info.value.offset == STARTS[entry], offset
        assert f"offset {STARTS[entry]}" in str(info.value)
        assert ledger.path.read_bytes() == damaged  # nothing was truncated
        with pytest.raises(CorruptLedgerError):
            ledger.store.recover(TOPIC, 1)


def test_damaged_header_is_refused(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path, closed=False)
    for offset in range(HEADER_SIZE):
        ledger.put(flip(ledger.data, offset))
        with pytest.raises(CorruptLedgerError) as info:
            ledger.store.open_for_append(TOPIC, 1)
        assert info.value.offset == 0


def test_zero_filled_tail_is_torn(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path, closed=False)
    ledger.put(ledger.data + bytes(4096))
    assert ledger.recover_open() == (len(PAYLOADS), 4096)


def test_closed_ledger_read_checks_crc(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path, closed=True)
    entry = 9
    assert len(PAYLOADS[entry]) > 0
    for offset in (
        STARTS[entry],
        STARTS[entry] + 5,
        STARTS[entry] + RECORD_HEADER_SIZE,
        ENDS[entry] - 1,
    ):
        ledger.put(flip(ledger.data, offset))
        with ledger.store.open_reader(TOPIC, 1) as reader:
            assert reader.read(0, entry - 1) == PAYLOADS[:entry]
            assert reader.read(entry + 1, entry + 1) == PAYLOADS[entry + 1 : entry + 2]
            with pytest.raises(CorruptLedgerError) as info:
                reader.read(0, len(PAYLOADS) - 1)
            assert info.value.offset == STARTS[entry]


@pytest.mark.parametrize("where", ["marker", "index", "footer"])
def test_damaged_trailer_is_recovered_by_reclosing(tmp_path: Path, where: str) -> None:
    ledger = Ledger(tmp_path, closed=True)
    offset = {
        "marker": DATA_END,
        "index": DATA_END + 4 + 3,
        "footer": len(ledger.data) - FOOTER_SIZE + 2,
    }[where]
    ledger.put(flip(ledger.data, offset))
    with pytest.raises(LedgerNotClosedError):
        ledger.store.open_reader(TOPIC, 1)
    report = ledger.store.recover(TOPIC, 1)
    assert not report.was_closed
    trailer = len(ledger.data) - DATA_END
    assert (report.entry_count, report.dropped_bytes) == (len(PAYLOADS), trailer)
    assert ledger.store.recover(TOPIC, 1).was_closed
    with ledger.store.open_reader(TOPIC, 1) as reader:
        assert reader.read(0, len(PAYLOADS) - 1) == PAYLOADS


def test_recover_closes_a_crashed_ledger(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path, closed=False)
    ledger.put(ledger.data[:-3])
    report = ledger.store.recover(TOPIC, 1)
    assert (report.entry_count, report.dropped_bytes, report.was_closed) == (
        len(PAYLOADS) - 1,
        ENDS[-1] - STARTS[-1] - 3,
        False,
    )
    reader = ledger.store.open_reader(TOPIC, 1)
    assert reader.read(0, reader.last_entry_id) == PAYLOADS[:-1]
    assert reader.length == sum(map(len, PAYLOADS[:-1]))


def test_ledger_id_mismatch_is_corruption(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path, closed=True)
    other = ledger.store.ledger_path(TOPIC, 2)
    other.write_bytes(ledger.data)
    with pytest.raises(CorruptLedgerError, match="header says ledger 1"):
        ledger.store.open_reader(TOPIC, 2)
