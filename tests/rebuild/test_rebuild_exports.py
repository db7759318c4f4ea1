"""Export watermarks rebuilt after the home is lost (issue 36): export, delete the home (and
drop the PostgreSQL schema), ``metadata rebuild --export-target`` on a new home, then ``export
run`` continues exactly once (no row twice, none missing) and DuckDB reads the result. On a
local directory and on moto's S3, with SQLite and PostgreSQL metadata; an Iceberg table's
watermarks are read from the table."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from devservers.endpoint import S3Endpoint
from offloader.api import ExportSpec, Offloader
from offloader.export.record import RECORDS_DIR, decode_record, encode_record, record_path
from tests.spark.export_helpers import (
    TOPIC,
    Clock,
    digest,
    duck_digest,
    offload_all,
    produce_ledger,
)

KIND = "export-watermarks"


def _home(root: Path, store: str, clock: Clock, metadata: str | None, endpoint: str | None):  # type: ignore[no-untyped-def]
    off = Offloader.from_settings(
        root, store, endpoint_url=endpoint, metadata_url=metadata, clock_ms=clock
    )
    if "public/default" not in {n.name for n in off.list_namespaces()}:
        off.create_namespace("public/default")
    return off


def _drop(pg_server: object, url: str) -> None:
    import psycopg

    schema = url.rsplit("%3D", 1)[1]
    with psycopg.connect(pg_server.admin_url(), autocommit=True) as conn:  # type: ignore[attr-defined]
        conn.execute(f"DROP SCHEMA {schema} CASCADE".encode())


@pytest.mark.parametrize(
    ("metadata", "where"), [("sqlite", "dir"), ("sqlite", "moto"), ("postgresql", "moto")]
)
def test_an_export_continues_exactly_once_after_the_home_is_lost(
    tmp_path: Path,
    metadata: str,
    where: str,
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    endpoint: str | None = None
    client = None
    if where == "moto":
        moto: S3Endpoint = request.getfixturevalue("moto_endpoint")
        for key, value in moto.env().items():
            monkeypatch.setenv(key, value)
        bucket = moto.new_bucket()
        store, target, endpoint = f"s3://{bucket}/objects", f"s3://{bucket}/lake", moto.url
        client = moto.client()
    else:
        store, target = f"file://{tmp_path / 'objects'}", str(tmp_path / "lake")
    pg = request.getfixturevalue("pg_server") if metadata == "postgresql" else None
    url = pg.new_url() if pg is not None else None  # type: ignore[attr-defined]
    clock = Clock()
    spec = ExportSpec(target, endpoint_url=endpoint, max_file_size=2048)

    old = _home(tmp_path / "home", store, clock, url, endpoint)
    values = produce_ledger(old, clock, TOPIC, 0, 80)
    values += produce_ledger(old, clock, TOPIC, 80, 50)
    offload_all(old, TOPIC)
    (first,) = old.export_run([TOPIC], spec, engine="local")
    assert first.rows == 130 and first.files > 4
    record = record_path(TOPIC, 1)
    if client is not None:
        body = client.get_object(Bucket=bucket, Key=f"lake/{record}")["Body"].read()
    else:
        body = (tmp_path / "lake" / record).read_bytes()
    stale = decode_record(body, record)
    assert (stale.position, stale.rows, stale.files) == (first.watermark, 130, first.files)
    more = produce_ledger(old, clock, TOPIC, 130, 40)  # written after the export, not exported
    offload_all(old, TOPIC)
    old.close()
    shutil.rmtree(tmp_path / "home")
    if pg is not None:
        _drop(pg, url)  # type: ignore[arg-type]
        url = pg.new_url()  # type: ignore[attr-defined]

    new = _home(tmp_path / "new-home", store, clock, url, endpoint)
    with new:
        dry = new.metadata_rebuild(dry_run=True, export_targets=[target], endpoint_url=endpoint)
        (planned,) = [i for i in dry.items if i.kind == KIND]
        assert (planned.action, planned.topic, planned.fields["source"]) == (
            "watermark", TOPIC, "record",
        )  # fmt: skip
        assert new._export_meta().list_watermarks() == []  # a dry run writes nothing
        report = new.metadata_rebuild(export_targets=[target], endpoint_url=endpoint)
        assert report.count("offload") == 3 and report.count("problem") == 0
        (rebuilt,) = new._export_meta().list_watermarks()
        assert rebuilt == stale  # exactly the committed watermark, totals and settings included

        (second,) = new.export_run([TOPIC], spec, engine="local")
        assert (second.previous, second.rows, second.repaired, second.missing) == (
            first.watermark, 40, 0, 0,
        )  # fmt: skip
        (third,) = new.export_run([TOPIC], spec, engine="local")
        assert third.rows == 0

        # --merge never lowers: the record put back as it was after the first run
        _put(client, bucket if client is not None else "", tmp_path, record, body)
        merged = new.metadata_rebuild(merge=True, export_targets=[target], endpoint_url=endpoint)
        (kept,) = [i for i in merged.items if i.kind == KIND]
        assert kept.action == "present" and "ahead" in kept.detail
        assert new._export_meta().list_watermarks()[0].position == third.watermark

    lake = tmp_path / "lake"
    if client is not None:  # DuckDB reads a copy of the whole prefix, records included
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix="lake/"):
            for o in page.get("Contents", []):
                if not o["Key"].endswith((".parquet", ".json")):
                    continue  # _SUCCESS markers and pyarrow's directory markers
                path = tmp_path / o["Key"]
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(client.get_object(Bucket=bucket, Key=o["Key"])["Body"].read())
    assert (lake / RECORDS_DIR).is_dir()
    assert duck_digest(str(lake)) == (170, 170, digest(values + more)[1])


def _put(client: object, bucket: str, tmp_path: Path, record: str, body: bytes) -> None:
    if client is not None:
        client.put_object(Bucket=bucket, Key=f"lake/{record}", Body=body)  # type: ignore[attr-defined]
    else:
        (tmp_path / "lake" / record).write_bytes(body)


def test_a_target_without_records_is_rebuilt_from_names_and_markers(tmp_path: Path) -> None:
    clock = Clock()
    store, lake = f"file://{tmp_path / 'objects'}", tmp_path / "lake"
    spec = ExportSpec(str(lake), max_file_size=2048)
    old = _home(tmp_path / "home", store, clock, None, None)
    values = produce_ledger(old, clock, TOPIC, 0, 60, step_ms=3_600_000)  # an hour apart
    offload_all(old, TOPIC)
    with old:
        (first,) = old.export_run([TOPIC], spec, engine="local")
    shutil.rmtree(tmp_path / "home")
    shutil.rmtree(lake / RECORDS_DIR)  # a target written before records existed
    with _home(tmp_path / "new-home", store, clock, None, None) as new:
        report = new.metadata_rebuild(export_targets=[str(lake)])
        (item,) = [i for i in report.items if i.kind == KIND]
        assert item.fields["source"] == "files"
        (mark,) = new._export_meta().list_watermarks()
        # the last file in a partition with _SUCCESS: at or before the committed watermark
        assert mark.position <= first.watermark and mark.ledger_id == first.watermark[0]
        (again,) = new.export_run([TOPIC], spec, engine="local")
        assert again.watermark == first.watermark
    assert duck_digest(str(lake)) == (60, 60, digest(values)[1])


def test_a_bad_record_is_a_problem_not_a_traceback(tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    (lake / RECORDS_DIR).mkdir(parents=True)
    (lake / record_path(TOPIC, 1)).write_bytes(b"{not json")
    with _home(tmp_path / "home", f"file://{tmp_path / 'o'}", Clock(), None, None) as off:
        report = off.metadata_rebuild(export_targets=[str(lake)], dry_run=True)
    (item,) = [i for i in report.items if i.kind == KIND]
    assert item.action == "problem" and "not JSON" in item.detail


def test_the_record_round_trips() -> None:
    from offloader.metadata.export_base import ExportWatermark

    mark = ExportWatermark("s3://b/lake", "kafka:orders:3", 2, 3, 991, 1_700_000_000_000,
                           '{"partition_by":"dt"}', 1000, 7, 2, 123)  # fmt: skip
    path = record_path(mark.topic, mark.generation)
    assert path.startswith(f"{RECORDS_DIR}/g2-") and path.endswith(".json")
    assert decode_record(encode_record(mark), path) == mark
    spec = (Path(__file__).parents[2] / "spec" / "export.md").read_text()
    example = next(line for line in spec.splitlines() if line.startswith('{"entry_id":991'))
    assert encode_record(mark) == (example + "\n").encode()  # spec/export.md §5a


def test_an_iceberg_table_keeps_its_watermarks_through_a_lost_home(tmp_path: Path) -> None:
    from tests.iceberg.helpers import digest as table_values_digest
    from tests.iceberg.helpers import table_digest

    clock = Clock()
    store = f"file://{tmp_path / 'objects'}"
    catalog = f"sqlite:///{tmp_path / 'catalog' / 'catalog.db'}"  # outside the home
    warehouse = str(tmp_path / "warehouse")
    spec = ExportSpec("iceberg://lake.orders", partition_by="dt", catalog=catalog,
                      warehouse=warehouse)  # fmt: skip
    old = _home(tmp_path / "home", store, clock, None, None)
    values = produce_ledger(old, clock, TOPIC, 0, 70)
    offload_all(old, TOPIC)
    with old:
        (first,) = old.export_iceberg_run([TOPIC], spec, engine="local")
        more = produce_ledger(old, clock, TOPIC, 70, 30)
        offload_all(old, TOPIC)
    shutil.rmtree(tmp_path / "home")
    with _home(tmp_path / "new-home", store, clock, None, None) as new:
        report = new.metadata_rebuild(
            export_targets=["iceberg://lake.orders"], catalog=catalog, warehouse=warehouse
        )
        (item,) = [i for i in report.items if i.kind == KIND]
        assert (item.action, item.topic, item.fields["source"]) == ("present", TOPIC, "table")
        assert (item.ledger_id, item.fields["entry_id"]) == first.watermark
        (second,) = new.export_iceberg_run([TOPIC], spec, engine="local")
        assert (second.previous, second.rows) == (first.watermark, 30)
        rows, ids, got = table_digest(second.metadata_location)
    assert (rows, ids, got) == (100, 100, table_values_digest(values + more))
    with _home(tmp_path / "other", store, clock, None, None) as other:
        missing = other.metadata_rebuild(
            export_targets=["iceberg://lake.nothing"], catalog=catalog, warehouse=warehouse,
            dry_run=True,
        )  # fmt: skip
    (problem,) = [i for i in missing.items if i.kind == KIND]
    assert problem.action == "problem" and "no table lake.nothing" in problem.detail


KILL_POINTS = (
    "export.after_file:2",
    "export.before_advance",
    "export.after_advance",
    "export.after_marker",
    "export.after_record",
)


@pytest.mark.slow
@pytest.mark.parametrize("earlier_run", [False, True], ids=["first-run", "second-run"])
def test_kill9_then_the_home_lost_then_rebuilt_continues_exactly_once(
    tmp_path: Path, earlier_run: bool
) -> None:
    """Per crash point: an export run killed there (the first run of the target, or a run
    after a completed one), the home deleted, ``metadata rebuild --export-target`` on a new
    home, ``export run`` to completion: every message exactly once (DuckDB)."""
    _kill9_chain(tmp_path, earlier_run, lambda case: (f"file://{case / 'objects'}", None))


@pytest.mark.s3
@pytest.mark.slow
@pytest.mark.parametrize("server", ["moto", pytest.param("rgw", marks=pytest.mark.rgw)])
def test_kill9_then_the_postgresql_metadata_dropped_on_s3(
    tmp_path: Path,
    server: str,
    pg_server: object,
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The same chain with the target and the store on S3 (moto, RGW) and the metadata in
    PostgreSQL, whose schema is dropped instead of the home's SQLite file (a run after a
    completed one: the harder case)."""
    s3: S3Endpoint = request.getfixturevalue(f"{server}_endpoint")
    for key, value in s3.env().items():
        monkeypatch.setenv(key, value)
    bucket = s3.new_bucket()

    def where(case: Path) -> tuple[str, S3Endpoint]:
        return f"s3://{bucket}/{case.name}", s3

    _kill9_chain(tmp_path, True, where, pg_server)


def _kill9_chain(  # type: ignore[no-untyped-def]
    tmp_path: Path, earlier_run: bool, where, pg_server: object | None = None
) -> None:
    from tests.crash.export_worker import TOPIC as CRASH_TOPIC
    from tests.crash.export_worker import spec as crash_spec
    from tests.crash.sweep import kill_run

    killed = 0
    for n, point in enumerate(KILL_POINTS):
        case = tmp_path / f"case{n}"
        root, s3 = where(case)
        endpoint = None if s3 is None else s3.url
        store = f"{root}/objects" if s3 is not None else root
        lake = f"{root}/lake" if s3 is not None else str(case / "lake")
        url = None if pg_server is None else pg_server.new_url()  # type: ignore[attr-defined]
        clock = Clock()
        old = _home(case / "home", store, clock, url, endpoint)
        values = produce_ledger(old, clock, CRASH_TOPIC, 0, 70)
        values += produce_ledger(old, clock, CRASH_TOPIC, 70, 60)
        if earlier_run:
            offload_all(old, CRASH_TOPIC)
            old.export_run([CRASH_TOPIC], crash_spec(lake, endpoint), engine="local")
            values += produce_ledger(old, clock, CRASH_TOPIC, 130, 50)
        offload_all(old, CRASH_TOPIC)
        old.close()
        args = [str(case / "home"), store, lake, endpoint or "-", *([url] if url else [])]
        if not kill_run("tests.rebuild.export_loss_worker", args, point, -1):
            killed += 1
        shutil.rmtree(case / "home")
        if pg_server is not None:
            _drop(pg_server, url)  # type: ignore[arg-type]
            url = pg_server.new_url()  # type: ignore[attr-defined]
        with _home(case / "new-home", store, clock, url, endpoint) as new:
            report = new.metadata_rebuild(export_targets=[lake], endpoint_url=endpoint)
            assert report.count("problem") == 0, report.items
            new.export_run([CRASH_TOPIC], crash_spec(lake, endpoint), engine="local")
            status = new.export_status(CRASH_TOPIC, lake, endpoint_url=endpoint)
            assert status.missing_files == 0 and status.uncommitted_files == 0
        local = lake if s3 is None else _copy_down(s3, lake, case / "copy")
        assert duck_digest(local) == (len(values), len(values), digest(values)[1]), point
    assert killed >= len(KILL_POINTS) - 1  # (a marker may have nothing to mark)


def _copy_down(s3: S3Endpoint, url: str, into: Path) -> str:
    """The Parquet files under ``url`` (s3://bucket/prefix) copied into ``into``, for DuckDB."""
    bucket, _, prefix = url[len("s3://") :].partition("/")
    client = s3.client()
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for o in page.get("Contents", []):
            if o["Key"].endswith(".parquet"):
                path = into / o["Key"][len(prefix) :].lstrip("/")
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(client.get_object(Bucket=bucket, Key=o["Key"])["Body"].read())
    return str(into)


def test_kafka_partitions_have_a_record_each(tmp_path: Path) -> None:
    """A Kafka export leaves one record per partition; without records, the names give each
    partition's key (``kafka:<topic>:<partition>``)."""
    from offloader.api import KafkaSettings
    from tests.kafka.logdir import write_partition

    root, lake = tmp_path / "logs", tmp_path / "lake"
    write_partition(root, "orders", 0, records=300)
    write_partition(root, "orders", 1, records=200)
    with Offloader.from_settings(tmp_path / "home", f"file://{tmp_path / 'objects'}") as off:
        assert off.kafka(KafkaSettings()).upload(root).ok
        reports = off.export_run(
            ["orders"], ExportSpec(str(lake), max_file_size=2048), engine="local", kafka=True
        )
        committed = {r.topic: r.watermark for r in reports}
        assert sorted(committed) == ["kafka:orders:0", "kafka:orders:1"]
    with _home(tmp_path / "new-home", f"file://{tmp_path / 'o2'}", Clock(), None, None) as new:
        dry = new.metadata_rebuild(dry_run=True, export_targets=[str(lake)])
        found = {i.topic: (i.ledger_id, i.fields["entry_id"]) for i in dry.items if i.kind == KIND}
        assert found == committed
        shutil.rmtree(lake / RECORDS_DIR)
        dry = new.metadata_rebuild(dry_run=True, export_targets=[str(lake)])
        guessed = {i.topic: i for i in dry.items if i.kind == KIND}
        assert set(guessed) <= set(committed)
        for key, item in guessed.items():
            assert item.fields["source"] == "files"
            assert (item.ledger_id, item.fields["entry_id"]) <= committed[key]
