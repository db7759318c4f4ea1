"""Namespace auto-offload: size threshold (0 and N) and time threshold, on rollover and tick."""

from __future__ import annotations

from offloader.api import Offloader
from tests.lifecycle.helpers import NS, TOPIC, FakeClock, payloads, store_keys


def offloaded(off: Offloader) -> list[int]:
    return [r.ledger_id for r in off.topic_info(TOPIC).ledgers if r.offload_complete]


def test_threshold_zero_offloads_every_closed_ledger_on_rollover(off: Offloader) -> None:
    off.set_offload_threshold(NS, 0)
    result = off.produce(TOPIC, payloads(23))
    assert result.ledgers_closed == (0, 1, 2, 3)
    assert result.ledgers_offloaded == (0, 1, 2, 3)
    assert offloaded(off) == [0, 1, 2, 3]
    assert len(store_keys(off)) == 8
    assert off.offload_status(TOPIC).status == "SUCCESS"


def test_size_threshold_keeps_the_newest_ledgers_local(off: Offloader) -> None:
    off.set_offload_threshold(NS, 1000)  # 500-byte ledgers: sums 500, 1000, 1500 > 1000
    off.produce(TOPIC, payloads(23))
    assert offloaded(off) == [0, 1]


def test_auto_offload_is_off_by_default(off: Offloader) -> None:
    off.produce(TOPIC, payloads(23))
    assert offloaded(off) == [] and off.service_tick().offloaded == ()
    assert off.offload_status(TOPIC).status == "NOT_RUN"


def test_time_threshold_with_an_injected_clock(off: Offloader, clock: FakeClock) -> None:
    off.set_offload_threshold(NS, -1, seconds=60)
    off.produce(TOPIC, payloads(12))  # ledgers 0, 1 closed now
    assert offloaded(off) == []
    clock.advance(30)
    off.produce(TOPIC, payloads(5))  # ledger 2 closes at +30 s
    assert off.service_tick().offloaded == ()
    clock.advance(31)  # 61 s after ledgers 0 and 1 closed, 31 s after ledger 2
    assert off.service_tick().offloaded == (0, 1)
    clock.advance(30)
    assert off.service_tick().offloaded == (2,)


def test_threshold_set_later_is_applied_by_the_service(off: Offloader) -> None:
    off.produce(TOPIC, payloads(23))
    off.set_offload_threshold(NS, 0)
    report = off.service_tick()
    assert report.offloaded == (0, 1, 2, 3) and report.offload_failures == ()
