"""README's quickstart runs as written: every ``$ offloader ...`` line of the fenced block
marked ```` ```console title="quickstart" ```` (quotes optional) is run (in-process, through
click's CliRunner) in a fresh directory, so the default home ``./.offloader`` and the default
file store are used.

The lines after a command are its expected output, compared line by line; a line ``...``
stands for any number of lines (UUIDs, timestamps, tables that vary). The documentation site
includes the same block (between the README's ``--8<--`` section markers) in its getting-started
page; the guides' own examples run the same way in ``tests/docs/test_doc_examples.py``."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from click.testing import CliRunner

from cli.main import cli

README = Path(__file__).resolve().parents[1] / "README.md"
BLOCK = re.compile(r'^```console title="?quickstart"?\n(.*?)^```$', re.MULTILINE | re.DOTALL)


def quickstart() -> list[tuple[str, list[str]]]:
    """``(command line, expected output lines)`` pairs, in order."""
    match = BLOCK.search(README.read_text())
    assert match, "README.md has no ```console title=quickstart block"
    steps: list[tuple[str, list[str]]] = []
    for line in match.group(1).splitlines():
        if line.startswith("$ "):
            steps.append((line[2:], []))
        elif steps:
            steps[-1][1].append(line.rstrip())
    return steps


def matches(expected: list[str], actual: list[str]) -> bool:
    """Line-by-line equality where an ``...`` line matches any run of lines."""
    if not expected:
        return not actual
    head, rest = expected[0], expected[1:]
    if head == "...":
        return any(matches(rest, actual[i:]) for i in range(len(actual) + 1))
    return bool(actual) and actual[0] == head and matches(rest, actual[1:])


def test_readme_quickstart_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    for name in ("OFFLOADER_HOME", "OFFLOADER_STORE", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(name, raising=False)
    steps = quickstart()
    assert len(steps) >= 8
    for command, expected in steps:
        argv = shlex.split(command)
        assert argv[0] == "offloader", command
        result = CliRunner().invoke(cli, argv[1:])
        assert result.exit_code == 0, (command, result.output, result.exception)
        actual = [line.rstrip() for line in result.stdout.splitlines()]
        assert matches(expected, actual), (command, expected, actual)


def test_matches_wildcards() -> None:
    assert matches(["a", "...", "d"], ["a", "b", "c", "d"])
    assert matches(["..."], [])
    assert not matches(["a"], ["a", "b"])
