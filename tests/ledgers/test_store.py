"""The local ledger store: append/read round trips, close and reopen, listing and deletion."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from offloader.errors import (
    EntryOutOfRange,
    LedgerClosedError,
    LedgerExistsError,
    LedgerNotClosedError,
    LedgerNotFound,
    LedgerStoreError,
)
from offloader.ledgers import (
    ClosedLedgerReader,
    LedgerReader,
    LedgerStore,
    OpenLedgerReader,
)
from offloader.naming import TopicName

TOPIC = "persistent://acme/orders/t1"


def make_store(home: Path, **kwargs: object) -> LedgerStore:
    clock = iter(range(1_700_000_000_000, 1_800_000_000_000, 1000))
    return LedgerStore(home, clock_ms=lambda: next(clock), **kwargs)  # type: ignore[arg-type]


payload_lists = st.lists(st.binary(min_size=0, max_size=3000), max_size=60)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    payloads=payload_lists,
    policy=st.sampled_from(["always", "batch", "never"]),
    splits=st.lists(st.integers(0, 10), max_size=30),
    buffer=st.sampled_from([1, 64, 1 << 20]),
)
def test_round_trip(
    tmp_path: Path, payloads: list[bytes], policy: str, splits: list[int], buffer: int
) -> None:
    home = tmp_path / os.urandom(6).hex()
    store = make_store(home, fsync=policy, buffer_bytes=buffer)
    writer = store.create_ledger(TOPIC, 3)
    i, k = 0, 0
    while i < len(payloads):  # mix single appends and batches
        n = splits[k % len(splits)] if splits else 1
        k += 1
        if n == 0:
            assert writer.append(payloads[i]) == i
            i += 1
        else:
            chunk = payloads[i : i + n]
            assert writer.append_batch(chunk) == i + len(chunk) - 1
            i += len(chunk)
    assert writer.last_entry_id == len(payloads) - 1
    if payloads:
        assert writer.read(0, len(payloads) - 1) == payloads
        assert writer.reader().read(len(payloads) - 1, len(payloads) - 1) == payloads[-1:]
    info = writer.close()
    assert (info.entry_count, info.length) == (len(payloads), sum(map(len, payloads)))
    with store.open_reader(TOPIC, 3) as reader:
        assert isinstance(reader, LedgerReader)
        assert reader.last_entry_id == len(payloads) - 1
        assert reader.length == sum(map(len, payloads))
        assert reader.metadata.last_entry_id == reader.last_entry_id
        assert reader.metadata.length == reader.length
        assert reader.metadata.ctime == info.ctime_ms and reader.metadata.is_closed
        if payloads:
            assert reader.read(0, len(payloads) - 1) == payloads
            for first in range(0, len(payloads), 7):
                last = min(len(payloads) - 1, first + 3)
                assert reader.read(first, last) == payloads[first : last + 1]


def test_lifecycle(tmp_path: Path) -> None:
    store = make_store(tmp_path)
    topic = TopicName.parse(TOPIC)
    assert store.list_ledgers(topic) == []
    writer = store.create_ledger(topic, 10)
    assert writer.append(b"a") == 0
    assert writer.append_batch([b"b", b"", b"d"]) == 3
    assert writer.append_batch([]) == 3
    assert writer.durable_last_entry_id == 3
    assert writer.size_bytes == os.path.getsize(writer.path)
    with pytest.raises(LedgerExistsError):
        store.create_ledger(topic, 10)
    with pytest.raises(LedgerStoreError, match="open for writing elsewhere"):
        store.open_for_append(topic, 10)
    with pytest.raises(LedgerNotClosedError):
        store.open_reader(topic, 10)
    open_info = store.info(topic, 10)
    assert (open_info.entry_count, open_info.closed_ms) == (4, None)
    info = writer.close()
    assert writer.close() == info  # idempotent
    assert info.is_closed and info.last_entry_id == 3 and info.length == 3
    assert info.file_size == os.path.getsize(writer.path)
    with pytest.raises(LedgerClosedError):
        writer.append(b"x")
    with pytest.raises(LedgerClosedError):
        store.open_for_append(topic, 10)
    assert store.info(topic, 10) == info
    assert store.recover(topic, 10).was_closed
    with store.create_ledger(topic, 11) as w2:
        w2.append(b"z")
    assert store.list_ledgers(topic) == [10, 11]
    reader = store.open_reader(topic, 10)
    assert reader.read(1, 3) == [b"b", b"", b"d"]
    for first, last in [(-1, 0), (0, 4), (2, 1), (4, 4)]:
        with pytest.raises(EntryOutOfRange):
            reader.read(first, last)
    assert store.delete_ledger(topic, 10) is True
    assert store.delete_ledger(topic, 10) is False
    assert reader.read(0, 0) == [b"a"]  # an open reader survives deletion (POSIX)
    reader.close()
    with pytest.raises(LedgerStoreError):
        reader.read(0, 0)
    with pytest.raises(LedgerNotFound):
        store.open_reader(topic, 10)
    with pytest.raises(LedgerNotFound):
        store.open_for_append(topic, 10)
    assert store.list_ledgers(topic) == [11]
    assert store.delete_topic(topic) == 1
    assert store.delete_topic(topic) == 0
    assert store.list_ledgers(topic) == []
    assert not (tmp_path / "ledgers" / "acme").exists()


def test_delete_topic_keeps_other_topics(tmp_path: Path) -> None:
    store = make_store(tmp_path)
    for topic in ("acme/orders/a", "acme/orders/b"):
        store.create_ledger(topic, 1).close()
    assert store.delete_topic("acme/orders/a") == 1
    assert store.list_ledgers("acme/orders/b") == [1]


def test_empty_ledger(tmp_path: Path) -> None:
    store = make_store(tmp_path)
    store.create_ledger(TOPIC, 0).close()
    reader = store.open_reader(TOPIC, 0)
    assert (reader.last_entry_id, reader.length, reader.metadata.last_entry_id) == (-1, 0, -1)
    with pytest.raises(EntryOutOfRange):
        reader.read(0, 0)


def test_reopen_and_continue(tmp_path: Path) -> None:
    store = make_store(tmp_path, fsync="never")
    writer = store.create_ledger(TOPIC, 5)
    writer.append_batch([b"one", b"two"])
    writer.flush()
    writer.append(b"lost")  # still in the user-space buffer
    writer.abandon()  # what a crash leaves
    again = store.open_for_append(TOPIC, 5)
    assert again.recovery is not None and again.recovery.dropped_bytes == 0
    assert again.last_entry_id == 1 and again.ctime_ms == writer.ctime_ms
    assert again.append(b"three") == 2
    again.close()
    assert store.open_reader(TOPIC, 5).read(0, 2) == [b"one", b"two", b"three"]


def test_open_reader_metadata_is_open(tmp_path: Path) -> None:
    store = make_store(tmp_path)
    writer = store.create_ledger(TOPIC, 1)
    writer.append(b"x")
    view = writer.reader()
    assert isinstance(view, OpenLedgerReader) and isinstance(view, LedgerReader)
    assert view.metadata.state == "OPEN" and view.metadata.last_entry_id == 0
    assert (view.ledger_id, view.last_entry_id, view.length) == (1, 0, 1)
    writer.close()


def test_memoryview_payloads(tmp_path: Path) -> None:
    store = make_store(tmp_path)
    with store.create_ledger(TOPIC, 1) as writer:
        writer.append(memoryview(b"hello")[1:])
        writer.append(bytearray(b"xy"))
    assert store.open_reader(TOPIC, 1).read(0, 1) == [b"ello", b"xy"]


def test_invalid_policy(tmp_path: Path) -> None:
    with pytest.raises(LedgerStoreError):
        LedgerStore(tmp_path, fsync="sometimes")  # type: ignore[arg-type]


def test_concurrent_append_and_read(tmp_path: Path) -> None:
    store = make_store(tmp_path, fsync="never", buffer_bytes=4096)
    writer = store.create_ledger(TOPIC, 1)
    stop = threading.Event()
    errors: list[BaseException] = []

    def tail() -> None:
        try:
            while not stop.is_set():
                last = writer.last_entry_id
                if last >= 0:
                    got = writer.read(0, last)
                    assert all(p == str(i).encode() for i, p in enumerate(got))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    thread = threading.Thread(target=tail)
    thread.start()
    for i in range(2000):
        writer.append(str(i).encode())
    stop.set()
    thread.join()
    writer.close()
    assert not errors


def test_throughput(tmp_path: Path) -> None:
    """Floor checks (measured figures are far higher); 1 KiB entries, 20 MiB."""
    store = LedgerStore(tmp_path, fsync="batch")
    writer = store.create_ledger(TOPIC, 1)
    batch = [os.urandom(1024) for _ in range(1000)]
    start = time.perf_counter()
    for _ in range(20):
        writer.append_batch(batch)
    writer.close()
    append_mb_s = 20 * 1000 * 1024 / (time.perf_counter() - start) / 1e6
    reader: ClosedLedgerReader = store.open_reader(TOPIC, 1)
    start = time.perf_counter()
    for first in range(0, 20_000, 500):
        assert len(reader.read(first, first + 499)) == 500
    read_mb_s = 20 * 1000 * 1024 / (time.perf_counter() - start) / 1e6
    assert append_mb_s > 20, append_mb_s
    assert read_mb_s > 20, read_mb_s


def test_write_failure_poisons_writer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = make_store(tmp_path)
    writer = store.create_ledger(TOPIC, 1)
    writer.append(b"kept")

    def no_space(fd: int, data: object, offset: int) -> int:
        raise OSError(28, "No space left on device")

    with monkeypatch.context() as patch:
        patch.setattr(os, "pwrite", no_space)
        with pytest.raises(LedgerStoreError, match="No space left"):
            writer.append(b"lost")
    with pytest.raises(LedgerStoreError, match="an earlier write failed"):
        writer.append(b"again")
    with pytest.raises(LedgerStoreError, match="an earlier write failed"):
        writer.close()
    writer.abandon()
    report = store.recover(TOPIC, 1)
    assert (report.entry_count, report.dropped_bytes) == (1, 0)
    assert store.open_reader(TOPIC, 1).read(0, 0) == [b"kept"]
