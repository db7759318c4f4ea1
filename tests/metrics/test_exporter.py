"""The Prometheus metrics set and the metered object store, in-process: Pulsar's names and
labels, the rates, lag gauges that follow the topics, request outcomes; and the endpoint served
over HTTP on a port the system picks."""

from __future__ import annotations

from pathlib import Path

import pytest

from offloader.api import MetricsAddress, start_metrics_server
from offloader.errors import ConfigError, PreconditionFailed
from offloader.metrics import NO_METRICS, TopicLag
from offloader.metrics.prometheus import PrometheusMetrics
from offloader.store import LocalObjectStore, MeteredObjectStore
from offloader.store.faulty import FaultPlan, FaultyObjectStore
from tests.metrics.scrape import parse, scrape, total, value

TOPIC = "persistent://tenant/ns/events"
LABELS = {"namespace": "tenant/ns", "topic": TOPIC}


def samples(metrics: PrometheusMetrics) -> dict:  # type: ignore[type-arg]
    return parse(metrics.exposition().decode())


def test_pulsar_names_and_labels() -> None:
    m = PrometheusMetrics()
    m.record_offload_bytes(TOPIC, 1000)
    m.record_offload_error(TOPIC)
    m.record_write_to_storage_error(TOPIC)
    m.record_read_offload_error(TOPIC)
    m.record_read_offload_bytes(TOPIC, 300)
    m.record_read_offload_index_latency(TOPIC, 0.002)
    m.record_read_offload_data_latency(TOPIC, 0.5)
    m.record_read_ledger_latency(TOPIC, 0.000_25)
    m.record_delete_offload_ops(TOPIC, True)
    m.record_delete_offload_ops(TOPIC, False)
    m.record_delete_offload_ops("", True)
    s = samples(m)
    p = "brk_ledgeroffloader_"
    assert value(s, p + "offload_bytes_total", **LABELS) == 1000
    assert value(s, p + "offload_error_total", **LABELS) == 1
    assert value(s, p + "write_storage_error_total", **LABELS) == 1
    assert value(s, p + "read_offload_error_total", **LABELS) == 1
    assert value(s, p + "read_bytes_total", **LABELS) == 300
    # Summaries in microseconds, as Pulsar observes them
    assert value(s, p + "read_offload_index_latency_count", **LABELS) == 1
    assert value(s, p + "read_offload_index_latency_sum", **LABELS) == pytest.approx(2000)
    assert value(s, p + "read_offload_data_latency_sum", **LABELS) == pytest.approx(500_000)
    assert value(s, p + "read_ledger_latency_sum", **LABELS) == pytest.approx(250)
    for status in ("succeed", "failed"):
        assert value(s, p + "delete_offload_ops_total", **LABELS, status=status) == 1
    unknown = {"namespace": "unknown", "topic": "unknown", "status": "succeed"}
    assert value(s, p + "delete_offload_ops_total", **unknown) == 1


def test_rates_are_bytes_since_the_last_refresh_per_second() -> None:
    m = PrometheusMetrics()
    m.refresh_rates()
    m.record_offload_bytes(TOPIC, 10_000_000)
    m.record_read_offload_bytes(TOPIC, 5_000_000)
    m.refresh_rates()
    s = samples(m)
    offload_rate = value(s, "brk_ledgeroffloader_offload_rate", **LABELS)
    read_rate = value(s, "brk_ledgeroffloader_read_offload_rate", **LABELS)
    assert offload_rate > 0 and read_rate == pytest.approx(offload_rate / 2)
    m.refresh_rates()  # nothing since: the rate drops to 0; the counters stay
    s = samples(m)
    assert value(s, "brk_ledgeroffloader_offload_rate", **LABELS) == 0
    assert value(s, "brk_ledgeroffloader_offload_bytes_total", **LABELS) == 10_000_000


def test_lag_gauges_follow_the_topics_and_partitions() -> None:
    m = PrometheusMetrics()
    other = "persistent://tenant/ns/other"
    m.set_topic_lags({TOPIC: TopicLag(2, 300, 1, 100), other: TopicLag(1, 5, 0, 0)})
    s = samples(m)
    assert value(s, "offloader_offload_lag_ledgers", **LABELS) == 2
    assert value(s, "offloader_offload_lag_bytes", **LABELS) == 300
    assert value(s, "offloader_deletion_backlog_ledgers", **LABELS) == 1
    assert value(s, "offloader_deletion_backlog_bytes", **LABELS) == 100
    m.set_topic_lags({TOPIC: TopicLag()})  # the other topic was deleted: its series go
    s = samples(m)
    assert value(s, "offloader_offload_lag_ledgers", **LABELS) == 0
    assert total(s, "offloader_offload_lag_ledgers", topic=other) == 0
    assert not any(other in dict(labels).values() for _, labels in s)
    m.set_kafka_copy_lag([("orders", 0, 7000, 3), ("orders", 1, 0, 0)])
    m.set_kafka_copy_lag([("orders", 0, 4000, 1)])
    s = samples(m)
    lag = "kafka_server_brokertopicmetrics_remotecopylag"
    assert value(s, lag + "bytes", topic="orders", partition="0") == 4000
    assert value(s, lag + "segments", topic="orders", partition="0") == 1
    assert not any(("partition", "1") in labels for _, labels in s)


def test_export_lag_gauges_and_an_unknown_time() -> None:
    m = PrometheusMetrics()
    lake = {**LABELS, "target": "s3://lake/p"}
    m.set_export_lag(TOPIC, "s3://lake/p", 12, 90.5)
    s = samples(m)
    assert value(s, "offloader_export_lag_entries", **lake) == 12
    assert value(s, "offloader_export_lag_seconds", **lake) == 90.5
    m.set_export_lag(TOPIC, "s3://lake/p", 7, None)  # no publish time: no seconds sample
    s = samples(m)
    assert value(s, "offloader_export_lag_entries", **lake) == 7
    assert ("offloader_export_lag_seconds", frozenset(lake.items())) not in s
    m.set_export_lag(TOPIC, "s3://lake/p", 0, None)  # removing an absent series is no error
    NO_METRICS.set_export_lag(TOPIC, "s3://lake/p", 3, 1.0)


def test_each_set_has_its_own_registry() -> None:
    a, b = PrometheusMetrics(), PrometheusMetrics()  # no "Duplicated timeseries" error
    a.record_offload_error(TOPIC)
    assert value(samples(b), "brk_ledgeroffloader_offload_error_total", **LABELS) == 0


def test_the_metered_store_records_requests_by_operation_and_outcome(tmp_path: Path) -> None:
    m = PrometheusMetrics()
    store = MeteredObjectStore(LocalObjectStore(tmp_path), m)
    store.put("a/1", b"x" * 10, {})
    assert store.get("a/1").data == b"x" * 10
    assert [o.key for o in store.list("a/")] == ["a/1"]
    with pytest.raises(PreconditionFailed):
        store.put("a/1", b"y", {}, if_none_match=True)
    from offloader.errors import ObjectNotFound

    with pytest.raises(ObjectNotFound):
        store.head("a/missing")
    store.delete("a/1")
    s = samples(m)
    name = "offloader_store_requests_total"
    assert value(s, name, backend="file", operation="put", outcome="success") == 1
    assert value(s, name, backend="file", operation="get", outcome="success") == 1
    assert value(s, name, backend="file", operation="list", outcome="success") == 1
    assert value(s, name, backend="file", operation="delete", outcome="success") == 1
    outcome = "precondition_failed"
    assert value(s, name, backend="file", operation="put", outcome=outcome) == 1
    assert value(s, name, backend="file", operation="head", outcome="not_found") == 1
    hist = "offloader_store_request_duration_seconds_count"
    assert value(s, hist, backend="file", operation="put", outcome="success") == 1
    bucket = "offloader_store_request_duration_seconds_bucket"
    inf = value(s, bucket, backend="file", operation="get", outcome="success", le="+Inf")
    assert inf == 1


def test_the_no_op_set_records_nothing_and_the_runtime_defaults_to_it() -> None:
    from offloader.runtime import Runtime

    assert NO_METRICS.enabled is False
    NO_METRICS.record_offload_bytes(TOPIC, 1)  # does nothing, raises nothing
    assert Runtime.__dataclass_fields__["metrics"].default is NO_METRICS


def test_the_endpoint_on_a_free_port_and_a_port_in_use() -> None:
    server = start_metrics_server(MetricsAddress("127.0.0.1", 0))
    try:
        assert server.port > 0 and server.url == f"http://127.0.0.1:{server.port}/metrics"
        server.metrics.record_offload_error(TOPIC)
        s = scrape(server.url)
        assert value(s, "brk_ledgeroffloader_offload_error_total", **LABELS) == 1
        with pytest.raises(ConfigError, match=f"cannot serve metrics on 127.0.0.1:{server.port}"):
            start_metrics_server(MetricsAddress("127.0.0.1", server.port))
    finally:
        server.close()


def test_a_failing_and_an_abandoned_listing(tmp_path: Path) -> None:
    from offloader.errors import StoreUnavailable

    m = PrometheusMetrics()
    inner = LocalObjectStore(tmp_path)
    for key in ("a/1", "a/2", "a/3"):
        inner.put(key, b"x", {})
    plan = FaultPlan().fail("list", StoreUnavailable("injected"), on_call=2)
    store = MeteredObjectStore(FaultyObjectStore(inner, plan), m)
    listing = store.list("a/")
    assert next(listing).key == "a/1"
    listing.close()  # the caller stopped early: still one successful request
    with pytest.raises(StoreUnavailable):
        list(store.list("a/"))
    s = samples(m)
    name = "offloader_store_requests_total"
    assert value(s, name, backend="file", operation="list", outcome="success") == 1
    assert value(s, name, backend="file", operation="list", outcome="unavailable") == 1
