"""Parquet exports to ``gs://`` and ``az://`` targets (fake-gcs-server, Azurite), with the local
engine (the same tasks Spark runs), from ledgers offloaded to the same cloud: files listed and
read back through pyarrow's GCS and Azure filesystems, ``_SUCCESS`` markers, no temporary file
left, a second run that writes nothing (exactly once)."""

from __future__ import annotations

from pathlib import Path

import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest

from offloader.api import ExportSpec
from offloader.export.target import TargetSpec
from tests.cloud_env import cloud_root
from tests.spark.export_helpers import TOPIC, Clock, new_home, offload_all, produce_ledger


@pytest.mark.parametrize(
    "cloud",
    [pytest.param("gcs", marks=pytest.mark.gcs), pytest.param("azure", marks=pytest.mark.azure)],
)
def test_export_to_a_cloud_target(
    cloud: str, request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = cloud_root(cloud, request, monkeypatch)
    target = f"{base}/lake"
    clock = Clock()
    off = new_home(tmp_path / "home", clock, f"{base}/store")
    try:
        values = produce_ledger(off, clock, TOPIC, 0, 50)
        values += produce_ledger(off, clock, TOPIC, 50, 30)
        offload_all(off, TOPIC)  # these are read back from the same cloud
        values += produce_ledger(off, clock, TOPIC, 80, 20)  # still local
        spec = ExportSpec(target, partition_by="dt,hr", max_file_size=4096)
        (first,) = off.export_run([TOPIC], spec, engine="local")
        assert first.rows == 100 and first.files >= 2
        (again,) = off.export_run([TOPIC], spec, engine="local")
        assert again.rows == 0 and again.files == 0
    finally:
        off.close()
    fs = TargetSpec(target).open()
    listed = fs.get_file_info(pafs.FileSelector(target.partition("://")[2], recursive=True))
    files = sorted(i.path for i in listed if i.type == pafs.FileType.File)
    parquet = [p for p in files if p.endswith(".parquet")]
    assert len(parquet) == first.files
    assert any(p.endswith("/_SUCCESS") for p in files)
    assert not [p for p in files if ".tmp-" in p]
    read = [v for p in parquet for v in pq.read_table(p, filesystem=fs)["value"].to_pylist()]
    assert sorted(read) == sorted(values)
