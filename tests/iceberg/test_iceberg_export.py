"""Export to an Iceberg table (the local engine: the export's tasks in-process, real pyiceberg on
a SQLite catalog, real Parquet files), read back by DuckDB's own Iceberg reader: every message
exactly once, the watermark carried by the table, racing exporters, upkeep."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from offloader.api import ExportSpec, Offloader
from offloader.errors import ConfigError, ExportError, IcebergSchemaError
from offloader.export.iceberg import run_iceberg_export
from offloader.export.iceberg_catalog import open_catalog
from offloader.export.iceberg_target import PUBLISH_PREFIX, RUN_KEY, WATERMARK_PREFIX
from offloader.export.plan import TopicPlan, WrittenFile
from offloader.spark.iceberg_job import IcebergLocalRunner
from tests.iceberg.helpers import digest, scan, table_digest
from tests.spark.export_helpers import TOPIC, Clock, new_home, offload_all, produce_ledger

TABLE = "iceberg://pulsar.orders"
OTHER = "persistent://public/default/payments"


@pytest.fixture()
def home(tmp_path: Path) -> tuple[Offloader, Clock, list[bytes]]:
    clock = Clock()
    off = new_home(tmp_path / "home", clock)
    values = produce_ledger(off, clock, TOPIC, 0, 60)
    values += produce_ledger(off, clock, TOPIC, 60, 40)
    offload_all(off, TOPIC)  # two offloaded ledgers, then one still on local disk
    values += produce_ledger(off, clock, TOPIC, 100, 25)
    yield off, clock, values
    off.close()


def test_export_is_read_by_duckdb_exactly_once(home: Any) -> None:
    off, clock, values = home
    spec = ExportSpec(TABLE, partition_by="dt")
    (report,) = off.export_iceberg_run([TOPIC], spec, engine="local")
    assert report.rows == len(values) and report.previous == (-1, -1)
    assert report.conflict is None and report.attempts == 1
    assert table_digest(report.metadata_location) == (len(values), len(values), digest(values))

    # the table's layout, as any engine sees it
    target = off.iceberg_target(TABLE)
    catalog = open_catalog(target)
    try:
        table = catalog.load()
        assert table is not None
        raw = table._table
        spec_fields = [(f.name, str(f.transform)) for f in raw.spec().fields]
        assert spec_fields == [("topic", "identity"), ("publish_time_day", "day")]
        names = {raw.schema().find_field(f.source_id).name for f in raw.sort_order().fields}
        assert names == {"ledger_id", "entry_id", "batch_index"}
        assert raw.properties["write.parquet.compression-codec"] == "zstd"
        summary = table.current_summary()
        assert summary[WATERMARK_PREFIX + TOPIC] == "{}:{}".format(*report.watermark)
        assert int(summary[PUBLISH_PREFIX + TOPIC]) == report.publish_time_ms
        assert RUN_KEY in summary
        # every data file holds one topic and one day, sorted by position
        for path in table.data_file_paths():
            rows = pq.read_table(path.removeprefix("file://")).to_pylist()
            assert len({r["topic"] for r in rows}) == 1
            assert len({r["publish_time"].date() for r in rows}) == 1
            keys = [(r["ledger_id"], r["entry_id"], r["batch_index"]) for r in rows]
            assert keys == sorted(keys)
    finally:
        catalog.close()

    # incremental: only the new ledger, in a new snapshot; the table says the watermark
    more = produce_ledger(off, clock, TOPIC, 125, 30)
    (second,) = off.export_iceberg_run([TOPIC], spec, engine="local")
    assert second.previous == report.watermark and second.rows == 30
    assert second.snapshot_id != report.snapshot_id
    everything = values + more
    got = table_digest(second.metadata_location)
    assert got == (len(everything), len(everything), digest(everything))
    # the old snapshot still reads as it was (time travel by metadata file)
    assert table_digest(report.metadata_location)[0] == len(values)
    # nothing new: no commit
    (third,) = off.export_iceberg_run([TOPIC], spec, engine="local")
    assert third.rows == 0 and third.snapshot_id == second.snapshot_id

    status = off.export_iceberg_status(TOPIC, target)
    assert status.watermark == second.watermark and status.lag_entries == 0
    assert status.metadata_location == second.metadata_location
    assert status.total_records == len(everything) and status.snapshots == 2


def test_other_settings_are_refused(home: Any) -> None:
    off, _, _ = home
    off.export_iceberg_run([TOPIC], ExportSpec(TABLE, partition_by="dt"), engine="local")
    with pytest.raises(ExportError, match="other export settings"):
        off.export_iceberg_run([TOPIC], ExportSpec(TABLE, partition_by="dt,hr"), engine="local")


def test_hour_partitions(home: Any) -> None:
    off, _, values = home
    (report,) = off.export_iceberg_run(
        [TOPIC], ExportSpec("iceberg://pulsar.hourly", partition_by="dt,hr"), engine="local"
    )
    hours = scan(report.metadata_location, "count(DISTINCT date_trunc('hour', publish_time))")
    assert hours[0][0] > 1
    assert table_digest(report.metadata_location)[0] == len(values)


class Racing:
    """A runner that lets another exporter run to its end between its write and its commit."""

    def __init__(self, inner: IcebergLocalRunner, meanwhile: Any) -> None:
        self.inner = inner
        self.meanwhile = meanwhile

    def arrow_schema(self) -> pa.Schema:
        return self.inner.arrow_schema()

    def retarget(self, data_url: str) -> None:
        self.inner.retarget(data_url)

    def first_at_or_after(self, plans: Sequence[TopicPlan], until_ms: int) -> Any:
        return self.inner.first_at_or_after(plans, until_ms)

    def write(self, plans: Sequence[TopicPlan]) -> list[WrittenFile]:
        files = self.inner.write(plans)
        self.meanwhile()
        return files


def test_two_exporters_racing_on_one_topic_commit_each_row_once(home: Any) -> None:
    off, _, values = home
    spec = ExportSpec(TABLE, partition_by="dt")
    other: list[Any] = []

    def meanwhile() -> None:
        other.extend(off.export_iceberg_run([TOPIC], spec, engine="local"))

    runner = Racing(IcebergLocalRunner(str(off._rt.home), spec), meanwhile)
    (loser,) = run_iceberg_export(off._rt.meta, off._rt.home, spec, [TOPIC], runner)
    (winner,) = other
    assert winner.rows == len(values) and winner.conflict is None
    assert loser.conflict is not None and "another exporter" in loser.conflict
    assert loser.rows == 0 and loser.watermark == winner.watermark
    assert loser.snapshot_id == winner.snapshot_id  # the loser committed nothing
    assert table_digest(loser.metadata_location) == (len(values), len(values), digest(values))


def test_a_commit_on_another_topic_is_retried_on_the_new_snapshot(home: Any) -> None:
    off, clock, values = home
    payments = produce_ledger(off, clock, OTHER, 0, 20)
    spec = ExportSpec(TABLE, partition_by="dt")
    other: list[Any] = []

    def meanwhile() -> None:
        other.extend(off.export_iceberg_run([OTHER], spec, engine="local"))

    runner = Racing(IcebergLocalRunner(str(off._rt.home), spec), meanwhile)
    (mine,) = run_iceberg_export(off._rt.meta, off._rt.home, spec, [TOPIC], runner)
    assert mine.conflict is None and mine.attempts == 2 and mine.rows == len(values)
    assert other[0].snapshot_id != mine.snapshot_id
    both = values + payments
    assert table_digest(mine.metadata_location) == (len(both), len(both), digest(both))
    # the retried commit carried the other topic's watermark forward
    status = off.export_iceberg_status(OTHER, off.iceberg_target(TABLE))
    assert status.watermark == other[0].watermark and status.snapshot_id == mine.snapshot_id


def test_a_crashed_run_leaves_orphans_that_clean_orphans_removes(home: Any) -> None:
    off, _, values = home
    spec = ExportSpec(TABLE, partition_by="dt")

    def crash() -> None:
        raise KeyboardInterrupt("killed between the write and the commit")

    runner = Racing(IcebergLocalRunner(str(off._rt.home), spec), crash)
    with pytest.raises(KeyboardInterrupt):
        run_iceberg_export(off._rt.meta, off._rt.home, spec, [TOPIC], runner)
    target = off.iceberg_target(TABLE)
    status = off.export_iceberg_status(TOPIC, target)
    assert status.snapshot_id is None and status.watermark == (-1, -1)
    data = Path(target.warehouse.removeprefix("file://")) / "pulsar" / "orders" / "data"
    written = sorted(p for p in data.rglob("*.parquet"))
    assert written  # on disk, referenced by no snapshot

    young = off.export_clean_orphans(target, 3600)
    assert young.removed == () and young.kept_young >= len(written)
    stray = data / "topic=x" / "stray.parquet"
    stray.parent.mkdir(parents=True)
    stray.write_bytes(b"not committed")
    # the re-run writes the same names again and commits them
    (report,) = off.export_iceberg_run([TOPIC], spec, engine="local")
    assert sorted(data.rglob("g*.parquet")) == written
    assert table_digest(report.metadata_location) == (len(values), len(values), digest(values))
    dry = off.export_clean_orphans(target, 0, dry_run=True)
    assert [u.rsplit("/", 1)[1] for u in dry.removed] == ["stray.parquet"] and stray.exists()
    done = off.export_clean_orphans(target, 0)
    assert done.removed == dry.removed and not stray.exists()
    # what the table refers to is all still there
    assert table_digest(report.metadata_location)[0] == len(values)


def test_expire_snapshots_keeps_the_watermark(home: Any) -> None:
    off, clock, values = home
    spec = ExportSpec(TABLE, partition_by="dt")
    for n in range(3):
        values += produce_ledger(off, clock, TOPIC, len(values), 5 + n)
        off.export_iceberg_run([TOPIC], spec, engine="local")
    target = off.iceberg_target(TABLE)
    before = off.export_iceberg_status(TOPIC, target)
    assert before.snapshots == 3
    assert off.export_expire_snapshots(target, 3600).expired == ()  # none old enough
    time.sleep(0.01)
    report = off.export_expire_snapshots(target, 0, retain_last=2)
    assert len(report.expired) == 1 and report.kept == 2
    after = off.export_iceberg_status(TOPIC, target)
    assert after.watermark == before.watermark and after.snapshots == 2
    assert table_digest(after.metadata_location) == (len(values), len(values), digest(values))
    # the expired snapshot's manifest list is now an orphan
    assert any("snap-" in u for u in off.export_clean_orphans(target, 0).removed)
    assert table_digest(after.metadata_location)[0] == len(values)
    # and an export after the upkeep goes on from the table's watermark
    values += produce_ledger(off, clock, TOPIC, len(values), 4)
    (last,) = off.export_iceberg_run([TOPIC], spec, engine="local")
    assert last.previous == after.watermark and last.rows == 4


def test_reset_deletes_the_rows_after_the_point_in_one_commit(home: Any) -> None:
    off, clock, values = home
    other = produce_ledger(off, clock, OTHER, 0, 10)
    spec = ExportSpec(TABLE, partition_by="dt")
    first = {r.topic: r for r in off.export_iceberg_run([TOPIC, OTHER], spec, engine="local")}
    target = off.iceberg_target(TABLE)
    ledger = first[TOPIC].watermark[0]
    reset = off.export_iceberg_reset(TOPIC, target, f"{ledger}:3")
    assert reset.previous == first[TOPIC].watermark and reset.watermark == (ledger, 2)
    kept = scan(reset.metadata_location, "count(*)", f"WHERE topic = '{TOPIC}'")[0][0]
    assert kept + reset.removed_rows == len(values)
    (last,) = scan(
        reset.metadata_location,
        "max(ledger_id * 1000000 + entry_id)",
        f"WHERE topic = '{TOPIC}'",
    )[0:1]
    assert last[0] == ledger * 1_000_000 + 2
    # the other topic's rows and watermark are untouched
    status = off.export_iceberg_status(OTHER, target)
    assert status.watermark == first[OTHER].watermark
    assert scan(reset.metadata_location, "count(*)", f"WHERE topic = '{OTHER}'")[0][0] == 10
    # the next run writes exactly the rows removed: every message once
    again = {r.topic: r for r in off.export_iceberg_run([TOPIC, OTHER], spec, engine="local")}
    assert again[TOPIC].rows == reset.removed_rows and again[OTHER].rows == 0
    everything = values + other
    got = table_digest(again[TOPIC].metadata_location)
    assert got == (len(everything), len(everything), digest(everything))
    with pytest.raises(ConfigError, match="Kafka"):
        off.export_iceberg_reset("kafka:orders:0", target, "0:0")


def test_schema_union_by_name_and_an_incompatible_change(tmp_path: Path) -> None:
    from offloader.export.iceberg_target import resolve_target

    target = resolve_target("iceberg://lake.events", tmp_path)
    catalog = open_catalog(target)
    base = pa.schema(
        [
            ("topic", pa.string()),
            ("ledger_id", pa.int64()),
            ("entry_id", pa.int64()),
            ("batch_index", pa.int32()),
            ("publish_time", pa.timestamp("us", tz="UTC")),
            ("value_decoded", pa.struct([("user", pa.string())])),
        ]
    )
    try:
        table = catalog.create(base, ("publish_time",), "day", "{}")
        wider = base.set(
            5, pa.field("value_decoded", pa.struct([("user", pa.string()), ("n", pa.int64())]))
        )
        rows = pa.table(
            {
                "topic": ["t"],
                "ledger_id": [1],
                "entry_id": [0],
                "batch_index": [0],
                "publish_time": pa.array([1_750_000_000_000_000], pa.timestamp("us", tz="UTC")),
                "value_decoded": [{"user": "ann", "n": 7}],
            },
            schema=wider,
        )
        path = tmp_path / "f.parquet"
        pq.write_table(rows, path)
        table.commit_files([f"file://{path}"], wider, {RUN_KEY: "r"}, {})
        assert table.arrow_schema.field("value_decoded").type.get_field_index("n") >= 0
        assert scan(table.metadata_location, "value_decoded.n, value_decoded.user") == [(7, "ann")]
        changed = base.set(
            5, pa.field("value_decoded", pa.struct([("user", pa.int64()), ("n", pa.int64())]))
        )
        with pytest.raises(IcebergSchemaError, match="user") as err:
            table.commit_files([], changed, {}, {})
        assert err.value.field is not None and "user" in err.value.field
        with pytest.raises(IcebergSchemaError, match="needs a timestamp"):
            catalog.create(base, ("value_decoded", "user"), "day", "{}")
    finally:
        catalog.close()
