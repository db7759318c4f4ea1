"""The export lag as a metric: ``service run`` passes with ``[[export]]`` jobs (the local engine,
no JVM) and the metrics endpoint on; the ``offloader_export_lag_*`` gauges scraped over HTTP equal
what ``export status`` shows, behind (``--until`` stops the first run early) and caught up, for
a Parquet directory and an Iceberg table."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from offloader.api import (
    ExportJob,
    ExportSpec,
    MetricsAddress,
    Offloader,
    start_metrics_server,
)
from offloader.metrics.prometheus import MetricsServer
from tests.metrics.scrape import Samples, scrape
from tests.spark.export_helpers import T0, TOPIC, Clock, produce_ledger

NS = "public/default"
ENTRIES = "offloader_export_lag_entries"
SECONDS = "offloader_export_lag_seconds"


@pytest.fixture()
def server() -> Iterator[MetricsServer]:
    server = start_metrics_server(MetricsAddress("127.0.0.1", 0))
    yield server
    server.close()


@pytest.fixture()
def clock() -> Clock:
    return Clock()


@pytest.fixture()
def off(tmp_path: Path, server: MetricsServer, clock: Clock) -> Iterator[Offloader]:
    off = Offloader.from_settings(tmp_path / "home", clock_ms=clock, metrics=server.metrics)
    off.create_namespace(NS)
    yield off
    off.close()


def _lag(samples: Samples, target: str) -> tuple[float | None, float | None]:
    labels = frozenset({"namespace": NS, "topic": TOPIC, "target": target}.items())
    return samples.get((ENTRIES, labels)), samples.get((SECONDS, labels))


def test_parquet_export_lag_gauges_equal_export_status(
    off: Offloader, server: MetricsServer, clock: Clock, tmp_path: Path
) -> None:
    lake = str(tmp_path / "lake")
    produce_ledger(off, clock, TOPIC, 0, 40)  # one message a minute from T0
    produce_ledger(off, clock, TOPIC, 40, 12)
    assert _lag(scrape(server.url), lake) == (None, None)  # no export ran yet

    behind = ExportSpec(lake, partition_by="dt", until_ms=T0 + 20 * 60_000)
    off.run_service(once=True, exports=[ExportJob((TOPIC,), behind)])
    status = off.export_status(TOPIC, lake)
    assert status.lag_entries > 0 and status.lag_ms is not None and status.lag_ms > 0
    entries, seconds = _lag(scrape(server.url), lake)
    assert entries == status.lag_entries
    assert seconds == pytest.approx(status.lag_ms / 1000)

    clock.now += 3_600_000  # an hour later the same lag of entries is an hour more of time
    caught_up = ExportSpec(lake, partition_by="dt")
    off.run_service(once=True, exports=[ExportJob((TOPIC,), caught_up)])
    status = off.export_status(TOPIC, lake)
    assert status.rows == 52 and status.lag_entries == 0 and status.lag_ms == 0
    assert _lag(scrape(server.url), lake) == (0.0, 0.0)

    produce_ledger(off, clock, TOPIC, 52, 8)  # a new closed ledger of 2 entries (4 a batch)
    assert _lag(scrape(server.url), lake) == (0.0, 0.0)  # the gauge moves after a job only
    off.run_service(once=True, exports=[ExportJob((TOPIC,), behind)])  # --until: nothing new
    status = off.export_status(TOPIC, lake)
    assert status.lag_entries == 2 and status.lag_ms is not None
    assert _lag(scrape(server.url), lake) == (2.0, pytest.approx(status.lag_ms / 1000))


def test_iceberg_export_lag_gauges_equal_export_status(
    off: Offloader, server: MetricsServer, clock: Clock
) -> None:
    table = "iceberg://lake.orders"
    produce_ledger(off, clock, TOPIC, 0, 30)
    spec = ExportSpec(table, partition_by="dt", until_ms=T0 + 10 * 60_000)
    off.run_service(once=True, exports=[ExportJob((TOPIC,), spec)])
    status = off.export_iceberg_status(TOPIC, off.iceberg_target(table))
    assert status.lag_entries > 0 and status.lag_ms is not None
    entries, seconds = _lag(scrape(server.url), table)
    assert entries == status.lag_entries
    assert seconds == pytest.approx(status.lag_ms / 1000)

    off.run_service(once=True, exports=[ExportJob((TOPIC,), ExportSpec(table, partition_by="dt"))])
    status = off.export_iceberg_status(TOPIC, off.iceberg_target(table))
    assert status.lag_entries == 0 and status.lag_ms == 0
    assert _lag(scrape(server.url), table) == (0.0, 0.0)
