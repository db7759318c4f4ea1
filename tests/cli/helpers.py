"""Helpers shared by the CLI tests: invoke ``offloader`` in-process and read its output."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner, Result

from cli.main import cli


def run(home: Path, *args: str, input: str | bytes | None = None) -> Result:
    """``offloader --home HOME ARGS...`` through click's CliRunner."""
    return CliRunner().invoke(cli, ["--home", str(home), *args], input=input)


def ok(home: Path, *args: str, input: str | bytes | None = None) -> Result:
    """Like :func:`run`, asserting exit code 0."""
    result = run(home, *args, input=input)
    assert result.exit_code == 0, (result.output, result.exception)
    return result


def json_lines(result: Result) -> list[dict[str, Any]]:
    """stdout as JSON lines."""
    return [json.loads(line) for line in result.stdout.splitlines() if line.strip()]


def one_line_error(result: Result) -> str:
    """Exit 1 with exactly one ``error: ...`` line on stderr and no traceback."""
    assert result.exit_code == 1, (result.output, result.exception)
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]
