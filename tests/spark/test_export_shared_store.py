"""The Spark export engine on a shared PostgreSQL store: a broker that does not own the topic
exports the owner's offloaded ledgers (the metadata URL reaches the pulsar-messages source),
and the owner sees the watermark it committed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from offloader.api import BrokerSettings, ExportSpec, MessageOptions, Offloader
from tests.spark.export_helpers import TOPIC, digest, duck_digest, offload_all

pytestmark = [pytest.mark.spark]


def test_spark_export_from_another_home(spark: Any, tmp_path: Path, pg_url: str) -> None:
    store = f"file://{tmp_path / 'objects'}"
    settings = BrokerSettings(max_entries_per_ledger=5, min_rollover_seconds=0)
    a = Offloader.from_settings(tmp_path / "a", store, metadata_url=pg_url, broker=settings)
    b = Offloader.from_settings(tmp_path / "b", store, metadata_url=pg_url, broker=settings)
    try:
        a.create_namespace("public/default")
        values = [json.dumps({"i": i}).encode() for i in range(40)]
        a.produce_messages(TOPIC, iter(values), MessageOptions(batch_size=4))
        a.roll_over(TOPIC)
        offload_all(a, TOPIC)
        lake = str(tmp_path / "lake")
        (report,) = b.export_run([TOPIC], ExportSpec(lake), spark=spark)
        assert report.rows == 40
        assert duck_digest(lake) == (40, 40, digest(values)[1])
        assert a.export_status(TOPIC, lake).watermark == report.watermark
    finally:
        a.close()
        b.close()


@pytest.mark.parametrize("engine", ["local", "spark"])
def test_iceberg_export_from_another_home(
    spark: Any, tmp_path: Path, pg_url: str, engine: str
) -> None:
    """Issue 27 on a shared store: the Iceberg runners get the metadata URL too, so a home
    that does not own the topic reads the owner's offloaded ledgers into the table."""
    from tests.iceberg.helpers import digest as iceberg_digest
    from tests.iceberg.helpers import table_digest

    store = f"file://{tmp_path / 'objects'}"
    settings = BrokerSettings(max_entries_per_ledger=5, min_rollover_seconds=0)
    a = Offloader.from_settings(tmp_path / "a", store, metadata_url=pg_url, broker=settings)
    b = Offloader.from_settings(tmp_path / "b", store, metadata_url=pg_url, broker=settings)
    try:
        a.create_namespace("public/default")
        values = [json.dumps({"i": i}).encode() for i in range(40)]
        a.produce_messages(TOPIC, iter(values), MessageOptions(batch_size=4))
        a.roll_over(TOPIC)
        offload_all(a, TOPIC)
        more = [json.dumps({"i": i}).encode() for i in range(40, 52)]
        a.produce_messages(TOPIC, iter(more), MessageOptions(batch_size=4))
        a.roll_over(TOPIC)  # closed, not offloaded: on a's disk, which b cannot read
        shared = {"catalog": f"sqlite:///{tmp_path / 'catalog.db'}", "warehouse": str(tmp_path)}
        spec = ExportSpec("iceberg://lake.orders", partition_by="dt", **shared)
        (report,) = b.export_iceberg_run([TOPIC], spec, spark=spark, engine=engine)
        assert report.rows == 40
        assert table_digest(report.metadata_location) == (40, 40, iceberg_digest(values))
        status = b.export_iceberg_status(TOPIC, b.iceberg_target("iceberg://lake.orders", **shared))
        assert status.watermark == report.watermark and status.lag_entries == 3
        (again,) = a.export_iceberg_run([TOPIC], spec, spark=spark, engine=engine)
        assert again.previous == report.watermark and again.rows == 12  # from a's own disk
        everything = iceberg_digest(values + more)
        assert table_digest(again.metadata_location) == (52, 52, everything)
    finally:
        a.close()
        b.close()
