"""``time_text``: the tables show UTC times, not epoch milliseconds; JSON keeps the numbers."""

from __future__ import annotations

import datetime

import pytest

from cli.render import time_text


def test_epoch_milliseconds_become_a_utc_time_to_the_millisecond() -> None:
    ms = int(datetime.datetime(2026, 11, 27, 20, 42, 38, 123000, datetime.UTC).timestamp() * 1000)
    assert time_text(ms) == "2026-11-27T20:42:38.123Z"
    assert time_text(0) == "1970-01-01T00:00:00.000Z"


@pytest.mark.parametrize("ms", [2**62, -(2**62)])
def test_a_time_outside_the_calendar_is_shown_as_its_number(ms: int) -> None:
    assert time_text(ms) == str(ms)


def test_unknown_is_a_dash() -> None:
    assert time_text(None) == "-"
