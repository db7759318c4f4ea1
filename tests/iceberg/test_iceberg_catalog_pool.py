"""The facade keeps an Iceberg export's catalog open across runs (``CatalogPool`` in
offloader/export/iceberg_catalog.py): each run still loads the table itself (it sees other
writers' commits and commits on the snapshot it planned from), a race is still detected, a
failed run drops the catalog, and closing the facade closes it."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from offloader.api import ExportSpec, Offloader
from offloader.errors import ExportError
from offloader.export.iceberg import run_iceberg_export
from offloader.export.plan import Held, TopicPlan, WrittenFile
from offloader.spark.iceberg_job import IcebergLocalRunner
from tests.iceberg.helpers import digest, table_digest
from tests.spark.export_helpers import TOPIC, Clock, new_home, produce_ledger

TABLE = "iceberg://pulsar.orders"
OTHER = "persistent://public/default/payments"


@pytest.fixture()
def home(tmp_path: Path) -> Any:
    clock = Clock()
    off = new_home(tmp_path / "home", clock)
    values = produce_ledger(off, clock, TOPIC, 0, 30)
    yield off, clock, values
    off.close()


def _pooled(off: Offloader) -> dict[Any, Any]:
    pool = off._iceberg_catalogs
    assert pool is not None
    return dict(pool._open)


class Racing(IcebergLocalRunner):
    """The local engine; ``meanwhile`` runs after its files are written, before the commit."""

    meanwhile: Any = None

    def write(self, plans: Sequence[TopicPlan]) -> list[WrittenFile | Held]:
        out = super().write(plans)
        if self.meanwhile is not None:
            self.meanwhile()
        return out


def test_runs_share_one_catalog_and_still_see_other_writers(home: Any) -> None:
    off, clock, values = home
    spec = ExportSpec(TABLE, partition_by="dt")
    (first,) = off.export_iceberg_run([TOPIC], spec, engine="local")
    (catalog,) = _pooled(off).values()

    # another writer commits (its own catalog) between this facade's runs
    payments = produce_ledger(off, clock, OTHER, 0, 12)
    runner = IcebergLocalRunner(str(off._rt.home), spec)
    (theirs,) = run_iceberg_export(off._rt.meta, off._rt.home, spec, [OTHER], runner)
    more = produce_ledger(off, clock, TOPIC, 30, 20)
    (second,) = off.export_iceberg_run([TOPIC], spec, engine="local")
    assert list(_pooled(off).values()) == [catalog]  # the same catalog, kept open
    # loaded afresh: planned and committed on the other writer's snapshot, no conflict
    assert second.attempts == 1 and second.conflict is None
    assert second.previous == first.watermark and second.rows == len(more)
    status = off.export_iceberg_status(OTHER, off.iceberg_target(TABLE))
    assert status.watermark == theirs.watermark and status.snapshot_id == second.snapshot_id
    every = values + payments + more
    assert table_digest(second.metadata_location) == (len(every), len(every), digest(every))

    off.close()  # closing the facade closes its catalogs
    assert off._iceberg_catalogs is not None and not off._iceberg_catalogs._open


def test_a_race_between_runs_on_the_pooled_catalog_commits_each_row_once(home: Any) -> None:
    off, _, values = home
    spec = ExportSpec(TABLE, partition_by="dt")
    other: list[Any] = []
    runner = Racing(str(off._rt.home), spec)
    runner.meanwhile = lambda: other.extend(off.export_iceberg_run([TOPIC], spec, engine="local"))
    pool = off._catalog_pool()
    (loser,) = run_iceberg_export(off._rt.meta, off._rt.home, spec, [TOPIC], runner, catalogs=pool)
    (winner,) = other
    assert winner.rows == len(values) and winner.conflict is None
    assert loser.conflict is not None and "another exporter" in loser.conflict
    assert loser.rows == 0 and loser.snapshot_id == winner.snapshot_id
    assert len(_pooled(off)) == 1  # both runs on the one catalog
    assert table_digest(loser.metadata_location) == (len(values), len(values), digest(values))


def test_a_failed_run_drops_its_catalog(home: Any) -> None:
    off, clock, _ = home
    (first,) = off.export_iceberg_run([TOPIC], ExportSpec(TABLE, partition_by="dt"), engine="local")
    (catalog,) = _pooled(off).values()
    with pytest.raises(ExportError, match="other export settings"):
        off.export_iceberg_run([TOPIC], ExportSpec(TABLE, partition_by="dt,hr"), engine="local")
    assert _pooled(off) == {}
    more = produce_ledger(off, clock, TOPIC, 30, 5)
    (second,) = off.export_iceberg_run(
        [TOPIC], ExportSpec(TABLE, partition_by="dt"), engine="local"
    )
    (again,) = _pooled(off).values()
    assert again is not catalog and second.rows == len(more)
    assert second.previous == first.watermark
