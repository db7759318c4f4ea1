"""Iceberg export targets through a lost home (issue 36): the table's watermarks are read from
the table, and a catalog that was lost with the home (the home's SQLite catalog) while the
warehouse survived gets the table back, registered from the newest metadata file in the
warehouse. Each case exports, loses the home, runs ``metadata rebuild --export-target
iceberg://NS.TABLE`` on a new home, continues the export exactly once and reads the table with
DuckDB. On a local warehouse and on S3 (moto over HTTP, and Ceph RGW where it runs)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from cli.main import cli
from devservers.endpoint import S3Endpoint
from offloader.api import ExportSpec, Offloader
from offloader.errors import IcebergError, NotFound
from offloader.export.iceberg_target import metadata_version, newest_metadata
from tests.iceberg.helpers import digest, table_digest
from tests.spark.export_helpers import TOPIC, Clock, offload_all, produce_ledger

KIND = "export-watermarks"
TABLE = "iceberg://lake.orders"


def _home(root: Path, store: str, clock: Clock, endpoint: str | None) -> Offloader:
    off = Offloader.from_settings(root, store, endpoint_url=endpoint, clock_ms=clock)
    if "public/default" not in {n.name for n in off.list_namespaces()}:
        off.create_namespace("public/default")
    return off


def _lose_the_home(
    tmp_path: Path,
    store: str,
    warehouse: str,
    catalog: str | None,
    endpoint: str | None,
) -> tuple[list[bytes], list[bytes], tuple[int, int], str]:
    """Export 70 messages, write 30 more (offloaded, not exported), delete the home: the
    values exported, the values not, the committed watermark and metadata file."""
    clock = Clock()
    spec = ExportSpec(TABLE, partition_by="dt", catalog=catalog, warehouse=warehouse,
                      endpoint_url=endpoint)  # fmt: skip
    with _home(tmp_path / "home", store, clock, endpoint) as old:
        values = produce_ledger(old, clock, TOPIC, 0, 40)
        values += produce_ledger(old, clock, TOPIC, 40, 30)
        offload_all(old, TOPIC)
        (first,) = old.export_iceberg_run([TOPIC], spec, engine="local")
        assert first.rows == 70
        more = produce_ledger(old, clock, TOPIC, 70, 30)
        offload_all(old, TOPIC)
    shutil.rmtree(tmp_path / "home")
    return values, more, first.watermark, first.metadata_location


def _continue(
    tmp_path: Path,
    store: str,
    warehouse: str,
    catalog: str | None,
    endpoint: str | None,
    committed: tuple[int, int],
) -> str:
    """On a new home: export again, exactly the 30 messages past ``committed``; once more,
    nothing. The table's current metadata file."""
    spec = ExportSpec(TABLE, partition_by="dt", catalog=catalog, warehouse=warehouse,
                      endpoint_url=endpoint)  # fmt: skip
    with _home(tmp_path / "new-home", store, Clock(), endpoint) as new:
        (second,) = new.export_iceberg_run([TOPIC], spec, engine="local")
        assert (second.previous, second.rows) == (committed, 30)
        (third,) = new.export_iceberg_run([TOPIC], spec, engine="local")
        assert third.rows == 0 and third.watermark == second.watermark
        return third.metadata_location or second.metadata_location


def _rebuild_cli(
    tmp_path: Path, store: str, warehouse: str, endpoint: str | None, *extra: str
) -> list[dict[str, object]]:
    args = ["--home", str(tmp_path / "new-home"), "--store", store, "--json"]
    if endpoint is not None:
        args += ["--endpoint-url", endpoint]
    args += ["metadata", "rebuild", "--export-target", TABLE, "--warehouse", warehouse, *extra]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    return [json.loads(line) for line in result.output.splitlines() if line.startswith("{")]


def test_a_lost_catalog_gets_the_table_back_from_the_warehouse(tmp_path: Path) -> None:
    store = f"file://{tmp_path / 'objects'}"
    warehouse = str(tmp_path / "warehouse")  # outside the home; the catalog is the home's
    values, more, committed, location = _lose_the_home(tmp_path, store, warehouse, None, None)
    _home(tmp_path / "new-home", store, Clock(), None).close()

    dry = _rebuild_cli(tmp_path, store, warehouse, None, "--dry-run")
    (register,) = [o for o in dry if o.get("action") == "register"]
    assert register["metadata_location"] == location and "would register" in str(register["detail"])
    (mark,) = [o for o in dry if o.get("kind") == KIND and o.get("action") == "present"]
    assert (mark["topic"], mark["ledger_id"], mark["entry_id"]) == (TOPIC, *committed)
    assert dry[-1]["summary"]["register"] == 1  # type: ignore[index]
    catalog_db = tmp_path / "new-home" / "iceberg" / "catalog.db"
    with _home(tmp_path / "new-home", store, Clock(), None) as new:  # a dry run registers nothing
        target = new.iceberg_target(TABLE, warehouse=warehouse)
        with pytest.raises(NotFound, match=r"iceberg://lake\.orders does not exist"):
            new.export_iceberg_status(TOPIC, target)

    done = _rebuild_cli(tmp_path, store, warehouse, None)
    (register,) = [o for o in done if o.get("action") == "register"]
    assert register["metadata_location"] == location and "registered" in str(register["detail"])
    assert catalog_db.exists()
    again = _rebuild_cli(tmp_path, store, warehouse, None, "--merge")  # registered: no more
    assert [o for o in again if o.get("action") == "register"] == []

    current = _continue(tmp_path, store, warehouse, None, None, committed)
    assert table_digest(current) == (100, 100, digest(values + more))


def test_two_metadata_files_of_one_version_are_refused(tmp_path: Path) -> None:
    store = f"file://{tmp_path / 'objects'}"
    warehouse = tmp_path / "warehouse"
    *_, location = _lose_the_home(tmp_path, store, str(warehouse), None, None)
    path = Path(location[len("file://") :])
    version = metadata_version(path.name)
    assert version is not None and version >= 1
    twin = path.with_name(f"{version:05d}-00000000-0000-0000-0000-000000000000.metadata.json")
    shutil.copyfile(path, twin)  # a second writer's file of the same version
    with _home(tmp_path / "new-home", store, Clock(), None) as new:
        report = new.metadata_rebuild(
            export_targets=[TABLE], warehouse=str(warehouse), dry_run=True
        )
    (problem,) = [i for i in report.items if i.kind == KIND]
    assert problem.action == "problem"
    assert "two writers raced" in problem.detail and twin.name in problem.detail
    assert path.name in problem.detail


def test_the_newest_metadata_file_is_chosen_by_its_version() -> None:
    base = "s3://b/w/lake/orders/metadata/"
    urls = [
        base + "00009-aa.metadata.json",
        base + "00010-bb.metadata.json",
        base + "snap-1-1-cc.avro",
        base + "v11.metadata.json.tmp",
        base + "00002-dd.metadata.json",
    ]
    assert newest_metadata(TABLE, urls) == base + "00010-bb.metadata.json"  # not by name order
    assert newest_metadata(TABLE, [*urls, base + "v12.gz.metadata.json"]) == (
        base + "v12.gz.metadata.json"
    )
    assert newest_metadata(TABLE, [base + "snap-1.avro"]) is None
    with pytest.raises(IcebergError, match="2 metadata files of version 10"):
        newest_metadata(TABLE, [*urls, base + "00010-ee.metadata.json"])


@pytest.mark.s3
@pytest.mark.parametrize("catalog_lost", [False, True], ids=["catalog-kept", "catalog-lost"])
def test_an_s3_warehouse_through_a_lost_home(
    s3_endpoint: S3Endpoint,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    catalog_lost: bool,
) -> None:
    """The warehouse on S3: with the catalog kept (a SQLite file outside the home) the
    watermarks are read from the table; with the catalog lost with the home the table is
    registered again from the newest metadata file on S3. Either way the export continues
    exactly once and DuckDB reads every message once over httpfs."""
    for key, value in s3_endpoint.env().items():
        monkeypatch.setenv(key, value)
    bucket = s3_endpoint.new_bucket()
    store, warehouse = f"s3://{bucket}/objects", f"s3://{bucket}/warehouse"
    endpoint = s3_endpoint.url
    catalog = None if catalog_lost else f"sqlite:///{tmp_path / 'catalog' / 'catalog.db'}"
    values, more, committed, location = _lose_the_home(
        tmp_path, store, warehouse, catalog, endpoint
    )
    assert location.startswith(f"{warehouse}/lake/orders/metadata/")
    with _home(tmp_path / "new-home", store, Clock(), endpoint) as new:
        dry = new.metadata_rebuild(
            export_targets=[TABLE], catalog=catalog, warehouse=warehouse, endpoint_url=endpoint,
            dry_run=True,
        )  # fmt: skip
        report = new.metadata_rebuild(
            export_targets=[TABLE], catalog=catalog, warehouse=warehouse, endpoint_url=endpoint
        )
    for r in (dry, report):
        items = [i for i in r.items if i.kind == KIND]
        assert r.count("problem") == 0, items
        (mark,) = [i for i in items if i.action == "present"]
        assert (mark.topic, mark.ledger_id, mark.fields["entry_id"]) == (TOPIC, *committed)
        registered = [i.fields["metadata_location"] for i in items if i.action == "register"]
        assert registered == ([location] if catalog_lost else [])
    current = _continue(tmp_path, store, warehouse, catalog, endpoint, committed)
    assert table_digest(current, s3_endpoint) == (100, 100, digest(values + more))
