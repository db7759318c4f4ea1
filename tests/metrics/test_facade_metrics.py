"""Metrics through the facade on moto's S3 server over HTTP, scraped from the endpoint over
HTTP: an offload, reads (and a read whose object is gone), a failing store, the lag gauges,
topic deletion. ``Offloader.from_settings(metrics=...)`` is what ``service run --metrics-addr``
builds; here the same process also reads, which the service never does."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from devservers.endpoint import S3Endpoint
from formats.keys import data_key
from offloader.api import MetricsAddress, Offloader, Position, start_metrics_server
from offloader.errors import ObjectNotFound, StoreUnavailable
from offloader.metrics.prometheus import MetricsServer
from offloader.service import publish_lags
from offloader.store import MeteredObjectStore
from offloader.store.faulty import FaultPlan, FaultyObjectStore
from tests.lifecycle.helpers import NS, TOPIC, FakeClock, payloads, small_broker
from tests.metrics.scrape import scrape, total, value

pytestmark = pytest.mark.s3

LABELS = {"namespace": NS, "topic": TOPIC}
P = "brk_ledgeroffloader_"
REQUESTS = "offloader_store_requests_total"


@pytest.fixture()
def server() -> Iterator[MetricsServer]:
    server = start_metrics_server(MetricsAddress("127.0.0.1", 0))
    yield server
    server.close()


@pytest.fixture()
def off(
    tmp_path: Path,
    moto_endpoint: S3Endpoint,
    server: MetricsServer,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[Offloader]:
    for name, env_value in moto_endpoint.env().items():
        monkeypatch.setenv(name, env_value)
    bucket = moto_endpoint.new_bucket()
    off = Offloader.from_settings(
        tmp_path / "home",
        f"s3://{bucket}/offload",
        endpoint_url=moto_endpoint.url,
        region=moto_endpoint.region,
        broker=small_broker(),
        clock_ms=FakeClock(),
        metrics=server.metrics,
    )
    off.create_namespace(NS)
    yield off
    off.close()


def test_offload_read_and_delete_move_pulsars_metrics(
    off: Offloader, server: MetricsServer
) -> None:
    assert isinstance(off.runtime.store, MeteredObjectStore)
    off.produce(TOPIC, payloads(13, size=150))  # ledgers 0, 1 closed (5 entries each), 2 open
    assert off.offload_prefix(TOPIC, position=Position(2, 0)).offloaded == (0, 1)
    s = scrape(server.url)
    assert value(s, P + "offload_bytes_total", **LABELS) == 10 * 150
    assert value(s, P + "offload_error_total", **LABELS) == 0
    assert value(s, P + "read_ledger_latency_count", **LABELS) >= 2  # each ledger read locally
    assert value(s, P + "read_ledger_latency_sum", **LABELS) > 0
    # one block per ledger: the data objects are one-part multipart uploads, the indexes PUTs,
    # and per ledger its completion marker and watermark object (spec/bucket-manifests.md)
    s3 = {"backend": "s3", "outcome": "success"}
    assert value(s, REQUESTS, operation="create_multipart_upload", **s3) == 2
    assert value(s, REQUESTS, operation="complete_multipart_upload", **s3) == 2
    parts = value(s, REQUESTS, operation="upload_part", **s3)
    assert parts == 2
    assert value(s, REQUESTS, operation="put", **s3) == 2 + 2 * 2
    histogram = "offloader_store_request_duration_seconds"
    assert value(s, histogram + "_count", operation="upload_part", **s3) == parts
    assert value(s, histogram + "_bucket", operation="upload_part", le="+Inf", **s3) == parts
    assert value(s, histogram + "_sum", operation="upload_part", **s3) > 0

    rows = list(off.read(TOPIC))
    assert [r.payload for r in rows] == payloads(13, size=150)
    s = scrape(server.url)
    assert value(s, P + "read_bytes_total", **LABELS) == 10 * 150  # the offloaded ledgers
    assert value(s, P + "read_offload_index_latency_count", **LABELS) == 2
    assert value(s, P + "read_offload_data_latency_count", **LABELS) == 2
    assert value(s, P + "read_offload_data_latency_sum", **LABELS) > 0  # microseconds
    assert value(s, P + "read_offload_error_total", **LABELS) == 0

    record = off.topic_info(TOPIC).ledgers[0].offload
    assert record is not None
    off.runtime.store.delete(data_key(record.uuid, 0))  # the data object is gone
    with pytest.raises(ObjectNotFound):
        list(off.read(TOPIC))
    s = scrape(server.url)
    assert value(s, P + "read_offload_error_total", **LABELS) == 1
    not_found = total(s, REQUESTS, backend="s3", outcome="not_found")
    assert not_found >= 1

    off.delete_topic(TOPIC)  # every offloaded object of both ledgers deleted
    s = scrape(server.url)
    assert value(s, P + "delete_offload_ops_total", **LABELS, status="succeed") == 2
    assert value(s, P + "delete_offload_ops_total", **LABELS, status="failed") == 0


def test_a_failing_store_counts_offload_and_write_storage_errors(
    off: Offloader, server: MetricsServer
) -> None:
    rt = off.runtime
    assert isinstance(rt.store, MeteredObjectStore)
    plan = FaultPlan().fail("upload_part", StoreUnavailable("injected timeout"), on_call=1)
    rt.store = MeteredObjectStore(FaultyObjectStore(rt.store.inner, plan), rt.metrics)
    off.produce(TOPIC, payloads(6, size=150))  # ledger 0 closed
    run = off.offload_prefix(TOPIC, position=Position(1, 0))
    assert run.offloaded == () and [lid for lid, _ in run.failed] == [0]
    s = scrape(server.url)
    assert value(s, P + "offload_error_total", **LABELS) == 1
    assert value(s, P + "write_storage_error_total", **LABELS) == 1
    assert value(s, P + "offload_bytes_total", **LABELS) == 0
    labels = {"backend": "s3", "operation": "upload_part"}
    assert value(s, REQUESTS, outcome="unavailable", **labels) == 1
    assert value(s, REQUESTS, outcome="success", **labels) == 0


def test_offload_lag_and_deletion_backlog_gauges(off: Offloader, server: MetricsServer) -> None:
    rt = off.runtime
    clock = rt.clock_ms
    assert isinstance(clock, FakeClock)
    off.produce(TOPIC, payloads(11, size=100))  # ledgers 0, 1 closed; 2 open with one entry
    publish_lags(rt)
    s = scrape(server.url)
    assert value(s, "offloader_offload_lag_ledgers", **LABELS) == 0  # thresholds are off
    off.set_offload_threshold(NS, size_bytes=0)
    publish_lags(rt)
    s = scrape(server.url)
    assert value(s, "offloader_offload_lag_ledgers", **LABELS) == 2
    assert value(s, "offloader_offload_lag_bytes", **LABELS) == 10 * 100
    off.set_offload_deletion_lag(NS, 60_000)
    off.offload_prefix(TOPIC, position=Position(2, 0))
    publish_lags(rt)
    s = scrape(server.url)
    assert value(s, "offloader_offload_lag_ledgers", **LABELS) == 0
    assert value(s, "offloader_deletion_backlog_ledgers", **LABELS) == 0  # lag not passed
    assert value(s, P + "offload_rate", **LABELS) > 0  # the bytes since the last refresh
    clock.advance(61)
    publish_lags(rt)
    s = scrape(server.url)
    assert value(s, "offloader_deletion_backlog_ledgers", **LABELS) == 2
    assert value(s, "offloader_deletion_backlog_bytes", **LABELS) == 10 * 100
    assert value(s, P + "offload_rate", **LABELS) == 0  # nothing offloaded since
    assert off.apply_deletion_lag(TOPIC) == [0, 1]
    publish_lags(rt)
    s = scrape(server.url)
    assert value(s, "offloader_deletion_backlog_ledgers", **LABELS) == 0
