"""offloader export run/status/reset to a local directory: Hive-partitioned Parquet written
exactly once (DuckDB reads the files back), incremental runs, the options that shape files."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any

import pytest

from offloader.api import ExportSpec
from offloader.errors import ExportError
from tests.spark.export_helpers import (
    T0,
    TOPIC,
    Clock,
    digest,
    duck,
    duck_digest,
    new_home,
    offload_all,
    produce_ledger,
)

pytestmark = [pytest.mark.spark]


def _files(root: Path) -> dict[str, bytes]:
    """Every data file and marker (not the watermark records of ``_offloader/``, which each
    run rewrites: tests/rebuild/test_rebuild_exports.py checks them)."""
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.relative_to(root).parts[0] != "_offloader"
    }


def _columns(target: str) -> list[str]:
    import duckdb

    con = duckdb.connect()
    source = f"read_parquet('{target}/**/*.parquet', hive_partitioning = true)"
    names = [r[0] for r in con.execute(f"DESCRIBE SELECT * FROM {source}").fetchall()]
    con.close()
    return names


@pytest.fixture()
def home(tmp_path: Path) -> Any:
    clock = Clock()
    off = new_home(tmp_path / "home", clock)
    values = produce_ledger(off, clock, TOPIC, 0, 90)  # ledger 0: offloaded below
    values += produce_ledger(off, clock, TOPIC, 90, 70)  # ledger 1: offloaded too
    offload_all(off, TOPIC)
    values += produce_ledger(off, clock, TOPIC, 160, 50)  # ledger 2: local only
    yield off, clock, values, tmp_path
    off.close()


def test_export_run_exactly_once_incremental_and_status(spark: Any, home: Any) -> None:
    off, clock, values, tmp = home
    out = tmp / "lake"
    spec = ExportSpec(str(out))
    (report,) = off.export_run([TOPIC], spec, spark=spark)
    info = off.topic_info(TOPIC)
    closed = [r for r in info.ledgers if r.state == "CLOSED"]
    assert report.watermark == (closed[-1].ledger_id, closed[-1].entries - 1)
    assert report.rows == len(values) == 210 and report.files >= 3
    assert duck_digest(str(out)) == (210, 210, digest(values)[1])
    # Hive layout: topic / dt / hr, decoded by DuckDB
    parts = duck(str(out), "topic, dt, hr, count(*)", "GROUP BY ALL")
    assert {p[0] for p in parts} == {TOPIC}
    assert sum(p[3] for p in parts) == 210 and len(parts) >= 3  # a message a minute: 3.5 hours
    names = sorted(p.name for p in out.rglob("*.parquet"))
    assert all(n.startswith("g1-") for n in names)
    markers = list(out.rglob("_SUCCESS"))
    assert markers and len(markers) == len(parts) - 1  # every hour but the last one is final

    # a re-run with nothing new writes nothing and changes nothing
    before = _files(out)
    (again,) = off.export_run([TOPIC], spec, spark=spark)
    assert (again.files, again.rows, again.watermark) == (0, 0, report.watermark)
    assert _files(out) == before

    # new messages: the open ledger's are not exported until it is closed
    more = produce_ledger(off, clock, TOPIC, 210, 30)
    clock.now += 1000
    off.produce_messages(TOPIC, [b'{"i": -1}'] * 5)  # open ledger
    status = off.export_status(TOPIC, str(out))
    assert status.watermark == report.watermark and status.lag_entries > 0
    (third,) = off.export_run([TOPIC], spec, spark=spark)
    assert third.previous == report.watermark and third.rows == 30
    assert duck_digest(str(out)) == (240, 240, digest(values + more)[1])
    for name, data in before.items():  # earlier files untouched
        assert (out / name).read_bytes() == data
    status = off.export_status(TOPIC, str(out))
    assert status.watermark == third.watermark and status.rows == 240
    assert status.lag_entries == 5  # the open ledger: 5 messages, one entry each
    assert len(status.files) == len(list(out.rglob("*.parquet")))
    assert status.uncommitted_files == 0


def test_rerun_writes_the_same_names_and_bytes_and_reset(spark: Any, home: Any) -> None:
    off, _clock, values, tmp = home
    out = tmp / "lake"
    spec = ExportSpec(str(out), partition_by="dt,hr")
    off.export_run([TOPIC], spec, spark=spark)
    first = _files(out)
    # a crashed run's leftovers: a file past the watermark and a temporary file
    reset = off.export_reset(TOPIC, str(out), "0:0")
    assert reset.watermark == (0, -1) and len(reset.removed) == len(
        [n for n in first if n.endswith(".parquet")]
    )
    assert not list(out.rglob("*.parquet")) and not list(out.rglob("_SUCCESS"))
    off.export_run([TOPIC], spec, spark=spark)
    assert _files(out) == first  # same names, same bytes

    # reset to a message id in the middle: only the files after it go
    mid_ledger = off.topic_info(TOPIC).ledgers[1].ledger_id
    files_before = {n: d for n, d in first.items() if n.endswith(".parquet")}
    r = off.export_reset(TOPIC, str(out), f"{mid_ledger}:5")
    assert r.watermark <= (mid_ledger, 4)
    kept = {n for n in files_before if n not in r.removed}
    assert kept and all((out / n).read_bytes() == files_before[n] for n in kept)
    for name in r.removed:
        ledger, _first_entry, last_entry = (int(x) for x in Path(name).name.split("-")[1:4])
        assert (ledger, last_entry) > r.watermark
    ((rows_left,),) = duck(str(out), "count(*)")
    assert rows_left < 210
    off.export_run([TOPIC], spec, spark=spark)
    assert _files(out) == first

    # reset to a time: files holding messages published at or after it go
    cut = T0 + 100 * 60_000
    r = off.export_reset(TOPIC, str(out), str(cut))
    ((left,),) = duck(str(out), "max(epoch_ms(publish_time))")
    assert left < cut and r.removed
    off.export_run([TOPIC], spec, spark=spark)
    assert duck_digest(str(out)) == (210, 210, digest(values)[1])
    # settings changed at the same generation: refused; a new generation writes beside
    with pytest.raises(ExportError, match="generation 2"):
        off.export_run([TOPIC], ExportSpec(str(out), partition_by="dt"), spark=spark)
    off.export_run([TOPIC], ExportSpec(str(out), partition_by="dt", generation=2), spark=spark)
    assert len(list(out.rglob("g2-*.parquet"))) >= 1
    assert _files(out).keys() >= first.keys()


def test_time_field_invalid_partition_until_size_and_flatten(spark: Any, tmp_path: Path) -> None:
    clock = Clock()
    off = new_home(tmp_path / "home", clock)
    day = 86_400_000

    def ts(i: int, now: int) -> Any:
        if i % 10 == 3:
            return "not a time"
        if i % 10 == 7:
            return None
        # ISO-8601 for odd i, epoch ms for even; days apart from the publish time
        when = T0 + (i % 3) * day
        if i % 2:
            import datetime as dt

            return dt.datetime.fromtimestamp(when / 1000, tz=dt.timezone.utc).isoformat()
        return when

    values = produce_ledger(off, clock, TOPIC, 0, 120, ts=ts, step_ms=1000)
    values += produce_ledger(off, clock, TOPIC, 120, 80, ts=ts, step_ms=1000)
    out = tmp_path / "lake"
    until = T0 + 150 * 1000 + 1  # publish times are T0 + (i + 1) s
    spec = ExportSpec(
        str(out),
        partition_by="dt",
        time_field="ts",
        until_ms=until,
        max_file_size=4096,
        flatten=True,
        value_format="json",
        schema="i BIGINT, pad STRING",
    )
    (report,) = off.export_run([TOPIC], spec, spark=spark)
    # --until cuts between entries (a batch of 4 messages shares its publish time)
    assert 146 <= report.rows <= 150
    exported = values[: report.rows]
    ((latest, top),) = duck(str(out), "max(epoch_ms(publish_time)), max(value_i)")
    assert latest < until and top == report.rows - 1
    invalid = [v for v in exported if json.loads(v)["i"] % 10 in (3, 7)]
    assert report.rows == len(exported) and report.invalid_rows == len(invalid)
    assert duck(str(out), "count(*)") == [(len(exported),)]
    by_dt = {str(k): v for k, v in duck(str(out), "dt, count(*)", "GROUP BY dt")}
    assert by_dt["__invalid__"] == len(invalid)
    assert len(by_dt) == 4  # three days and __invalid__
    columns = _columns(str(out))
    assert {"value_i", "value_pad", "value"} <= set(columns)
    assert "value_decoded" not in columns
    got = sorted(r[0] for r in duck(str(out), "value_i"))
    assert got == sorted(json.loads(v)["i"] for v in exported)
    sizes = [p.stat().st_size for p in out.rglob("*.parquet")]
    assert len(sizes) > 6  # split by --max-file-size
    assert not any(p.parent.name == "dt=__invalid__" for p in out.rglob("_SUCCESS"))
    # the rest after --until comes with the next run
    (rest,) = off.export_run([TOPIC], dataclasses.replace(spec, until_ms=None), spark=spark)
    assert rest.rows == len(values) - len(exported)
    assert duck_digest(str(out))[:2] == (len(values), len(values))
    off.close()


def test_cli_export_run_and_status_json(spark: Any, home: Any) -> None:
    from click.testing import CliRunner

    from cli.main import cli

    off, _clock, values, tmp = home
    out = tmp / "cli-lake"
    env = {"OFFLOADER_HOME": str(tmp / "home")}
    off.close()
    runner = CliRunner()
    res = runner.invoke(
        cli,
        ["--json", "export", "run", TOPIC, "--to", str(out), "--partition-by", "dt"],
        env=env,
        catch_exceptions=False,
    )
    assert res.exit_code == 0, res.output
    report = json.loads(res.output.strip().splitlines()[-1])
    assert report["rows"] == len(values)
    res = runner.invoke(cli, ["export", "status", TOPIC, "--to", str(out), "--json"], env=env)
    assert res.exit_code == 0, res.output
    status = json.loads(res.output.strip().splitlines()[-1])
    assert status["watermark"] == report["watermark"] and status["lag_entries"] == 0
    assert len(status["files"]) == report["files"]
    res = runner.invoke(cli, ["export", "status", TOPIC, "--to", str(out)], env=env)
    assert "watermark" in res.output and os.path.basename(str(out)) in res.output
    res = runner.invoke(
        cli, ["export", "reset", TOPIC, "--target", str(out), "--to", "nonsense"], env=env
    )
    assert res.exit_code != 0 and "ISO-8601" in res.output


def test_the_binary_schema_is_the_sources(spark: Any) -> None:
    """The runners take the ``pulsar-messages`` schema for binary values from
    :func:`binary_schema` (no Spark round trip): it must be what the source says."""
    from offloader.spark import register
    from offloader.spark.export_job import binary_schema

    register(spark)
    loaded = spark.read.format("pulsar-messages").option("value_format", "binary")
    assert loaded.option("topics", "x").load().schema == binary_schema()
