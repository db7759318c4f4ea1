"""The lag computations the service publishes (offload lag, deletion backlog, Kafka copy lag)
and the ``--metrics-addr`` parser: pure functions, checked on hand-made ledger lists."""

from __future__ import annotations

import pytest

from offloader.errors import ConfigError
from offloader.metrics import (
    Lag,
    MetricsAddress,
    deletion_backlog,
    kafka_copy_lag,
    offload_lag,
    parse_metrics_addr,
)
from offloader.policies import LedgerView, NamespacePolicies

NOW = 10_000_000


def closed(ledger_id: int, size: int, *, age_s: int = 60, **kw: object) -> LedgerView:
    return LedgerView(ledger_id, 10, size, NOW - age_s * 1000, **kw)  # type: ignore[arg-type]


def test_offload_lag_counts_what_the_size_threshold_selects_and_is_not_offloaded() -> None:
    ledgers = [
        closed(0, 100),
        closed(1, 200, offload_complete=True, offloaded_ms=NOW),
        closed(2, 300),
        closed(3, 400),
        LedgerView(4, 5, 50, None),  # open: never eligible
    ]
    # walking newest to oldest, the sum passes 500 at ledger 2 (400 + 300): 0, 1, 2 selected
    lag = offload_lag(ledgers, NamespacePolicies(offload_threshold_bytes=500), NOW)
    assert lag == Lag(2, 400)  # ledgers 0 and 2; 1 is offloaded already
    assert offload_lag(ledgers, NamespacePolicies(offload_threshold_bytes=0), NOW) == Lag(3, 800)


def test_offload_lag_by_age_and_with_thresholds_off() -> None:
    ledgers = [closed(0, 100, age_s=3600), closed(1, 200, age_s=10)]
    by_age = NamespacePolicies(offload_threshold_seconds=60)
    assert offload_lag(ledgers, by_age, NOW) == Lag(1, 100)
    assert offload_lag(ledgers, NamespacePolicies(), NOW) == Lag(0, 0)  # thresholds off


def test_offload_lag_includes_failed_attempts_whatever_the_thresholds() -> None:
    ledgers = [closed(0, 100), closed(1, 200), LedgerView(2, 0, 0, NOW)]
    lag = offload_lag(ledgers, NamespacePolicies(), NOW, incomplete={1, 2})
    assert lag == Lag(1, 200)  # ledger 2 is empty: nothing to offload


def test_deletion_backlog_is_offloaded_ledgers_past_the_lag_still_local() -> None:
    ledgers = [
        closed(0, 100, offload_complete=True, offloaded_ms=NOW - 7200_000),
        closed(1, 200, offload_complete=True, offloaded_ms=NOW - 7200_000, local_deleted=True),
        closed(2, 300, offload_complete=True, offloaded_ms=NOW - 60_000),
        closed(3, 400),
    ]
    assert deletion_backlog(ledgers, 3600_000, NOW) == Lag(1, 100)
    assert deletion_backlog(ledgers, 0, NOW) == Lag(2, 400)
    assert deletion_backlog(ledgers, None, NOW) == Lag(0, 0)  # never delete: no backlog


def test_kafka_copy_lag_counts_closed_segments_above_the_watermark() -> None:
    segments = [(0, 1000), (100, 2000), (250, 4000)]
    assert kafka_copy_lag(segments, -1) == Lag(3, 7000)
    assert kafka_copy_lag(segments, 99) == Lag(2, 6000)
    assert kafka_copy_lag(segments, 249) == Lag(1, 4000)
    assert kafka_copy_lag(segments, 400) == Lag(0, 0)
    assert kafka_copy_lag([], -1) == Lag(0, 0)


@pytest.mark.parametrize(
    ("text", "host", "port"),
    [
        ("127.0.0.1:9108", "127.0.0.1", 9108),
        ("localhost:0", "localhost", 0),
        (":9108", "0.0.0.0", 9108),
        ("[::1]:9108", "::1", 9108),
        (" 127.0.0.1:65535 ", "127.0.0.1", 65535),
    ],
)
def test_metrics_addresses_that_parse(text: str, host: str, port: int) -> None:
    assert parse_metrics_addr(text) == MetricsAddress(host, port)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty"),
        ("9108", "no port"),
        ("127.0.0.1:", "not a number"),
        ("127.0.0.1:http", "not a number"),
        ("127.0.0.1:70000", "above 65535"),
        ("::1:9108", "brackets"),
        ("[::1]9108", "not HOST:PORT"),
        ("http://x:9108", "not a host"),
    ],
)
def test_bad_metrics_addresses_are_config_errors(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_metrics_addr(text)


def test_an_address_prints_as_it_is_written() -> None:
    assert str(MetricsAddress("::1", 9108)) == "[::1]:9108"
    assert str(MetricsAddress("127.0.0.1", 0)) == "127.0.0.1:0"
