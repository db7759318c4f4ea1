"""Kafka topics into an Iceberg table: the remote segments (``kafka-segments``), a watermark per
partition carried by the table (``ledger-offloader.watermark.kafka:<topic>:<partition>``),
partitioned by the record timestamp and sorted by ``partition, offset``; DuckDB's Iceberg
reader proves every non-control record is there once (the local engine)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from devservers.endpoint import S3Endpoint
from formats.kafka.batch import iter_records
from offloader.api import ExportSpec, KafkaSettings, Offloader
from offloader.export.iceberg_target import WATERMARK_PREFIX
from tests.iceberg.helpers import scan
from tests.kafka.logdir import write_partition

pytestmark = [pytest.mark.s3]


def test_kafka_topic_into_a_table(
    tmp_path: Path, moto_endpoint: S3Endpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key, value in moto_endpoint.env().items():
        monkeypatch.setenv(key, value)
    bucket = moto_endpoint.new_bucket()
    root = tmp_path / "logs"
    layouts = [
        write_partition(root, "orders", 0, records=400, transactions=True),
        write_partition(root, "orders", 1, records=250),
    ]
    expected = []
    for layout in layouts:
        for base, _ in layout.segments[:-1]:  # the active segment stays local
            data = (layout.path / f"{base:020d}.log").read_bytes()
            expected += [
                (layout.partition, r.offset, hashlib.sha256(r.value or b"").hexdigest())
                for h, r in iter_records(data)
                if not h.is_control
            ]
    store = f"s3://{bucket}/k"
    with Offloader.from_settings(tmp_path / "home", store, endpoint_url=moto_endpoint.url) as off:
        assert off.kafka(KafkaSettings()).upload(root).ok
        spec = ExportSpec("iceberg://kafka.orders", partition_by="dt")
        reports = off.export_iceberg_run(["orders"], spec, engine="local", kafka=True)
        assert [r.topic for r in reports] == ["kafka:orders:0", "kafka:orders:1"]
        assert sum(r.rows for r in reports) == len(expected)
        location = reports[-1].metadata_location
        rows = scan(location, "partition, \"offset\", sha256(coalesce(value, ''::BLOB))")
        assert sorted((int(p), int(o), h) for p, o, h in rows) == sorted(expected)
        assert scan(location, "DISTINCT topic") == [("orders",)]
        again = off.export_iceberg_run(["orders"], spec, engine="local", kafka=True)
        assert sum(r.rows for r in again) == 0
        assert [r.watermark for r in again] == [r.watermark for r in reports]
        target = off.iceberg_target(spec.target)
        status = off.export_iceberg_status("kafka:orders:1", target)
        assert status.watermark == reports[1].watermark and status.lag_entries == 0
        from offloader.export.iceberg_catalog import open_catalog

        catalog = open_catalog(target)
        try:
            table = catalog.load()
            assert table is not None
            summary = table.current_summary()
            assert summary[WATERMARK_PREFIX + "kafka:orders:0"] == "{}:{}".format(
                *reports[0].watermark
            )
            raw = table._table
            assert [str(f.transform) for f in raw.spec().fields] == ["identity", "day"]
            names = [raw.schema().find_field(f.source_id).name for f in raw.sort_order().fields]
            assert names == ["partition", "offset"]
        finally:
            catalog.close()
