"""Issue 21 item 20 (service): ``service run --once`` exits 1 when a step of its pass failed
(cron needs a non-zero exit), after printing the pass's report; a clean pass exits 0."""

from __future__ import annotations

from pathlib import Path

from tests.cli.helpers import json_lines, ok, run


def _topic(home: Path) -> None:
    ok(home, "namespaces", "create", "public/default")
    ok(
        home,
        "topics", "produce", "t", "--synthetic", "100", "--size", "1K",
        "--max-entries-per-ledger", "50", "--min-rollover-time", "0",
    )  # fmt: skip
    ok(home, "namespaces", "set-offload-threshold", "public/default", "-s", "0")


def test_a_pass_whose_offload_failed_exits_1(tmp_path: Path) -> None:
    _topic(tmp_path)
    for ledger in (0, 1):  # every ledger the pass would offload is corrupt
        path = tmp_path / "ledgers" / "public" / "default" / "t" / f"{ledger}.log"
        data = bytearray(path.read_bytes())
        data[500] ^= 1
        path.write_bytes(bytes(data))
    result = run(tmp_path, "--json", "service", "run", "--once")
    assert result.exit_code == 1, (result.output, result.exception)
    (report,) = json_lines(result)
    assert [f["ledger_id"] for f in report["offload_failures"]] == [0, 1]
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("error: 2 step(s) of the service pass failed; first: offload")


def test_a_clean_pass_exits_0(tmp_path: Path) -> None:
    _topic(tmp_path)
    result = ok(tmp_path, "--json", "service", "run", "--once")
    assert json_lines(result)[0]["offloaded"] == [0, 1]
