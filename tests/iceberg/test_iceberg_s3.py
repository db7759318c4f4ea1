"""Export to an Iceberg table whose warehouse is ``s3://bucket/prefix`` (moto, and Ceph RGW when
it runs): data files and every metadata file put whole, DuckDB's Iceberg reader (over httpfs)
proves each message is there once; upkeep on S3."""

from __future__ import annotations

from pathlib import Path

import pytest

from devservers.endpoint import S3Endpoint
from offloader.api import ExportSpec
from tests.iceberg.helpers import digest, table_digest
from tests.spark.export_helpers import TOPIC, Clock, new_home, offload_all, produce_ledger

pytestmark = [pytest.mark.s3]


def test_export_to_an_s3_warehouse(
    s3_endpoint: S3Endpoint, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    endpoint = s3_endpoint
    for key, value in endpoint.env().items():
        monkeypatch.setenv(key, value)
    bucket = endpoint.new_bucket()
    clock = Clock()
    off = new_home(tmp_path / "home", clock, f"s3://{bucket}/store", endpoint.url)
    values = produce_ledger(off, clock, TOPIC, 0, 50)
    values += produce_ledger(off, clock, TOPIC, 50, 30)
    offload_all(off, TOPIC)
    values += produce_ledger(off, clock, TOPIC, 80, 20)  # still local
    warehouse = f"s3://{bucket}/lake"
    spec = ExportSpec(
        "iceberg://pulsar.orders", partition_by="dt", warehouse=warehouse, endpoint_url=endpoint.url
    )
    try:
        (first,) = off.export_iceberg_run([TOPIC], spec, engine="local")
        assert first.metadata_location.startswith(f"{warehouse}/pulsar/orders/metadata/")
        assert table_digest(first.metadata_location, endpoint) == (100, 100, digest(values))
        more = produce_ledger(off, clock, TOPIC, 100, 15)
        (second,) = off.export_iceberg_run([TOPIC], spec, engine="local")
        assert second.previous == first.watermark and second.rows == 15
        everything = values + more
        assert table_digest(second.metadata_location, endpoint) == (115, 115, digest(everything))

        target = off.iceberg_target(
            "iceberg://pulsar.orders", warehouse=warehouse, endpoint_url=endpoint.url
        )
        status = off.export_iceberg_status(TOPIC, target)
        assert status.metadata_location == second.metadata_location
        assert status.watermark == second.watermark and status.lag_entries == 0
        # a crashed run's stray object, then upkeep on S3
        client = endpoint.client()
        stray = "lake/pulsar/orders/data/topic=x/g1-9-0-1-2025-06-15.parquet"
        client.put_object(Bucket=bucket, Key=stray, Body=b"never committed")
        expired = off.export_expire_snapshots(target, 0, retain_last=1)
        assert len(expired.expired) == 1
        cleaned = off.export_clean_orphans(target, 0)
        assert f"s3://{bucket}/{stray}" in cleaned.removed
        assert any("snap-" in u for u in cleaned.removed)
        keys = {o["Key"] for o in client.list_objects_v2(Bucket=bucket)["Contents"]}
        assert stray not in keys
        assert table_digest(status.metadata_location, endpoint) == (115, 115, digest(everything))
    finally:
        off.close()
