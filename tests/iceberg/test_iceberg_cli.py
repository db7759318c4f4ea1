"""``offloader export run --to iceberg://...``, ``export status --json``, ``expire-snapshots`` and
``clean-orphans`` through the command line (click's CliRunner; the local engine, no JVM)."""

from __future__ import annotations

from pathlib import Path

from tests.cli.helpers import json_lines, ok, one_line_error, run
from tests.iceberg.helpers import digest, table_digest
from tests.spark.export_helpers import TOPIC, Clock, new_home, produce_ledger


def test_run_status_expire_clean(tmp_path: Path) -> None:
    home = tmp_path / "home"
    clock = Clock()
    off = new_home(home, clock)
    values = produce_ledger(off, clock, TOPIC, 0, 40)
    off.close()
    catalog = f"sqlite:///{tmp_path}/cat.db"
    warehouse = str(tmp_path / "wh")
    where = ["--catalog", catalog, "--warehouse", warehouse]
    args = ["--json", "export", "run", TOPIC, "--to", "iceberg://lake.orders", *where]
    (first,) = json_lines(ok(home, *args, "--engine", "local"))
    assert first["rows"] == 40 and first["table"] == "iceberg://lake.orders"
    assert first["metadata_location"].startswith(f"file://{warehouse}/lake/orders/metadata/")
    assert table_digest(first["metadata_location"]) == (40, 40, digest(values))

    status = ["export", "status", TOPIC, "--to", "iceberg://lake.orders", *where, "--json"]
    (st,) = json_lines(ok(home, *status))
    assert st["snapshot_id"] == first["snapshot_id"]
    assert st["metadata_location"] == first["metadata_location"]
    assert st["watermark"] == first["watermark"] and st["lag_entries"] == 0
    assert st["total_records"] == 40 and st["snapshots"] == 1
    text = ok(home, *status[:-1]).stdout
    assert "metadata" in text and first["metadata_location"] in text

    (again,) = json_lines(ok(home, *args, "--engine", "local"))
    assert again["rows"] == 0 and again["snapshot_id"] == first["snapshot_id"]

    expire = ["--json", "export", "expire-snapshots", "iceberg://lake.orders", *where]
    (ex,) = json_lines(ok(home, *expire, "--older-than", "0s"))
    assert ex["expired"] == [] and ex["kept"] == 1  # the current snapshot always stays
    clean = ["--json", "export", "clean-orphans", "lake.orders", *where]
    (cl,) = json_lines(ok(home, *clean, "--older-than", "0s", "--dry-run"))
    assert cl["removed"] == [] and cl["referenced"] >= 4


def test_bad_targets_are_one_line_errors(tmp_path: Path) -> None:
    home = tmp_path / "home"
    clock = Clock()
    new_home(home, clock).close()
    bad = run(home, "export", "run", TOPIC, "--to", "iceberg://no-dots", "--engine", "local")
    assert "iceberg://NAMESPACE.TABLE" in one_line_error(bad)
    missing = run(home, "export", "status", TOPIC, "--to", "iceberg://lake.none")
    assert "does not exist" in one_line_error(missing)
    rest = run(
        home, "export", "status", TOPIC, "--to", "iceberg://lake.t", "--catalog", "ftp://x/y"
    )
    assert "--catalog" in one_line_error(rest)
    # a REST catalog's URL passes through to pyiceberg; nothing listens there: one clear line
    down = run(
        home, "export", "status", TOPIC, "--to", "iceberg://lake.t", "--catalog",
        "http://127.0.0.1:9/catalog",
    )  # fmt: skip
    assert "Iceberg catalog http://127.0.0.1:9/catalog" in one_line_error(down)
    reset = run(home, "export", "reset", TOPIC, "--target", "iceberg://lake.t", "--to", "0:0")
    assert "Iceberg table" in one_line_error(reset)
    parquet = run(home, "export", "run", TOPIC, "--to", str(tmp_path / "p"), "--catalog", "x.db")
    assert "iceberg://" in one_line_error(parquet)


def test_service_run_exports_to_the_configured_table(tmp_path: Path) -> None:
    home = tmp_path / "home"
    clock = Clock()
    off = new_home(home, clock)
    values = produce_ledger(off, clock, TOPIC, 0, 30)
    off.close()
    (home / "offloader.toml").write_text(
        f'[[export]]\ntopics = ["{TOPIC}"]\nto = "iceberg://lake.orders"\n'
        f'warehouse = "{tmp_path / "wh"}"\n'
    )
    out = ok(home, "service", "run", "--once").stdout
    assert f"export {TOPIC} -> iceberg://lake.orders: 30 messages" in out
    status = ["export", "status", TOPIC, "--to", "iceberg://lake.orders", "--json"]
    (st,) = json_lines(ok(home, *status, "--warehouse", str(tmp_path / "wh")))
    assert st["watermark"] != [-1, -1] and st["lag_entries"] == 0
    assert table_digest(st["metadata_location"]) == (30, 30, digest(values))
    # a second pass with nothing new commits nothing
    ok(home, "service", "run", "--once")
    (again,) = json_lines(ok(home, *status, "--warehouse", str(tmp_path / "wh")))
    assert again["snapshot_id"] == st["snapshot_id"]
