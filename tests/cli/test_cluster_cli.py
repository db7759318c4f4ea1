"""The CLI on a shared PostgreSQL metadata store: ``--metadata``, ``metadata =`` in
offloader.toml, two homes as two brokers, ``topics unload`` and ``brokers list``."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cli.render import time_text
from tests.cli.helpers import json_lines, ok, one_line_error, run

NS = "public/default"
T1 = "persistent://public/default/t1"


@pytest.mark.postgres
def test_two_homes_on_one_metadata_store(tmp_path: Path, pg_url: str) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    store = f"file://{tmp_path / 'objects'}"
    a.mkdir()
    # broker a names the store with the option, broker b in its offloader.toml
    b.mkdir()
    (b / "offloader.toml").write_text(f'metadata = "{pg_url}"\nstore = "{store}"\n')
    ga = ["--metadata", pg_url, "--store", store]
    ok(a, *ga, "namespaces", "create", NS)
    ok(a, *ga, "topics", "produce", T1, "--synthetic", "12", "--max-entries-per-ledger", "5",
       "--min-rollover-time", "0")  # fmt: skip
    listed = json_lines(ok(b, "--json", "topics", "list"))
    assert listed == [{"topic": T1}]
    info = json_lines(ok(b, "--json", "topics", "info", T1))[0]
    broker_a = (a / "broker-id").read_text().strip()
    assert info["owner"] == broker_a
    error = one_line_error(run(b, "topics", "produce", T1, "--synthetic", "1"))
    assert f"owned by broker {broker_a}" in error and "topics unload" in error
    # a offloads, unloads; b reads the offloaded entries, then owns the topic by writing
    ok(a, *ga, "topics", "offload-prefix", T1, "--size-threshold", "0")
    error = one_line_error(run(a, *ga, "topics", "unload", T1))
    assert "offload them first" in error
    ok(a, *ga, "topics", "offload-prefix", T1, "--size-threshold", "0")
    unloaded = json_lines(ok(a, *ga, "--json", "topics", "unload", T1))[0]
    assert unloaded["unloaded"] and len(unloaded["offloaded_ledgers"]) == 3
    entries = json_lines(ok(b, "--json", "topics", "read", T1))
    assert len(entries) == 12
    ok(b, "topics", "produce", T1, "--synthetic", "2")
    brokers = json_lines(ok(b, "--json", "brokers", "list"))
    by_id = {r["broker_id"]: r for r in brokers}
    assert set(by_id) == {broker_a, (b / "broker-id").read_text().strip()}
    assert [r["topics"] for r in brokers if r["me"]] == [1]
    text = ok(b, "brokers", "list").stdout.splitlines()
    assert text[0].split() == ["BROKER", "HOST", "HOME", "STARTED", "HEARTBEAT", "TOPICS", "ME"]
    mine = next(r for r in brokers if r["me"])
    row = next(line for line in text[1:] if line.startswith(mine["broker_id"]))
    # each command heartbeats: the times are shown as UTC times, not as milliseconds
    times = re.findall(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", row)
    assert len(times) == 2 and str(mine["heartbeat_ms"])[:6] not in row
    assert times[1] >= time_text(mine["heartbeat_ms"])


def test_a_metadata_url_that_is_not_postgresql_is_refused(tmp_path: Path) -> None:
    result = run(tmp_path, "--metadata", "mysql://db/x", "topics", "list")
    assert result.exit_code == 2 and "not a postgresql:// URL" in result.stderr
    (tmp_path / "offloader.toml").write_text('metadata = "sqlite:///x.db"\n')
    error = one_line_error(run(tmp_path, "namespaces", "create", NS))
    assert "not a postgresql:// URL" in error and "offloader.toml" in error
