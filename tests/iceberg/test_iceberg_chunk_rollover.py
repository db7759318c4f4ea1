"""Export to an Iceberg table and a chunked message whose chunks span a ledger rollover: the
table's watermark stops before the message while its last chunk is not in a closed ledger,
and once that ledger is closed the next run commits it, read by DuckDB's ``iceberg_scan``
exactly once with its whole value (spec/export.md §5, §10)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pyarrow.parquet as pq

from offloader.api import ExportSpec
from offloader.export.iceberg_catalog import open_catalog
from tests.iceberg.helpers import digest, scan, table_digest
from tests.spark.export_helpers import TOPIC, ChunkedTopic, Clock, new_home, offload_all

TABLE = "iceberg://pulsar.chunks"


def test_rollover_chunked_message_committed_once_when_its_ledger_closes(tmp_path: Path) -> None:
    clock = Clock()
    off = new_home(tmp_path / "home", clock)
    try:
        t = ChunkedTopic(off, clock)
        before_m = [t.batch("p1"), t.batch("p2")]
        first_run = list(t.values)
        m_value, m = t.chunked("pm", 4)
        a, _ = t.produce([*before_m, m[0], t.batch("p1"), m[1]])
        off.roll_over(TOPIC)
        offload_all(off, TOPIC)
        b, _ = t.produce([m[2], t.batch("p2")])  # ledger B open: m's last chunk not yet there
        spec = ExportSpec(TABLE, partition_by="dt")

        (one,) = off.export_iceberg_run([TOPIC], spec, engine="local")
        assert one.watermark == (a, 1) and one.rows == len(first_run) == 6
        assert table_digest(one.metadata_location) == (6, 6, digest(first_run))
        # nothing past the watermark is left in the warehouse either
        names = [p.name for p in (tmp_path / "home").rglob("*.parquet")]
        assert names == [f"g1-{a}-0-1-2025-06-15.parquet"]

        t.produce([m[3], t.batch("p1")])
        off.roll_over(TOPIC)  # B closed, on local disk
        (two,) = off.export_iceberg_run([TOPIC], spec, engine="local")
        values = list(t.values)
        assert two.previous == (a, 1) and two.watermark == (b, 3)
        assert two.rows == len(values) - 6
        assert table_digest(two.metadata_location) == (len(values), len(values), digest(values))
        sha = hashlib.sha256(m_value).hexdigest()
        rows = scan(two.metadata_location, "message_id, ledger_id, entry_id, value")
        found = [r[:3] for r in rows if hashlib.sha256(bytes(r[3])).hexdigest() == sha]
        assert found == [(f"{b}:2:-1:-1", b, 2)]

        # a third run finds nothing new and commits nothing twice
        (three,) = off.export_iceberg_run([TOPIC], spec, engine="local")
        assert three.rows == 0 and three.watermark == (b, 3)
        assert table_digest(three.metadata_location)[0] == len(values)
        catalog = open_catalog(off.iceberg_target(TABLE))
        try:
            table = catalog.load()
            assert table is not None
            for path in table.data_file_paths():  # each file sorted by the source's columns
                got = pq.read_table(path.removeprefix("file://")).to_pylist()
                keys = [(r["ledger_id"], r["entry_id"], r["batch_index"]) for r in got]
                assert keys == sorted(keys)
        finally:
            catalog.close()
    finally:
        off.close()
