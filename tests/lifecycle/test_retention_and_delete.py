"""Retention trimming and topic deletion remove local files and every object, orphaning none."""

from __future__ import annotations

import uuid

from formats.keys import data_key, index_key
from offloader.api import Offloader, Position
from tests.lifecycle.helpers import (
    NS,
    TOPIC,
    FakeClock,
    local_files,
    manifest_keys,
    payloads,
    read_all,
    store_keys,
    uploads,
)


def test_retention_by_size_trims_offloaded_ledgers_and_their_objects(off: Offloader) -> None:
    off.produce(TOPIC, payloads(23))  # 4 x 500 + 300
    off.offload_prefix(TOPIC, position=Position(4, 0))
    assert len(store_keys(off)) == 8
    off.set_retention(NS, 1000, 0)
    assert off.apply_retention(TOPIC) == [0, 1, 2]  # 2300 -> 1800 -> 1300 -> 800
    assert [r.ledger_id for r in off.topic_info(TOPIC).ledgers] == [3, 4]
    context = off.topic_info(TOPIC).ledgers[0].offload
    assert context is not None
    assert store_keys(off) == sorted([context.data_key, context.index_key])
    assert local_files(off) == [3, 4]
    assert [e[2] for e in read_all(off)] == payloads(23)[15:]
    assert off.orphans(min_age_seconds=0).clean


def test_retention_by_time_on_rollover_also_removes_failed_attempts(
    off: Offloader, clock: FakeClock
) -> None:
    off.produce(TOPIC, payloads(10))  # ledgers 0, 1 closed at t0; 2 current
    rt = off.runtime
    stale = str(uuid.uuid4())  # an attempt that crashed after writing an object
    rt.meta.begin_offload(
        0, stale, rt.driver, rt.now_ms(), data_key=data_key(stale, 0), index_key=index_key(stale, 0)
    )
    rt.store.put(data_key(stale, 0), b"half", {})
    off.set_retention(NS, 0, 60)
    clock.advance(61)
    result = off.produce(TOPIC, payloads(5))  # rollover runs the trim
    assert result.ledgers_closed == (2,)
    assert [r.ledger_id for r in off.topic_info(TOPIC).ledgers] == [2, 3]
    assert store_keys(off) == [] and uploads(off) == []
    assert rt.meta.get_attempt(stale).state == "CLEANED"


def test_delete_topic_leaves_nothing(off: Offloader) -> None:
    off.set_offload_threshold(NS, 0)
    off.produce(TOPIC, payloads(23))
    other = "persistent://public/default/other"
    off.produce(other, payloads(7))  # its ledger 5 closes and is offloaded too
    assert len(store_keys(off)) == 10
    off.delete_topic(TOPIC)
    assert off.list_topics() == [other]
    assert all(key.endswith(("-ledger-5", "-ledger-5-index")) for key in store_keys(off))
    assert local_files(off) == []
    assert off.orphans(min_age_seconds=0).clean
    off.delete_topic(other)
    assert store_keys(off) == [] and uploads(off) == [] and manifest_keys(off) == []
    assert not (off.runtime.home / "ledgers" / "persistent").exists() or not any(
        (off.runtime.home / "ledgers").rglob("*.ledger")
    )
