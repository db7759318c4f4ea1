"""``offloader export`` on the command line: files gone below the watermark make ``export status``
say so (the text, ``--json``, one ``error:`` line and exit 1) and ``export run`` write them
again; inputs that used to end in a traceback (a Kafka key without its partition on an Iceberg
target, a topic or a directory name that is not UTF-8) get one ``error:`` line."""

from __future__ import annotations

import json
import os
from pathlib import Path

from tests.cli.helpers import ok, one_line_error, run
from tests.spark.export_helpers import TOPIC, Clock, new_home, produce_ledger


def _exported(tmp_path: Path) -> tuple[Path, Path]:
    home, lake = tmp_path / "home", tmp_path / "lake"
    clock = Clock()
    with new_home(home, clock) as off:
        produce_ledger(off, clock, TOPIC, 0, 60)
        produce_ledger(off, clock, TOPIC, 60, 40)
    ok(home, "export", "run", TOPIC, "--to", str(lake), "--engine", "local",
       "--max-file-size", "2K")  # fmt: skip
    return home, lake


def test_status_reports_missing_files_and_run_writes_them_again(tmp_path: Path) -> None:
    home, lake = _exported(tmp_path)
    files = sorted(lake.rglob("*.parquet"))
    kept = {p: p.read_bytes() for p in files}
    files[0].unlink()
    files[3].unlink()

    text = run(home, "export", "status", TOPIC, "--to", f"{lake}/")
    line = one_line_error(text)
    assert "2 files below the watermark" in line and "export run" in line
    assert "MISSING       2 files below the watermark (no file covers 0:" in text.stdout
    assert "100 messages" in text.stdout

    as_json = run(home, "--json", "export", "status", TOPIC, "--to", str(lake))
    one_line_error(as_json)
    record = json.loads(as_json.stdout)
    assert record["missing_files"] == 2 and record["rows"] == 100
    assert record["missing_ranges"][0][0] == [0, 0]
    assert len(record["files"]) == len(files) - 2

    again = ok(home, "export", "run", TOPIC, "--to", str(lake), "--engine", "local",
               "--max-file-size", "2K")  # fmt: skip
    assert "2 missing files written again" in again.stdout
    assert {p: p.read_bytes() for p in sorted(lake.rglob("*.parquet"))} == kept
    healthy = ok(home, "--json", "export", "status", TOPIC, "--to", str(lake))
    assert json.loads(healthy.stdout)["missing_files"] == 0


def test_kafka_key_without_a_partition_on_an_iceberg_target(tmp_path: Path) -> None:
    home, lake = _exported(tmp_path)
    line = one_line_error(
        run(home, "export", "status", "kafka:clicks", "--to", "iceberg://kafka.clicks")
    )
    assert "kafka:<topic>:<partition>" in line
    line = one_line_error(run(home, "export", "status", "kafka:clicks", "--to", str(lake)))
    assert "kafka:<topic>:<partition>" in line


def test_names_that_are_not_utf8_are_refused(tmp_path: Path) -> None:
    home, _lake = _exported(tmp_path)
    topic = os.fsdecode(b"cl\xffcks")
    line = one_line_error(
        run(
            home,
            "export",
            "run",
            "--kafka",
            topic,
            "--to",
            str(tmp_path / "k"),
            "--engine",
            "local",
        )
    )
    assert "not a legal Kafka topic name" in line
    target = os.fsdecode(str(tmp_path).encode() + b"/l\xffake")
    for args in (
        ("export", "run", TOPIC, "--to", target, "--engine", "local"),
        ("export", "status", TOPIC, "--to", target),
        ("export", "reset", TOPIC, "--target", target, "--to", "0:0"),
    ):
        line = one_line_error(run(home, *args))
        assert "not valid UTF-8" in line and "l\\\\xffake" in line, line
    assert not (tmp_path / "k").exists()


def test_iceberg_status_reports_data_files_gone_from_the_warehouse(tmp_path: Path) -> None:
    home = tmp_path / "home"
    clock = Clock()
    with new_home(home, clock) as off:
        produce_ledger(off, clock, TOPIC, 0, 40)
    where = ["--catalog", f"sqlite:///{tmp_path}/cat.db", "--warehouse", str(tmp_path / "wh")]
    table = ["--to", "iceberg://lake.orders", *where]
    ok(home, "export", "run", TOPIC, *table, "--engine", "local", "--max-file-size", "2K")
    status = ["--json", "export", "status", TOPIC, *table]
    assert json.loads(ok(home, *status).stdout)["missing_data_files"] == []
    data = sorted((tmp_path / "wh" / "lake" / "orders" / "data").rglob("*.parquet"))
    assert len(data) > 1
    data[1].unlink()
    result = run(home, *status)
    line = one_line_error(result)
    assert "1 data files of iceberg://lake.orders's current snapshot are missing" in line
    assert json.loads(result.stdout)["missing_data_files"] == [f"file://{data[1]}"]
