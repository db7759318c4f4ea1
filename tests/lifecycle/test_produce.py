"""Producing: rollover by entries, size and age; crash repair of the current ledger."""

from __future__ import annotations

import os
from collections.abc import Callable

import pytest

from offloader.api import Offloader, Position
from offloader.errors import NotFound
from tests.lifecycle.helpers import NS, TOPIC, FakeClock, payloads, read_all, small_broker


def test_produce_rolls_over_by_entry_count(off: Offloader) -> None:
    result = off.produce(TOPIC, payloads(23))
    assert result.entries == 23 and result.bytes == 2300
    assert result.first == Position(0, 0) and result.last == Position(4, 2)
    assert result.ledgers_closed == (0, 1, 2, 3)
    info = off.topic_info(TOPIC)
    assert [(r.ledger_id, r.entries, r.state) for r in info.ledgers] == [
        (0, 5, "CLOSED"),
        (1, 5, "CLOSED"),
        (2, 5, "CLOSED"),
        (3, 5, "CLOSED"),
        (4, 3, "OPEN"),
    ]
    assert info.entries == 23 and info.size_bytes == 2300 and info.local_size_bytes == 2300
    assert info.managed_ledger_name == "public/default/persistent/t1"
    assert [p for _, _, p, _ in read_all(off)] == payloads(23)


def test_produce_appends_to_the_same_ledger_across_calls(off: Offloader) -> None:
    off.produce(TOPIC, payloads(2, tag="a"))
    second = off.produce(TOPIC, payloads(2, tag="b"))
    assert second.first == Position(0, 2)
    assert [p for _, _, p, _ in read_all(off)] == payloads(2, tag="a") + payloads(2, tag="b")


def test_produce_short_topic_name_and_missing_namespace(
    make_offloader: Callable[..., Offloader],
) -> None:
    off = make_offloader()
    with pytest.raises(NotFound):
        off.produce("t1", [b"x"])
    off.create_namespace(NS)
    assert off.produce("t1", [b"x"]).topic == TOPIC
    assert off.list_topics() == [TOPIC] and off.list_topics(NS) == [TOPIC]


def test_rollover_by_size(make_offloader: Callable[..., Offloader]) -> None:
    off = make_offloader(broker=small_broker(max_entries_per_ledger=1000, max_ledger_size=250))
    off.create_namespace(NS)
    result = off.produce(TOPIC, payloads(7))
    assert result.ledgers_closed == (0, 1)  # 3 x 100 bytes >= 250
    assert [r.entries for r in off.topic_info(TOPIC).ledgers] == [3, 3, 1]


def test_rollover_by_age_and_minimum(
    make_offloader: Callable[..., Offloader], clock: FakeClock
) -> None:
    broker = small_broker(
        max_entries_per_ledger=1000, min_rollover_seconds=10, max_rollover_seconds=60
    )
    off = make_offloader(broker=broker)
    off.create_namespace(NS)
    off.produce(TOPIC, payloads(3))
    assert off.service_tick().rolled_over == ()
    clock.advance(61)
    assert off.service_tick().rolled_over == (0,)
    assert off.service_tick().rolled_over == ()  # the new ledger is empty
    assert [r.state for r in off.topic_info(TOPIC).ledgers] == ["CLOSED", "OPEN"]


def test_minimum_rollover_time_keeps_a_full_ledger_open(
    make_offloader: Callable[..., Offloader], clock: FakeClock
) -> None:
    off = make_offloader(broker=small_broker(min_rollover_seconds=600))
    off.create_namespace(NS)
    assert off.produce(TOPIC, payloads(12)).ledgers_closed == ()
    clock.advance(601)
    assert off.produce(TOPIC, payloads(1)).ledgers_closed == (0,)
    assert off.topic_info(TOPIC).ledgers[0].entries == 13


def test_roll_over_now(off: Offloader) -> None:
    off.produce(TOPIC, payloads(2))
    assert off.roll_over(TOPIC) == 0
    assert off.roll_over(TOPIC) is None  # empty current ledger
    assert [r.state for r in off.topic_info(TOPIC).ledgers] == ["CLOSED", "OPEN"]


def test_recovery_of_a_torn_tail_and_stale_stats(off: Offloader) -> None:
    off.produce(TOPIC, payloads(3))
    path = off.runtime.ledgers.ledger_path(TOPIC, 0)
    # entries acknowledged by the file but not yet in the metadata (crash between the two)
    writer = off.runtime.ledgers.open_for_append(TOPIC, 0)
    writer.append_batch(payloads(1, tag="z"))
    writer.abandon()
    with open(path, "ab") as f:  # and a torn record after them
        f.write(b"\x00\x00\x10\x00partial")
    assert off.topic_info(TOPIC).entries == 3
    off.produce(TOPIC, [b"after"])
    info = off.topic_info(TOPIC)
    assert info.entries == 5
    got = [p for _, _, p, _ in read_all(off)]
    assert got == [*payloads(3), *payloads(1, tag="z"), b"after"]
    assert os.path.getsize(path) > 0


def test_crash_after_the_file_close_before_the_metadata_close(off: Offloader) -> None:
    off.produce(TOPIC, payloads(3))
    writer = off.runtime.ledgers.open_for_append(TOPIC, 0)
    writer.close()  # the metadata still says OPEN
    result = off.produce(TOPIC, [b"next"])
    assert result.first == Position(1, 0)
    ledgers = off.topic_info(TOPIC).ledgers
    assert [(r.ledger_id, r.state, r.entries) for r in ledgers] == [
        (0, "CLOSED", 3),
        (1, "OPEN", 1),
    ]


def test_crash_after_close_before_next_ledger_is_repaired_by_the_service(off: Offloader) -> None:
    off.produce(TOPIC, payloads(3))
    writer = off.runtime.ledgers.open_for_append(TOPIC, 0)
    info = writer.close()
    assert info.closed_ms is not None
    off.runtime.meta.close_ledger(0, info.closed_ms, info.entry_count, info.length)
    off.service_tick()
    assert [r.state for r in off.topic_info(TOPIC).ledgers] == ["CLOSED", "OPEN"]


def test_missing_file_of_an_empty_current_ledger_is_created(off: Offloader) -> None:
    off.produce(TOPIC, payloads(5))  # ledger 0 closed, ledger 1 open and empty
    off.runtime.ledgers.delete_ledger(TOPIC, 1)
    off.produce(TOPIC, [b"x"])
    assert off.topic_info(TOPIC).ledgers[-1].entries == 1
