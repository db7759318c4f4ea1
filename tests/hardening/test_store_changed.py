"""Issue 21 item 20 (the store): the metadata records which store each offload went to, and a
read or a verify with another ``--store`` names that store instead of only "no index object"."""

from __future__ import annotations

from pathlib import Path

from tests.cli.helpers import json_lines, ok, one_line_error, run
from tests.hardening.helpers import offloaded_topic


def test_a_changed_store_is_named(tmp_path: Path) -> None:
    offloaded_topic(tmp_path, entries=200, per_ledger=100)
    original = f"file://{(tmp_path / 'objects').resolve()}"
    other = tmp_path / "other-store"
    other.mkdir()
    line = one_line_error(run(tmp_path, "--store", str(other), "topics", "read", "t", "-n", "1"))
    assert "no index object" in line
    assert f"the offload went to {original}" in line and f"use --store {original}" in line
    result = run(tmp_path, "--json", "--store", str(other), "objects", "verify")
    assert result.exit_code == 1
    problems = [r.get("problem") or "" for r in json_lines(result)]
    assert any(f"use --store {original}" in p for p in problems), problems
    ok(tmp_path, "topics", "read", "t", "-n", "1")  # the right store still reads
