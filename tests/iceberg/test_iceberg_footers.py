"""The commit builds each file's Iceberg ``DataFile`` from the footer its task reported
(offloader/export/iceberg_files.py), reading no file back: every field equals what pyiceberg's
``add_files`` computes by reading the same file (partition values, counts, bounds, sizes), as
stored in the manifests; a file spanning two partitions, or whose columns do not fit the table,
is refused as ``add_files`` refuses it, and nothing is committed."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.io.pyarrow import parquet_file_to_data_file

from offloader.api import ExportSpec, Offloader
from offloader.errors import IcebergError
from offloader.export.iceberg import run_iceberg_export
from offloader.export.iceberg_catalog import IcebergTable, open_catalog
from offloader.export.iceberg_files import NewFile, data_files
from offloader.export.iceberg_target import RUN_KEY
from offloader.export.plan import Held, TopicPlan, WrittenFile
from offloader.spark.iceberg_job import IcebergLocalRunner
from tests.iceberg.helpers import digest, table_digest
from tests.spark.export_helpers import TOPIC, Clock, new_home, offload_all, produce_ledger

TABLE = "iceberg://pulsar.orders"
COPY = "iceberg://pulsar.copy"
#: every field of a DataFile that the manifests store
FIELDS = (
    "content",
    "file_path",
    "file_format",
    "partition",
    "record_count",
    "file_size_in_bytes",
    "column_sizes",
    "value_counts",
    "null_value_counts",
    "nan_value_counts",
    "lower_bounds",
    "upper_bounds",
    "key_metadata",
    "split_offsets",
    "equality_ids",
    "sort_order_id",
)


class Recording(IcebergLocalRunner):
    """The local engine, keeping what its tasks reported."""

    written: list[WrittenFile | Held]

    def write(self, plans: Sequence[TopicPlan]) -> list[WrittenFile | Held]:
        out = super().write(plans)
        self.written = list(out)
        return out


def _fields(data_file: Any) -> dict[str, Any]:
    out = {name: getattr(data_file, name) for name in FIELDS}
    out["partition"] = tuple(data_file.partition)
    # a manifest's partition spec (set when read from one; pyiceberg's from_args leaves it out)
    out["spec_id"] = getattr(data_file, "_spec_id", None)
    return out


def _committed(table: IcebergTable) -> dict[str, dict[str, Any]]:
    """The current snapshot's data files, as its manifests store them."""
    raw = table._table
    snap = raw.current_snapshot()
    assert snap is not None
    out = {}
    for manifest in snap.manifests(raw.io):
        for entry in manifest.fetch_manifest_entry(raw.io):
            out[entry.data_file.file_path] = _fields(entry.data_file)
    return out


@pytest.fixture()
def exported(tmp_path: Path) -> Any:
    """A topic of three ledgers (hours apart: several hour partitions) exported through the
    footers; the runner's reports."""
    clock = Clock()
    off = new_home(tmp_path / "home", clock)
    values = produce_ledger(off, clock, TOPIC, 0, 90, step_ms=150_000)
    values += produce_ledger(off, clock, TOPIC, 90, 40, step_ms=7_000, batch=1)
    offload_all(off, TOPIC)
    values += produce_ledger(off, clock, TOPIC, 130, 25, step_ms=400_000)
    spec = ExportSpec(TABLE, partition_by="dt,hr")
    runner = Recording(str(off._rt.home), spec)
    (report,) = run_iceberg_export(off._rt.meta, off._rt.home, spec, [TOPIC], runner)
    yield off, values, report, runner
    off.close()


def test_datafiles_from_footers_equal_what_add_files_computes(exported: Any) -> None:
    off, values, report, runner = exported
    written = [w for w in runner.written if isinstance(w, WrittenFile)]
    assert len(written) >= 4 and report.files == len(written)
    assert all(w.footer for w in written)
    assert table_digest(report.metadata_location) == (len(values), len(values), digest(values))

    catalog = open_catalog(off.iceberg_target(TABLE))
    try:
        table = catalog.load()
        assert table is not None
        ours = _committed(table)
        summary = table.current_summary()
        paths = sorted(ours)
        assert len(paths) == len(written)
        partitions = {f["partition"] for f in ours.values()}
        assert len(partitions) >= 4  # one topic, several hours

        # in memory: the footer's DataFile and the one add_files' helper reads from the file
        raw = table._table
        news = [NewFile(f"{table.location}/data/{w.path}", w.size, w.footer) for w in written]
        from_footers = {d.file_path: _fields(d) for d in data_files(raw.metadata, raw.io, news)}
        read = {p: _fields(parquet_file_to_data_file(raw.io, raw.metadata, p)) for p in paths}
        assert from_footers == read
        assert {p: {**f, "spec_id": None} for p, f in ours.items()} == read
        assert {f["spec_id"] for f in ours.values()} == {raw.metadata.default_spec_id}
    finally:
        catalog.close()
    # stored: the same files added to a twin table by pyiceberg's add_files
    copy = open_catalog(off.iceberg_target(COPY))
    try:
        twin = copy.create(table.arrow_schema, ("publish_time",), "hour", "{}")
        tx = twin._table.transaction()
        tx.add_files(paths, snapshot_properties={RUN_KEY: "add_files"})
        tx.commit_transaction()
        twin.refresh()
        assert _committed(twin) == ours  # spec ids included
        # and the snapshot pyiceberg wrote around them says the same
        counts = [k for k in twin.current_summary() if k.startswith(("added-", "total-"))]
        assert len(counts) >= 6
        theirs_summary = twin.current_summary()
        assert {k: summary[k] for k in counts} == {k: theirs_summary[k] for k in counts}
        for fields in ours.values():  # the bounds are there, not empty maps
            assert fields["lower_bounds"] and fields["upper_bounds"]
            assert fields["record_count"] > 0 and fields["null_value_counts"]
    finally:
        copy.close()


def _day_file(tmp_path: Path, days: Sequence[int], name: str) -> tuple[Path, pa.Schema, bytes]:
    """A file of the export's columns whose rows fall on ``days`` (days after 2025-06-15)."""
    schema = pa.schema(
        [
            ("topic", pa.string()),
            ("ledger_id", pa.int64()),
            ("entry_id", pa.int64()),
            ("batch_index", pa.int32()),
            ("publish_time", pa.timestamp("us", tz="UTC")),
        ]
    )
    micros = [1_750_000_000_000_000 + d * 86_400_000_000 for d in days]
    rows = pa.table(
        {
            "topic": ["t"] * len(days),
            "ledger_id": [1] * len(days),
            "entry_id": list(range(len(days))),
            "batch_index": [0] * len(days),
            "publish_time": pa.array(micros, pa.timestamp("us", tz="UTC")),
        },
        schema=schema,
    )
    path = tmp_path / name
    collected: list[Any] = []
    pq.write_table(rows, path, compression="zstd", metadata_collector=collected)
    out = pa.BufferOutputStream()
    collected[0].write_metadata_file(out)
    return path, schema, out.getvalue().to_pybytes()


def test_a_file_spanning_two_partitions_is_refused_as_add_files_refuses_it(
    tmp_path: Path,
) -> None:
    off = Offloader.from_settings(tmp_path / "home")
    catalog = open_catalog(off.iceberg_target(TABLE))
    try:
        one, schema, one_footer = _day_file(tmp_path, [0, 0], "one.parquet")
        two, _, two_footer = _day_file(tmp_path, [0, 1], "two.parquet")
        table = catalog.create(schema, ("publish_time",), "day", "{}")
        good = NewFile(f"file://{one}", one.stat().st_size, one_footer)
        bad = NewFile(f"file://{two}", two.stat().st_size, two_footer)
        with pytest.raises(IcebergError, match="more than one partition value"):
            table.commit_files([good, bad], schema, {RUN_KEY: "r"}, {"k": "v"})
        assert table.snapshot_id is None and "k" not in table.properties  # nothing committed
        with pytest.raises(IcebergError, match="more than one partition value"):
            table.commit_files([f"file://{two}"], schema, {RUN_KEY: "r"}, {})  # read: the same
        table.refresh()
        assert table.snapshot_id is None
        table.commit_files([good], schema, {RUN_KEY: "r"}, {"k": "v"})
        assert table.snapshot_id is not None and table.properties["k"] == "v"
        assert table.data_file_paths() == [f"file://{one}"]
    finally:
        catalog.close()
        off.close()


def test_a_footer_whose_columns_do_not_fit_the_table_is_refused(tmp_path: Path) -> None:
    off = Offloader.from_settings(tmp_path / "home")
    catalog = open_catalog(off.iceberg_target(TABLE))
    try:
        path, schema, footer = _day_file(tmp_path, [0], "f.parquet")
        other = schema.set(1, pa.field("ledger_id", pa.string()))  # the table's ledger_id
        table = catalog.create(other, ("publish_time",), "day", "{}")
        with pytest.raises(IcebergError, match="ledger_id"):
            table.commit_files(
                [NewFile(f"file://{path}", path.stat().st_size, footer)], other, {}, {}
            )
        table.refresh()
        assert table.snapshot_id is None
    finally:
        catalog.close()
        off.close()
