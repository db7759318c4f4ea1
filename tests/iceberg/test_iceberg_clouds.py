"""Export to an Iceberg table whose warehouse is ``gs://bucket/prefix`` (fake-gcs-server) or
``az://container/prefix`` (Azurite), configured from each cloud's own environment: data and
metadata files land in the bucket, the table reads back through pyiceberg with our FileIO (the
same environment, no credentials in the catalog's properties), every message once."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyiceberg.table import StaticTable

from offloader.api import ExportSpec
from offloader.store import open_store
from tests.cloud_env import cloud_root
from tests.iceberg.helpers import digest
from tests.spark.export_helpers import TOPIC, Clock, new_home, offload_all, produce_ledger


def _rows(metadata_location: str) -> tuple[int, int, str]:
    table = StaticTable.from_metadata(
        metadata_location, {"py-io-impl": "offloader.export.iceberg_fileio.StoreFileIO"}
    )
    arrow = table.scan().to_arrow()
    values = [bytes(v) for v in arrow["value"].to_pylist()]
    return arrow.num_rows, len(set(arrow["message_id"].to_pylist())), digest(values)


@pytest.mark.parametrize(
    "cloud",
    [pytest.param("gcs", marks=pytest.mark.gcs), pytest.param("azure", marks=pytest.mark.azure)],
)
def test_export_to_a_cloud_warehouse(
    cloud: str, request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = cloud_root(cloud, request, monkeypatch)
    clock = Clock()
    off = new_home(tmp_path / "home", clock, f"{base}/store")
    warehouse = f"{base}/lake"
    spec = ExportSpec("iceberg://pulsar.orders", partition_by="dt", warehouse=warehouse)
    try:
        values = produce_ledger(off, clock, TOPIC, 0, 50)
        values += produce_ledger(off, clock, TOPIC, 50, 30)
        offload_all(off, TOPIC)  # read back from the same cloud
        values += produce_ledger(off, clock, TOPIC, 80, 20)  # still local
        (first,) = off.export_iceberg_run([TOPIC], spec, engine="local")
        assert first.rows == 100
        assert first.metadata_location.startswith(f"{warehouse}/pulsar/orders/metadata/")
        assert _rows(first.metadata_location) == (100, 100, digest(values))
        more = produce_ledger(off, clock, TOPIC, 100, 15)
        (second,) = off.export_iceberg_run([TOPIC], spec, engine="local")
        assert second.previous == first.watermark and second.rows == 15
        assert _rows(second.metadata_location) == (115, 115, digest(values + more))
        target = off.iceberg_target("iceberg://pulsar.orders", warehouse=warehouse)
        status = off.export_iceberg_status(TOPIC, target)
        assert status.metadata_location == second.metadata_location and status.lag_entries == 0
    finally:
        off.close()
    lake = open_store(warehouse)
    keys = [i.key for i in lake.list()]
    lake.close()
    assert any(k.startswith("pulsar/orders/data/") and k.endswith(".parquet") for k in keys)
    assert sum(k.endswith(".metadata.json") for k in keys) >= 2
    assert not [k for k in keys if ".tmp-" in k]
