"""Kafka exports that decode record values (issue 24's columns: every ``kafka-segments`` column
plus the decoded value, flattened with ``--flatten``; ``--time-field`` from the value, records
without it in ``dt=__invalid__``, counted): remote segments on moto, the Spark engine, the
Parquet files read back by DuckDB."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest

from devservers.endpoint import S3Endpoint
from formats.kafka.batch import iter_records
from offloader.api import ExportSpec, KafkaSettings, Offloader
from offloader.errors import ConfigError
from tests.kafka.logdir import write_partition
from tests.spark.export_helpers import duck

pytestmark = [pytest.mark.spark, pytest.mark.s3]

DAY0 = 1_704_067_200_000  # 2024-01-01T00:00:00Z, days away from the records' timestamps
DAY_MS = 86_400_000
SCHEMA = "id BIGINT, ts BIGINT, name STRING"


def json_value(topic: str, partition: int, offset: int) -> bytes:
    """A JSON record; every 7th has no ``ts`` (its time is invalid)."""
    value: dict[str, Any] = {"id": offset, "name": f"{topic}-{partition}-{offset}"}
    if offset % 7 != 3:
        value["ts"] = DAY0 + (offset % 3) * DAY_MS + offset
    return json.dumps(value).encode()


@pytest.fixture()
def json_home(tmp_path: Path, moto_endpoint: S3Endpoint, monkeypatch: pytest.MonkeyPatch) -> Any:
    for key, value in moto_endpoint.env().items():
        monkeypatch.setenv(key, value)
    bucket = moto_endpoint.new_bucket()
    root = tmp_path / "logs"
    layouts = [
        write_partition(
            root,
            "events",
            p,
            records=n,
            segment_bytes=4096,
            transactions=p == 0,
            value_of=json_value,
        )
        for p, n in ((0, 160), (1, 90))
    ]
    home = tmp_path / "home"
    store = f"s3://{bucket}/k"
    with Offloader.from_settings(home, store, endpoint_url=moto_endpoint.url) as off:
        assert off.kafka(KafkaSettings()).upload(root).ok
    records: dict[tuple[int, int], bytes | None] = {}
    for layout in layouts:
        for base, _ in layout.segments[:-1]:  # the active segment stays local
            data = (layout.path / f"{base:020d}.log").read_bytes()
            for h, r in iter_records(data):
                if not h.is_control:
                    records[(layout.partition, r.offset)] = r.value
    return home, store, moto_endpoint.url, records


def _time(value: bytes | None) -> int | None:
    return None if value is None else json.loads(value).get("ts")


def test_json_values_flattened_and_partitioned_by_a_field_of_the_value(
    spark: Any, json_home: Any, tmp_path: Path
) -> None:
    home, store, endpoint, records = json_home
    lake = str(tmp_path / "lake")
    spec = ExportSpec(
        lake,
        partition_by="dt",
        value_format="json",
        schema=SCHEMA,
        flatten=True,
        time_field="ts",
    )
    invalid = sorted(k for k, v in records.items() if _time(v) is None)
    assert len(records) > 50 and any(records[k] is None for k in invalid)  # tombstones
    assert any(records[k] is not None for k in invalid)  # and values without ts
    with Offloader.from_settings(home, store, endpoint_url=endpoint) as off:
        reports = off.export_run(["events"], spec, engine="spark", kafka=True, spark=spark)
        assert sum(r.rows for r in reports) == len(records)
        assert sum(r.invalid_rows for r in reports) == len(invalid)
        again = off.export_run(["events"], spec, engine="spark", kafka=True, spark=spark)
        assert sum(r.rows for r in again) == 0
    rows = duck(lake, 'partition, "offset", dt, value_id, value_ts, value_name, value')
    assert sorted((int(r[0]), int(r[1])) for r in rows) == sorted(records)
    for partition, offset, day, vid, vts, name, raw in rows:
        value = records[(partition, offset)]
        assert (bytes(raw) if raw is not None else None) == value
        ts = _time(value)
        if ts is None:
            assert day == "__invalid__"
        else:
            assert day == dt.datetime.fromtimestamp(ts / 1000, dt.timezone.utc).date().isoformat()
            assert (vid, vts, name) == (offset, ts, f"events-{partition}-{offset}")
        if value is None:
            assert (vid, vts, name) == (None, None, None)
    days = {d for (d,) in duck(lake, "DISTINCT dt")}
    assert days == {"2024-01-01", "2024-01-02", "2024-01-03", "__invalid__"}


def test_json_value_as_a_struct_by_record_time_and_the_local_engine_refused(
    spark: Any, json_home: Any, tmp_path: Path
) -> None:
    home, store, endpoint, records = json_home
    lake = str(tmp_path / "lake")
    spec = ExportSpec(lake, partition_by="dt", value_format="json", schema=SCHEMA)
    with Offloader.from_settings(home, store, endpoint_url=endpoint) as off:
        with pytest.raises(ConfigError, match="Spark engine"):
            off.export_run(["events"], spec, engine="local", kafka=True)
        reports = off.export_run(["events"], spec, engine="spark", kafka=True, spark=spark)
        assert sum(r.rows for r in reports) == len(records)
        assert sum(r.invalid_rows for r in reports) == 0  # record timestamps: all valid
    rows = duck(lake, 'partition, "offset", value_decoded.id, value_decoded.ts')
    assert len(rows) == len(records)
    for partition, offset, vid, vts in rows:
        value = records[(partition, offset)]
        assert vid == (None if value is None else offset)
        assert vts == _time(value)


def test_json_values_into_an_iceberg_table(spark: Any, json_home: Any) -> None:
    from tests.iceberg.helpers import scan

    home, store, endpoint, records = json_home
    table = "iceberg://kafka.events"
    spec = ExportSpec(table, partition_by="dt", value_format="json", schema=SCHEMA, flatten=True)
    with Offloader.from_settings(home, store, endpoint_url=endpoint) as off:
        with pytest.raises(ConfigError, match="record timestamp"):
            bad = ExportSpec(table, value_format="json", schema=SCHEMA, time_field="ts")
            off.export_iceberg_run(["events"], bad, engine="spark", kafka=True, spark=spark)
        reports = off.export_iceberg_run(["events"], spec, engine="spark", kafka=True, spark=spark)
        assert sum(r.rows for r in reports) == len(records)
        location = reports[-1].metadata_location
    rows = scan(location, 'partition, "offset", value_id, value_ts, value_name')
    assert sorted((int(r[0]), int(r[1])) for r in rows) == sorted(records)
    for partition, offset, vid, vts, name in rows:
        value = records[(partition, offset)]
        if value is None:
            assert (vid, vts, name) == (None, None, None)
        else:
            assert (vid, vts, name) == (offset, _time(value), f"events-{partition}-{offset}")
