"""KIP-405's copy lag (``RemoteCopyLagBytes`` / ``RemoteCopyLagSegments``) of a broker log
directory: computed from the closed segments against the remote watermark, and published by
the service pass into ``kafka_server_brokertopicmetrics_remotecopylag*`` gauges."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest

from offloader.api import BrokerSettings, Offloader
from offloader.errors import StoreUnavailable
from offloader.metadata.kafka_base import COPY_FINISHED
from offloader.metrics.prometheus import PrometheusMetrics
from offloader.store import MeteredObjectStore
from offloader.store.faulty import FaultPlan, FaultyObjectStore
from tests.kafka.conftest import SMALL, Clock
from tests.kafka.logdir import PartitionLayout, write_log_dir
from tests.metrics.scrape import parse, value

COPY = "kafka_server_brokertopicmetrics_remotecopy"
LAG = COPY + "lag"


def closed_sizes(layout: PartitionLayout) -> list[int]:
    """The ``.log`` sizes of the partition's closed segments (every one but the last)."""
    sizes = []
    for base, _ in layout.segments[:-1]:
        deleted = base in layout.deleted
        name = f"{base:020d}.log" + (".deleted" if deleted else "")
        sizes.append((layout.path / name).stat().st_size)
    return sizes


def report_segments(off: Offloader) -> list[tuple[str, int]]:
    """``(topic, size)`` of every segment the Kafka metadata says is remote."""
    meta = off.kafka().ctx.meta
    return [
        (p.topic, seg.size_bytes)
        for p in meta.list_partitions()
        for seg in meta.list_segments(p.topic, p.partition)
        if seg.state == COPY_FINISHED
    ]


@pytest.fixture()
def setup(
    tmp_path: Path,
) -> Iterator[tuple[Offloader, Path, dict[tuple[str, int], PartitionLayout]]]:
    root = tmp_path / "kafka-logs"
    layouts = write_log_dir(root)
    metrics = PrometheusMetrics()
    broker = dataclasses.replace(BrokerSettings(), kafka_log_dirs=(str(root),))
    off = Offloader.from_settings(
        tmp_path / "home", broker=broker, clock_ms=Clock(), metrics=metrics
    )
    yield off, root, layouts
    off.close()


def test_copy_lag_before_and_after_an_upload(
    setup: tuple[Offloader, Path, dict[tuple[str, int], PartitionLayout]],
) -> None:
    off, root, layouts = setup
    tier = off.kafka(SMALL)
    before = {(lag.topic, lag.partition): lag for lag in tier.copy_lag(root)}
    assert set(before) == set(layouts)
    for key, layout in layouts.items():
        sizes = closed_sizes(layout)
        assert (before[key].bytes, before[key].segments) == (sum(sizes), len(sizes))
    assert any(lag.segments > 1 for lag in before.values())
    assert tier.upload(root).ok
    assert all(lag.bytes == 0 and lag.segments == 0 for lag in tier.copy_lag(root))


def test_the_service_pass_publishes_the_lag_of_what_it_could_not_upload(
    setup: tuple[Offloader, Path, dict[tuple[str, int], PartitionLayout]],
) -> None:
    off, _, layouts = setup
    rt = off.runtime
    assert isinstance(rt.store, MeteredObjectStore)
    refuse = StoreUnavailable("injected: the clicks prefix is down")
    plan = FaultPlan()
    for method in ("put", "create_multipart_upload"):
        plan.fail(method, refuse, match=lambda call: "clicks" in call["key"])
    rt.store = MeteredObjectStore(FaultyObjectStore(rt.store.inner, plan), rt.metrics)
    off.kafka(SMALL)
    report = off.service_tick()
    assert report.kafka_uploaded and report.errors  # clicks failed, the others went up
    metrics = rt.metrics
    assert isinstance(metrics, PrometheusMetrics)
    s = parse(metrics.exposition().decode())
    for (topic, partition), layout in layouts.items():
        labels = {"topic": topic, "partition": str(partition)}
        sizes = closed_sizes(layout) if topic == "clicks" else []
        assert value(s, LAG + "bytes", **labels) == sum(sizes), (topic, partition)
        assert value(s, LAG + "segments", **labels) == len(sizes)
        assert (LAG + "bytes", frozenset(labels.items())) in s  # published, even when 0
    copied = {"orders": 0, "audit.log": 0}
    for outcome in report_segments(off):
        copied[outcome[0]] += outcome[1]
    for topic, size in copied.items():
        assert size > 0
        assert value(s, COPY + "bytes_total", topic=topic) == size
        assert value(s, COPY + "errors_total", topic=topic) == 0
    assert value(s, COPY + "errors_total", topic="clicks") >= 1
    assert value(s, COPY + "bytes_total", topic="clicks") == 0
    assert value(s, "offloader_service_ticks_total", outcome="error") == 1
    unavailable = {"backend": "file", "outcome": "unavailable"}
    assert (
        sum(
            value(s, "offloader_store_requests_total", operation=op, **unavailable)
            for op in ("put", "create_multipart_upload")
        )
        >= 1
    )
