"""Exports on the shared PostgreSQL store: ``offloader --metadata postgresql://... export
run/status/reset`` from two homes see and move one watermark (the local engine: no JVM), and
runs from different homes take one lock."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from cli.main import cli
from offloader.api import MessageOptions
from offloader.errors import ExportBusy
from offloader.export.lock import export_lock
from offloader.metadata.postgres.export import PgExportMetadataStore
from tests.cluster.conftest import Broker
from tests.spark.export_helpers import TOPIC, digest, duck_digest, offload_all


def _export(tmp_path: Path, shared: tuple[str, str], home: str, *args: str) -> Any:
    metadata, store = shared
    command = ["--home", str(tmp_path / home), "--store", store, "--metadata", metadata]
    res = CliRunner().invoke(cli, [*command, "--json", "export", *args])
    assert res.exit_code == 0, res.output
    return json.loads(res.output.strip().splitlines()[-1])


def test_two_homes_share_one_export_watermark(
    tmp_path: Path, shared: tuple[str, str], broker: Broker
) -> None:
    a = broker("a")
    a.create_namespace("public/default")
    values = [json.dumps({"i": i}).encode() for i in range(60)]
    a.produce_messages(TOPIC, iter(values), MessageOptions(batch_size=4))
    a.roll_over(TOPIC)
    offload_all(a, TOPIC)  # broker b reads a's ledgers from the shared object store
    broker("b")  # b's home, registered in the shared store
    lake = str(tmp_path / "lake")

    first = _export(tmp_path, shared, "a", "run", TOPIC, "--to", lake, "--engine", "local")
    assert first["rows"] == 60 and first["watermark"] != [-1, -1]
    assert duck_digest(lake) == (60, 60, digest(values)[1])
    seen = _export(tmp_path, shared, "b", "status", TOPIC, "--to", lake)
    assert seen["watermark"] == first["watermark"] and seen["rows"] == 60
    again = _export(tmp_path, shared, "b", "run", TOPIC, "--to", lake, "--engine", "local")
    assert again["rows"] == 0 and again["watermark"] == first["watermark"]  # nothing twice

    into_last = f"{first['watermark'][0]}:0"  # a message id in the last exported ledger
    back = _export(tmp_path, shared, "b", "reset", TOPIC, "--target", lake, "--to", into_last)
    assert back["previous"] == first["watermark"] and back["watermark"] < first["watermark"]
    assert back["removed"]  # b removed the files after it, from the shared target
    seen = _export(tmp_path, shared, "a", "status", TOPIC, "--to", lake)
    assert seen["watermark"] == back["watermark"] and seen["rows"] < 60
    redo = _export(tmp_path, shared, "a", "run", TOPIC, "--to", lake, "--engine", "local")
    assert redo["watermark"] == first["watermark"] and 0 < redo["rows"] < 60
    assert duck_digest(lake) == (60, 60, digest(values)[1])  # still every message once
    # a's new ledgers, closed but still only on a's disk: b stops before them, a does not
    more = [json.dumps({"i": i}).encode() for i in range(60, 80)]
    a.produce_messages(TOPIC, iter(more), MessageOptions(batch_size=4))
    a.roll_over(TOPIC)
    held = _export(tmp_path, shared, "b", "run", TOPIC, "--to", lake, "--engine", "local")
    assert held["rows"] == 0 and held["watermark"] == first["watermark"]
    offload_all(a, TOPIC)
    late = _export(tmp_path, shared, "b", "run", TOPIC, "--to", lake, "--engine", "local")
    assert late["rows"] == 20 and late["watermark"] > first["watermark"]
    assert duck_digest(lake) == (80, 80, digest(values + more)[1])
    assert not (tmp_path / "a" / "metadata.db").exists()  # nothing in the homes' SQLite
    assert not (tmp_path / "b" / "metadata.db").exists()


def test_homes_on_one_store_take_one_export_lock(tmp_path: Path, pg_url: str) -> None:
    """The file lock is per home; on a shared store the store's lock serializes runs from
    every home, and a holder killed with -9 releases it (its connection ends)."""
    stores = [PgExportMetadataStore(pg_url) for _ in range(2)]
    homes = [tmp_path / "a", tmp_path / "b"]
    try:
        with export_lock(homes[0], "/lake", TOPIC, 1, shared=stores[0]):
            with (
                pytest.raises(ExportBusy, match="another broker"),
                export_lock(homes[1], "/lake", TOPIC, 1, timeout=0.2, shared=stores[1]),
            ):
                pass
            with export_lock(homes[1], "/lake", TOPIC, 2, timeout=0.2, shared=stores[1]):
                pass  # another generation is another export
        holder = subprocess.Popen(
            [sys.executable, "-c", _HOLDER, pg_url, TOPIC],
            cwd=Path(__file__).resolve().parents[2],
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
            with pytest.raises(ExportBusy), stores[1].export_lock("/lake", TOPIC, 1, timeout=0.2):
                pass
            holder.send_signal(signal.SIGKILL)
            holder.wait(timeout=30)
            with stores[1].export_lock("/lake", TOPIC, 1, timeout=10):
                pass
        finally:
            holder.kill()
            holder.wait(timeout=30)
    finally:
        for s in stores:
            s.close()


_HOLDER = """
import sys, time
from offloader.metadata.postgres.export import PgExportMetadataStore
store = PgExportMetadataStore(sys.argv[1])
with store.export_lock("/lake", sys.argv[2], 1, timeout=10):
    print("held", flush=True)
    time.sleep(600)
"""
