"""The orphan audit and gc, and the service loop doing the same work."""

from __future__ import annotations

import uuid
from collections.abc import Callable

from formats.extension import crc32c
from formats.keys import ROLE_DATA, data_key, object_user_metadata
from offloader.api import Offloader, Position
from tests.lifecycle.helpers import (
    NS,
    TOPIC,
    FakeClock,
    local_files,
    payloads,
    small_broker,
    store_keys,
    uploads,
)


def make_leftovers(off: Offloader) -> tuple[str, str, str]:
    """An object with an unknown UUID, a non-offload key, an incomplete upload."""
    store = off.runtime.store
    stray = data_key(str(uuid.uuid4()), 42)
    store.put(stray, b"orphan", {})
    store.put("notes/readme.txt", b"hello", {})
    upload_key = data_key(str(uuid.uuid4()), 43)
    upload_id = store.create_multipart_upload(upload_key, {})
    store.upload_part(upload_key, upload_id, 1, b"p", crc32c(b"p"))
    return stray, "notes/readme.txt", upload_key


def test_orphans_listed_dry_run_keeps_them_gc_removes_them(off: Offloader) -> None:
    off.produce(TOPIC, payloads(12))
    off.offload_prefix(TOPIC, position=Position(2, 0))
    claimed = store_keys(off)
    stray, junk, upload_key = make_leftovers(off)
    context = off.topic_info(TOPIC).ledgers[1].offload
    assert context is not None
    off.runtime.store.delete(context.index_key)  # a record whose object is missing

    report = off.orphans(min_age_seconds=0)
    reasons = {o.key: o.reason for o in report.objects}
    assert reasons == {stray: "unclaimed-uuid", junk: "not-an-offload-key"}
    assert [u.key for u in report.uploads] == [upload_key]
    assert [(m.ledger_id, m.key) for m in report.missing] == [(1, context.index_key)]
    assert not report.clean

    young = off.orphans(min_age_seconds=3600)  # min age protects young objects and uploads
    assert young.objects == () and young.uploads == () and len(young.missing) == 1

    dry = off.gc(dry_run=True, min_age_seconds=0)
    assert not dry.removed and len(dry.objects) == 2
    assert stray in store_keys(off) and uploads(off) == [upload_key]

    # none of the three was written by this installation (no attempt of its history):
    # reported, never deleted (issue 21, item 7)
    assert not off.gc(min_age_seconds=3600).removed
    done = off.gc(min_age_seconds=0)
    assert not done.removed
    assert [(u.key, u.reason) for u in done.uploads] == [(upload_key, "foreign-upload")]
    assert not any(o.deletable for o in done.objects)
    expected = sorted([*(k for k in claimed if k != context.index_key), stray, junk])
    assert sorted(store_keys(off)) == expected
    assert uploads(off) == [upload_key]


def test_superseded_attempt_objects_are_reported(off: Offloader) -> None:
    off.produce(TOPIC, payloads(7))
    rt = off.runtime
    old = str(uuid.uuid4())
    rt.meta.begin_offload(
        0,
        old,
        rt.driver,
        rt.now_ms(),
        data_key=data_key(old, 0),
        index_key=data_key(old, 0) + "-index",
    )
    new = str(uuid.uuid4())
    rt.meta.begin_offload(
        0,
        new,
        rt.driver,
        rt.now_ms(),
        data_key=data_key(new, 0),
        index_key=data_key(new, 0) + "-index",
    )
    ours = object_user_metadata(ROLE_DATA, software_version=rt.broker.offload.software_version)
    rt.store.put(data_key(old, 0), b"x", ours)
    rt.store.put(data_key(new, 0), b"x", ours)  # claimed (a running attempt): not an orphan
    report = off.orphans(min_age_seconds=0)
    assert [(o.key, o.reason) for o in report.objects] == [(data_key(old, 0), "superseded-attempt")]
    assert report.objects[0].deletable
    # the same key without our marker in its metadata: not provably ours, kept
    rt.store.put(data_key(old, 0), b"x", {})
    report = off.orphans(min_age_seconds=0)
    assert [(o.reason, o.deletable) for o in report.objects] == [("foreign-object", False)]
    off.gc(min_age_seconds=0)
    assert data_key(old, 0) in store_keys(off)
    rt.store.put(data_key(old, 0), b"x", ours)
    assert off.gc(min_age_seconds=0).removed
    assert data_key(old, 0) not in store_keys(off)


def test_service_tick_does_the_whole_lifecycle(off: Offloader, clock: FakeClock) -> None:
    off.set_offload_threshold(NS, 0)
    off.set_offload_deletion_lag(NS, 1000)
    off.set_retention(NS, 1200, 0)
    stray, _junk, _upload = make_leftovers(off)
    off.produce(TOPIC, payloads(12))  # rollovers: ledgers 0 and 1 offloaded at once
    clock.advance(2)
    report = off.service_tick()
    assert report.local_deleted == (0, 1)
    # the sweep leaves what this installation did not write (issue 21, item 7)
    assert report.orphans_removed == 0
    assert local_files(off) == [2]
    off.produce(TOPIC, payloads(5))  # ledger 2 closes: total 1500 > 1200 trims ledger 0
    assert [r.ledger_id for r in off.topic_info(TOPIC).ledgers] == [1, 2, 3]
    assert stray in store_keys(off) and len(uploads(off)) == 1
    assert not any(o.deletable for o in off.orphans(min_age_seconds=0).objects)


def test_run_service_once_and_stop(make_offloader: Callable[..., Offloader]) -> None:
    off = make_offloader(broker=small_broker())
    off.create_namespace(NS)
    off.set_offload_threshold(NS, 0)
    off.produce(TOPIC, payloads(7))
    ticks: list[object] = []
    off.run_service(once=True, on_tick=ticks.append)
    assert len(ticks) == 1
    calls = iter([False, False, True])
    stops: list[object] = []
    off.run_service(
        interval_seconds=0.01, should_stop=lambda: next(calls, True), on_tick=stops.append
    )
    assert len(stops) <= 1
