"""Kafka topics exported through ``kafka-segments``: a watermark per partition, file names
``g1-<partition>-<first offset>-<last offset>-...``, record timestamps as time; DuckDB proves
every non-control record of the remote segments is there once (local engine and Spark)."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest

from devservers.endpoint import S3Endpoint
from formats.kafka.batch import iter_records
from offloader.api import ExportSpec, KafkaSettings, Offloader
from tests.kafka.logdir import write_partition
from tests.spark.export_helpers import duck

pytestmark = [pytest.mark.spark, pytest.mark.s3]


@pytest.fixture()
def kafka_home(tmp_path: Path, moto_endpoint: S3Endpoint, monkeypatch: pytest.MonkeyPatch) -> Any:
    for key, value in moto_endpoint.env().items():
        monkeypatch.setenv(key, value)
    bucket = moto_endpoint.new_bucket()
    root = tmp_path / "logs"
    layouts = [
        write_partition(root, "orders", 0, records=500, transactions=True),
        write_partition(root, "orders", 1, records=300),
    ]
    home = tmp_path / "home"
    with Offloader.from_settings(home, f"s3://{bucket}/k", endpoint_url=moto_endpoint.url) as off:
        assert off.kafka(KafkaSettings()).upload(root).ok
    expected = []
    for layout in layouts:
        for base, _ in layout.segments[:-1]:  # the active segment stays local
            data = (layout.path / f"{base:020d}.log").read_bytes()
            expected += [
                (layout.partition, r.offset, hashlib.sha256(r.value or b"").hexdigest())
                for h, r in iter_records(data)
                if not h.is_control
            ]
    return home, f"s3://{bucket}/k", moto_endpoint.url, sorted(expected)


@pytest.mark.parametrize("engine", ["local", "spark"])
def test_kafka_topic_export(spark: Any, kafka_home: Any, tmp_path: Path, engine: str) -> None:
    home, store, endpoint, expected = kafka_home
    out = tmp_path / f"lake-{engine}"
    spec = ExportSpec(str(out), partition_by="dt")
    with Offloader.from_settings(home, store, endpoint_url=endpoint) as off:
        reports = off.export_run(["orders"], spec, engine=engine, kafka=True, spark=spark)
        assert sorted(r.topic for r in reports) == ["kafka:orders:0", "kafka:orders:1"]
        assert sum(r.rows for r in reports) == len(expected)
        rows = duck(str(out), "partition, \"offset\", sha256(coalesce(value, ''::BLOB))")
        assert sorted((int(p), int(o), h) for p, o, h in rows) == expected
        assert {t for (t,) in duck(str(out), "DISTINCT topic")} == {"orders"}
        names = [p.name for p in out.rglob("*.parquet")]
        assert {n.split("-")[1] for n in names} == {"0", "1"}
        again = off.export_run(["orders"], spec, engine=engine, kafka=True, spark=spark)
        assert sum(r.rows for r in again) == 0
        assert [r.watermark for r in again] == [r.watermark for r in reports]
        if engine == "local":
            status = off.export_status("kafka:orders:1", str(out))
            assert status.watermark == reports[1].watermark and status.lag_entries == 0
            assert status.files and all(f.ledger_id == 1 for f in status.files)
            r = off.export_reset("kafka:orders:1", str(out), "1:100")
            assert r.watermark <= (1, 99) and r.removed
            assert all(Path(p).name.split("-")[1] == "1" for p in r.removed)
            (p0, p1) = off.export_run(["orders"], spec, engine=engine, kafka=True)
            assert p0.rows == 0 and p1.rows > 0
            rows = duck(str(out), "partition, \"offset\", sha256(coalesce(value, ''::BLOB))")
            assert sorted((int(p), int(o), h) for p, o, h in rows) == expected
