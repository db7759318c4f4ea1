"""``offloader metadata rebuild`` through the CLI: a home deleted and rebuilt from its file
store, dry run, JSON lines, the refusal without --merge, --topics, a bucket that contradicts
itself, and the commands that must work on the rebuilt home."""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.cli.helpers import json_lines, ok, one_line_error, run

NS = "tenant/ns"
T1 = "persistent://tenant/ns/t1"
T2 = "persistent://tenant/ns/t2"
SMALL = ("--max-entries-per-ledger", "20", "--min-rollover-time", "0")


def populated(tmp_path: Path) -> tuple[Path, str, dict[str, str]]:
    """Two topics offloaded from ``home`` into a file store, then the home deleted."""
    home, store = tmp_path / "home", f"file://{tmp_path / 'objects'}"
    ok(home, "--store", store, "namespaces", "create", NS)
    reads = {}
    for topic in (T1, T2):
        ok(
            home,
            "--store",
            store,
            "topics",
            "produce",
            topic,
            "--synthetic",
            "50",
            "--size",
            "64",
            *SMALL,
        )
        ok(home, "--store", store, "topics", "offload-prefix", topic, "--size-threshold", "0")
        reads[topic] = ok(
            home, "--json", "--store", store, "topics", "read", topic, "--count", "40"
        ).stdout
    shutil.rmtree(home)
    return tmp_path / "new-home", store, reads


def test_rebuild_a_lost_home(tmp_path: Path) -> None:
    home, store, reads = populated(tmp_path)
    dry = ok(home, "--store", store, "metadata", "rebuild", "--dry-run")
    assert "would record 4 offloaded ledger(s) in 2 topic(s)" in dry.stdout
    assert "0 GET(s), 0 HEAD(s)" in dry.stdout
    assert ok(home, "--store", store, "topics", "list").stdout.strip() == ""
    done = ok(home, "--json", "--store", store, "metadata", "rebuild")
    lines = json_lines(done)
    summary = lines[-1]["summary"]
    assert summary["offload"] == 4 and summary["topic"] == 2 and summary["heads"] == 0
    offloads = [line for line in lines[:-1] if line["action"] == "offload"]
    assert [(o["topic"], o["ledger_id"], o["entries"]) for o in offloads] == [
        (T1, 0, 20),
        (T1, 1, 20),
        (T2, 3, 20),
        (T2, 4, 20),
    ]
    assert ok(home, "--store", store, "topics", "list").stdout.split() == [T1, T2]
    info = ok(home, "--json", "--store", store, "topics", "info", T1).stdout
    assert '"local_deleted": true' in info
    for topic, before in reads.items():
        assert (
            ok(home, "--json", "--store", store, "topics", "read", topic, "--count", "40").stdout
            == before
        )
    ok(home, "--store", store, "objects", "verify", "--verify-checksums")
    assert "No orphaned objects" in ok(home, "--store", store, "objects", "orphans").stdout
    # a second rebuild is refused: the store has records now
    error = one_line_error(run(home, "--store", store, "metadata", "rebuild"))
    assert "--merge" in error
    merged = json_lines(ok(home, "--json", "--store", store, "metadata", "rebuild", "--merge"))
    assert merged[-1]["summary"]["present"] == 4 and merged[-1]["summary"]["offload"] == 0


def test_topics_filter_and_a_bad_pattern(tmp_path: Path) -> None:
    home, store, _ = populated(tmp_path)
    result = ok(home, "--store", store, "metadata", "rebuild", "--topics", ".*/t2")
    assert "recorded 2 offloaded ledger(s) in 1 topic(s)" in result.stdout
    assert ok(home, "--store", store, "topics", "list").stdout.split() == [T2]
    error = one_line_error(
        run(home, "--store", store, "metadata", "rebuild", "--merge", "--topics", "(")
    )
    assert "not a regular expression" in error


def test_a_marker_without_its_data_exits_1(tmp_path: Path) -> None:
    home, store, _ = populated(tmp_path)
    root = tmp_path / "objects"
    data = sorted(p for p in root.iterdir() if p.name.endswith("-ledger-1"))
    assert len(data) == 1
    data[0].unlink()
    result = run(home, "--store", store, "metadata", "rebuild")
    assert result.exit_code == 1
    assert "marker without its objects" in result.stdout
    assert result.stderr.strip().splitlines()[-1].startswith("error: 1 problem(s)")
