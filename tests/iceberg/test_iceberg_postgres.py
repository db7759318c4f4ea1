"""The Iceberg catalog on PostgreSQL (``--catalog postgresql://...``: pyiceberg's SqlCatalog
through psycopg 3), on the throwaway server of ``devservers/postgres.py`` (the PostgreSQL
metadata store's fixture; deselected with the suite's one-line notice where PostgreSQL cannot
run)."""

from __future__ import annotations

from pathlib import Path

import pytest

from offloader.api import ExportSpec
from tests.iceberg.helpers import digest, table_digest
from tests.spark.export_helpers import TOPIC, Clock, new_home, produce_ledger

pytestmark = pytest.mark.postgres


def test_catalog_on_postgresql(tmp_path: Path, pg_url: str) -> None:
    url = pg_url
    clock = Clock()
    off = new_home(tmp_path / "home", clock)
    try:
        values = produce_ledger(off, clock, TOPIC, 0, 40)
        spec = ExportSpec("iceberg://pulsar.orders", partition_by="dt", catalog=url)
        (first,) = off.export_iceberg_run([TOPIC], spec, engine="local")
        assert table_digest(first.metadata_location) == (40, 40, digest(values))
        more = produce_ledger(off, clock, TOPIC, 40, 10)
        (second,) = off.export_iceberg_run([TOPIC], spec, engine="local")
        assert second.previous == first.watermark and second.rows == 10
        everything = values + more
        assert table_digest(second.metadata_location) == (50, 50, digest(everything))
        target = off.iceberg_target("iceberg://pulsar.orders", catalog=url)
        status = off.export_iceberg_status(TOPIC, target)
        assert status.snapshot_id == second.snapshot_id
    finally:
        off.close()
