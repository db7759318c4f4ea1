"""Issue 21 item 17: a failing command prints its one ``error:`` line and no log warnings on
top; with ``-v`` the warnings come live; repeated lines are aggregated."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest

from cli.logsink import MAX_REPEATS, LogSink
from tests.cli.helpers import ok, one_line_error, run


def _corrupt_first_ledger(home: Path) -> None:
    ok(home, "namespaces", "create", "public/default")
    ok(
        home,
        "topics", "produce", "t", "--synthetic", "100", "--size", "1K",
        "--max-entries-per-ledger", "50", "--min-rollover-time", "0",
    )  # fmt: skip
    path = home / "ledgers" / "public" / "default" / "t" / "0.log"
    data = bytearray(path.read_bytes())
    data[500] ^= 1
    path.write_bytes(bytes(data))


def test_a_failed_offload_prints_one_error_line(tmp_path: Path) -> None:
    _corrupt_first_ledger(tmp_path)
    line = one_line_error(run(tmp_path, "topics", "offload-prefix", "t", "-s", "0"))
    assert "offload of ledger 0 failed" in line


def test_with_v_the_warnings_come_too(tmp_path: Path) -> None:
    _corrupt_first_ledger(tmp_path)
    result = run(tmp_path, "-v", "topics", "offload-prefix", "t", "-s", "0")
    assert result.exit_code == 1
    assert 'event="offload failed"' in result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith("error: ")


def test_held_lines_are_released_on_success_and_repeats_counted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    sink = LogSink(live=False)
    for n in range(10):
        sink.write(f'level=warning event="re-seek" n={n}\n')
    sink.write('level=warning event="other"\n')
    assert err.getvalue() == ""  # held while the command runs
    sink.release()
    lines = err.getvalue().splitlines()
    assert len(lines) == MAX_REPEATS + 2
    assert lines[-1] == '(log event "re-seek" repeated 7 more time(s), not shown)'


def test_held_lines_are_dropped_on_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    sink = LogSink(live=False)
    sink.write('level=warning event="offload failed"\n')
    sink.discard()
    sink.release()
    assert err.getvalue() == ""
