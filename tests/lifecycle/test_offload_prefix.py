"""offload-prefix: Pulsar's semantics, status, lock, retries, the commit protocol's corners."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from formats.extension import crc32c
from formats.keys import data_key, index_key
from offloader.api import Offloader, Position
from offloader.errors import OffloadError, OffloadInProgress, StoreUnavailable
from offloader.store.faulty import FaultPlan, FaultyObjectStore
from tests.lifecycle.helpers import (
    NS,
    TOPIC,
    FakeClock,
    payloads,
    read_all,
    small_broker,
    store_keys,
    uploads,
)

REPO = Path(__file__).resolve().parents[2]


def offloaded_ids(off: Offloader) -> list[int]:
    return [r.ledger_id for r in off.topic_info(TOPIC).ledgers if r.offload_complete]


def test_offload_prefix_by_position(off: Offloader) -> None:
    off.produce(TOPIC, payloads(23))  # ledgers 0..3 closed, 4 current
    assert off.offload_status(TOPIC).status == "NOT_RUN"
    trigger = off.offload_prefix(TOPIC, position=Position(2, 3))
    assert trigger.position == Position(2, 0)
    assert trigger.ledgers == (0, 1) and trigger.offloaded == (0, 1) and trigger.failed == ()
    assert offloaded_ids(off) == [0, 1]
    assert off.offload_status(TOPIC).status == "SUCCESS"
    assert len(store_keys(off)) == 4
    # again up to the current ledger: already offloaded ones are skipped, the current never
    again = off.offload_prefix(TOPIC, position=Position(4, 0))
    assert again.ledgers == (2, 3) and again.position == Position(4, 0)
    assert offloaded_ids(off) == [0, 1, 2, 3]
    # a position far ahead: the walk runs out at the current ledger
    assert off.offload_prefix(TOPIC, position=Position(4, 2)).ledgers == ()


def test_offload_prefix_refuses_invalid_positions(off: Offloader) -> None:
    off.produce(TOPIC, payloads(7))  # ledger 0 (5), ledger 1 current (2)
    with pytest.raises(OffloadError, match="invalid position"):
        off.offload_prefix(TOPIC, position=Position(9, 0))
    with pytest.raises(OffloadError, match="invalid position"):
        off.offload_prefix(TOPIC, position=Position(0, 5))
    off.roll_over(TOPIC)  # ledger 2 is current and empty: (2, 0) is still allowed
    assert off.offload_prefix(TOPIC, position=Position(2, 0)).ledgers == (0, 1)


@pytest.mark.parametrize(
    ("threshold", "position", "ledgers"),
    [
        (0, Position(4, 0), (0, 1, 2, 3)),  # the current ledger alone is over: all before it
        (299, Position(4, 0), (0, 1, 2, 3)),
        (300, Position(4, 0), (0, 1, 2, 3)),  # 300 + 500 > 300 at ledger 3: keep from 4
        (799, Position(4, 0), (0, 1, 2, 3)),
        (800, Position(3, 0), (0, 1, 2)),  # 800 fits; 1300 > 800 at ledger 2: keep from 3
        (1000, Position(3, 0), (0, 1, 2)),  # 300 + 500 + 500 > 1000 at ledger 2
        (1300, Position(2, 0), (0, 1)),
    ],
)
def test_offload_prefix_by_size_threshold(
    off: Offloader, threshold: int, position: Position, ledgers: tuple[int, ...]
) -> None:
    off.produce(TOPIC, payloads(23))  # 4 closed ledgers of 500 bytes, current 300
    trigger = off.offload_prefix(TOPIC, size_threshold=threshold)
    assert trigger.position == position and trigger.ledgers == ledgers


def test_nothing_to_offload(off: Offloader) -> None:
    off.produce(TOPIC, payloads(23))
    trigger = off.offload_prefix(TOPIC, size_threshold=2300)
    assert trigger.position is None and trigger.ledgers == ()
    assert off.offload_status(TOPIC).status == "NOT_RUN"
    assert store_keys(off) == []


def test_empty_ledgers_are_skipped(off: Offloader) -> None:
    off.produce(TOPIC, payloads(2))
    off.roll_over(TOPIC)
    off.runtime.meta.close_ledger(1, off.runtime.now_ms(), 0, 0)  # an empty closed ledger
    off.produce(TOPIC, [b"x"])
    assert off.offload_prefix(TOPIC, position=Position(2, 0)).ledgers == (0,)


def test_a_second_offload_of_the_topic_is_refused(off: Offloader) -> None:
    off.produce(TOPIC, payloads(12))
    meta = off.runtime.meta
    assert meta.try_acquire_offload_lock(TOPIC, "someone-else", off.runtime.now_ms(), 300_000)
    with pytest.raises(OffloadInProgress, match="Offload operation already running"):
        off.offload_prefix(TOPIC, position=Position(2, 0))
    meta.release_offload_lock(TOPIC, "someone-else")
    assert off.offload_prefix(TOPIC, position=Position(2, 0)).offloaded == (0, 1)
    assert meta.get_offload_lock(TOPIC) is None


SLOW_OFFLOAD = textwrap.dedent(
    """
    import sys
    from offloader.api import Offloader, Position
    from offloader.store.faulty import FaultPlan, FaultyObjectStore
    from tests.lifecycle.helpers import TOPIC, small_broker
    off = Offloader.from_settings(sys.argv[1], broker=small_broker())
    off.runtime.store = FaultyObjectStore(off.runtime.store, FaultPlan().slow("upload_part", 0.5))
    trigger = off.offload_prefix(TOPIC, position=Position(2, 0))
    print(",".join(map(str, trigger.offloaded)))
    """
)


def test_concurrent_offload_prefix_from_two_processes(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with Offloader.from_settings(home, broker=small_broker()) as off:
        off.create_namespace(NS)
        off.produce(TOPIC, payloads(12))
        child = subprocess.Popen(
            [sys.executable, "-c", SLOW_OFFLOAD, str(home)],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        try:
            deadline = time.monotonic() + 20
            while off.runtime.meta.get_offload_lock(TOPIC) is None:
                assert child.poll() is None and time.monotonic() < deadline
                time.sleep(0.02)
            with pytest.raises(OffloadInProgress, match="Offload operation already running"):
                off.offload_prefix(TOPIC, position=Position(2, 0))
            assert off.offload_status(TOPIC).status == "RUNNING"
            out, _ = child.communicate(timeout=30)
        finally:
            child.kill()
        assert child.returncode == 0 and out.strip().splitlines()[-1] == "0,1"
        assert off.offload_status(TOPIC).status == "SUCCESS"
        assert offloaded_ids(off) == [0, 1]


def wrap_store(off: Offloader, plan: FaultPlan) -> FaultyObjectStore:
    faulty = FaultyObjectStore(off.runtime.store, plan)
    off.runtime.store = faulty
    return faulty


def test_failure_sets_error_status_and_the_service_retries_with_backoff(
    off: Offloader, clock: FakeClock
) -> None:
    off.produce(TOPIC, payloads(7))
    wrap_store(off, FaultPlan().fail("upload_part", StoreUnavailable("injected outage"), times=1))
    trigger = off.offload_prefix(TOPIC, position=Position(1, 0))
    assert trigger.offloaded == () and trigger.failed[0][0] == 0
    assert "injected outage" in trigger.failed[0][1]
    status = off.offload_status(TOPIC)
    assert status.status == "ERROR" and status.last_error and "injected outage" in status.last_error
    assert store_keys(off) == [] and uploads(off) == []  # the writer left nothing
    failed = off.runtime.meta.list_attempts(ledger_id=0)
    assert [a.state for a in failed] == ["FAILED"]
    assert off.service_tick().offloaded == ()  # backoff: 1 s after the first failure
    clock.advance(2)
    assert off.service_tick().offloaded == (0,)
    assert off.offload_status(TOPIC).status == "SUCCESS"
    assert [a.state for a in off.runtime.meta.list_attempts(ledger_id=0)] == [
        "CLEANED",
        "COMPLETED",
    ]


def test_previous_incomplete_attempt_is_cleaned_on_retry(off: Offloader) -> None:
    off.produce(TOPIC, payloads(7))
    rt = off.runtime
    old = str(uuid.uuid4())
    # a process that crashed mid-offload: attempt recorded, a stray object and an upload
    rt.meta.begin_offload(
        0, old, rt.driver, rt.now_ms(), data_key=data_key(old, 0), index_key=index_key(old, 0)
    )
    rt.store.put(index_key(old, 0), b"partial index", {})
    upload_id = rt.store.create_multipart_upload(data_key(old, 0), {})
    rt.store.upload_part(data_key(old, 0), upload_id, 1, b"part", crc32c(b"part"))
    trigger = off.offload_prefix(TOPIC, position=Position(1, 0))
    assert trigger.offloaded == (0,)
    context = off.topic_info(TOPIC).ledgers[0].offload
    assert context is not None and context.uuid != old
    assert store_keys(off) == sorted([context.data_key, context.index_key])
    assert uploads(off) == []
    assert rt.meta.get_attempt(old).state == "CLEANED"


def test_cas_conflict_deletes_the_new_objects(off: Offloader) -> None:
    off.produce(TOPIC, payloads(7))
    rt = off.runtime
    rival = str(uuid.uuid4())

    def rival_begins(**_: Any) -> None:  # another process takes the ledger over meanwhile
        rt.meta.begin_offload(
            0,
            rival,
            rt.driver,
            rt.now_ms(),
            data_key=data_key(rival, 0),
            index_key=index_key(rival, 0),
        )

    wrap_store(
        off,
        FaultPlan().fail(
            "put", lambda: rival_begins(), match=lambda a: str(a["key"]).endswith("-index"), times=1
        ),
    )  # type: ignore[arg-type, return-value]
    trigger = off.offload_prefix(TOPIC, position=Position(1, 0))
    assert trigger.offloaded == () and "OffloadConflict" in trigger.failed[0][1]
    assert store_keys(off) == [] and uploads(off) == []
    ledger = off.topic_info(TOPIC).ledgers[0]
    assert ledger.offload is not None and ledger.offload.uuid == rival
    assert not ledger.offload_complete
    lost = [a for a in rt.meta.list_attempts(ledger_id=0) if a.uuid != rival]
    assert [a.state for a in lost] == ["CLEANED"]
    # the data is still readable locally
    assert len(read_all(off)) == 7


def test_a_running_status_whose_offload_died_reads_as_error(
    off: Offloader, clock: FakeClock
) -> None:
    """``kill -9`` during an offload leaves RUNNING and the lock behind: the status says the
    run ended without finishing (so ``offload-status -w`` returns), and the next run takes
    over and succeeds."""
    off.produce(TOPIC, payloads(7))
    meta = off.runtime.meta
    stale_ms = off.runtime.lock_stale_ms
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    here = socket.gethostname()

    def running_with_lock(owner: str | None) -> Any:
        held = meta.get_offload_lock(TOPIC)
        if held is not None:
            meta.release_offload_lock(TOPIC, held.owner)
        if owner is not None:
            assert meta.try_acquire_offload_lock(TOPIC, owner, off.runtime.now_ms(), stale_ms)
        meta.set_offload_status(TOPIC, "RUNNING", off.runtime.now_ms())
        return off.offload_status(TOPIC)

    assert running_with_lock(f"{here}:{os.getpid()}:live").status == "RUNNING"
    assert running_with_lock("elsewhere:1:remote").status == "RUNNING"  # fresh heartbeat
    clock.advance(stale_ms / 1000 + 1)
    assert off.offload_status(TOPIC).status == "ERROR"  # its heartbeat went stale
    assert running_with_lock(None).status == "ERROR"  # no lock at all
    dead = running_with_lock(f"{here}:{child.pid}:dead")
    assert dead.status == "ERROR" and dead.last_error is not None
    assert "ended without finishing" in dead.last_error and f":{child.pid}:" in dead.last_error
    assert off.offload_prefix(TOPIC, position=Position(1, 0)).offloaded == (0,)
    assert off.offload_status(TOPIC).status == "SUCCESS"
