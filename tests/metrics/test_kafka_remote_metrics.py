"""KIP-405's remote-storage metrics of the Kafka tier, scraped from ``/metrics`` over HTTP:
the remote log size per partition (KIP-963), remote deletions and their errors, and the fetch
hook (:class:`offloader.metrics.KafkaFetchMeter`: requests, bytes, errors, latency and GETs
per fetch), beside the copy metrics and the Pulsar ones."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest

from offloader.api import BrokerSettings, MetricsAddress, Offloader, start_metrics_server
from offloader.errors import StoreUnavailable
from offloader.kafka.remote import delete_remote_segment
from offloader.metadata.kafka_base import COPY_FINISHED
from offloader.metrics import KafkaFetchMeter
from offloader.metrics.prometheus import MetricsServer
from offloader.store.faulty import FaultyObjectStore
from tests.kafka.conftest import SMALL, Clock
from tests.kafka.logdir import PartitionLayout, write_log_dir
from tests.metrics.scrape import scrape, value

BTM = "kafka_server_brokertopicmetrics_"


@pytest.fixture()
def served(
    tmp_path: Path,
) -> Iterator[tuple[Offloader, MetricsServer, Path, dict[tuple[str, int], PartitionLayout]]]:
    root = tmp_path / "kafka-logs"
    layouts = write_log_dir(root)
    server = start_metrics_server(MetricsAddress("127.0.0.1", 0))
    broker = dataclasses.replace(BrokerSettings(), kafka_log_dirs=(str(root),))
    off = Offloader.from_settings(
        tmp_path / "home", broker=broker, clock_ms=Clock(), metrics=server.metrics
    )
    yield off, server, root, layouts
    off.close()
    server.close()


def test_the_remote_log_size_of_every_partition_after_a_pass(
    served: tuple[Offloader, MetricsServer, Path, dict[tuple[str, int], PartitionLayout]],
) -> None:
    off, server, _, layouts = served
    off.kafka(SMALL)
    report = off.service_tick()
    assert report.kafka_uploaded and not report.errors
    s = scrape(server.url)
    meta = off.kafka().ctx.meta
    for (topic, partition), layout in layouts.items():
        copied = meta.list_segments(topic, partition, states=[COPY_FINISHED])
        labels = {"topic": topic, "partition": str(partition)}
        assert len(copied) == len(layout.segments) - 1  # every closed segment
        assert (BTM + "remotelogsizebytes", frozenset(labels.items())) in s  # 0 published too
        assert value(s, BTM + "remotelogsizebytes", **labels) == sum(c.size_bytes for c in copied)
        assert value(s, BTM + "remotelogmetadatacount", **labels) == len(copied)
        assert value(s, BTM + "remotecopylagsegments", **labels) == 0
    # the Pulsar family is on the same endpoint
    assert any(name.startswith("offloader_service_ticks") for name, _ in s)


def test_remote_deletions_and_their_errors_are_counted(
    served: tuple[Offloader, MetricsServer, Path, dict[tuple[str, int], PartitionLayout]],
) -> None:
    off, server, root, _ = served
    tier = off.kafka(SMALL)
    assert tier.upload(root).ok
    first, second, *_ = tier.ctx.meta.list_segments("orders", 0, states=[COPY_FINISHED])
    delete_remote_segment(tier.ctx, first, "test")
    real = tier.ctx.store
    faulty = FaultyObjectStore(real)
    faulty.plan.fail("delete", StoreUnavailable("injected"))
    tier.ctx.store = faulty
    with pytest.raises(StoreUnavailable):
        delete_remote_segment(tier.ctx, second, "test")
    tier.ctx.store = real
    s = scrape(server.url)
    assert value(s, BTM + "remotedeleterequests_total", topic="orders") == 2
    assert value(s, BTM + "remotedeleteerrors_total", topic="orders") == 1
    assert value(s, BTM + "remotedeleterequests_total", topic="clicks") == 0


def test_the_fetch_hook_counts_requests_bytes_gets_errors_and_latency(
    served: tuple[Offloader, MetricsServer, Path, dict[tuple[str, int], PartitionLayout]],
) -> None:
    off, server, _, _ = served
    metrics = off.kafka(SMALL).ctx.metrics
    assert metrics is server.metrics
    with KafkaFetchMeter(metrics, "orders") as meter:
        meter.add_get()
        meter.add_bytes(3000)
    with pytest.raises(RuntimeError), KafkaFetchMeter(metrics, "orders") as meter:
        meter.add_get(2)
        meter.add_bytes(100)
        raise RuntimeError("a fetch that fails")
    meter = KafkaFetchMeter(metrics, "clicks")
    meter.add_get()
    meter.done()
    meter.done()  # once only
    s = scrape(server.url)
    orders = {"topic": "orders"}
    assert value(s, BTM + "remotefetchrequests_total", **orders) == 2
    assert value(s, BTM + "remotefetchbytes_total", **orders) == 3100
    assert value(s, BTM + "remotefetcherrors_total", **orders) == 1
    assert value(s, "offloader_kafka_remote_fetch_gets_count", **orders) == 2
    assert value(s, "offloader_kafka_remote_fetch_gets_sum", **orders) == 3
    assert value(s, "offloader_kafka_remote_fetch_gets_bucket", le="1.0", **orders) == 1
    assert value(s, "offloader_kafka_remote_fetch_duration_seconds_count", **orders) == 2
    assert value(s, BTM + "remotefetchrequests_total", topic="clicks") == 1
    assert value(s, BTM + "remotefetcherrors_total", topic="clicks") == 0


def test_a_kafka_read_records_its_remote_fetches(
    served: tuple[Offloader, MetricsServer, Path, dict[tuple[str, int], PartitionLayout]],
) -> None:
    """``kafka read`` (the facade's tier.read) meters each remote fetch: one request of one GET
    for a small count from an offset, its bytes, its latency; a time lookup's read too; a fetch
    the store fails is an error; nothing is recorded for another topic."""
    off, server, root, _ = served
    tier = off.kafka(SMALL)
    assert tier.upload(root).ok
    copied = tier.ctx.meta.list_segments("orders", 0, states=[COPY_FINISHED])
    second = copied[1]
    rows = list(tier.read("orders", 0, from_offset=second.base_offset + 1, count=2))
    assert [r.offset for r in rows] == [second.base_offset + 1, second.base_offset + 2]
    s = scrape(server.url)
    orders = {"topic": "orders"}
    assert value(s, BTM + "remotefetchrequests_total", **orders) == 1
    fetched = value(s, BTM + "remotefetchbytes_total", **orders)
    assert 0 < fetched <= second.size_bytes
    assert value(s, BTM + "remotefetcherrors_total", **orders) == 0
    assert value(s, "offloader_kafka_remote_fetch_gets_sum", **orders) == 1
    assert value(s, "offloader_kafka_remote_fetch_duration_seconds_count", **orders) == 1
    assert value(s, BTM + "remotefetchrequests_total", topic="clicks") == 0

    rows = list(tier.read("orders", 0, from_timestamp=0, count=1))
    assert len(rows) == 1
    s = scrape(server.url)
    assert value(s, BTM + "remotefetchrequests_total", **orders) == 2
    assert value(s, BTM + "remotefetchbytes_total", **orders) > fetched
    assert value(s, "offloader_kafka_remote_fetch_gets_sum", **orders) >= 2

    real = tier.ctx.store
    faulty = FaultyObjectStore(real)
    faulty.plan.fail("get_range", StoreUnavailable("injected"))
    tier.ctx.store = faulty
    try:
        with pytest.raises(StoreUnavailable):
            list(tier.read("orders", 0, from_offset=copied[2].base_offset, count=1))
    finally:
        tier.ctx.store = real
    s = scrape(server.url)
    assert value(s, BTM + "remotefetchrequests_total", **orders) == 3
    assert value(s, BTM + "remotefetcherrors_total", **orders) == 1
    assert value(s, "offloader_kafka_remote_fetch_duration_seconds_count", **orders) == 3
