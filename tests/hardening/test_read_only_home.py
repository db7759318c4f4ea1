"""Issue 21 items 19 and 20 (the home): read-only commands work on a home that cannot be written
(a read-only filesystem: the metadata database is opened read-only), commands that write say
the home cannot be written, and a read-only command on a mistyped ``--home`` fails instead of
creating an empty home.

Root ignores permission bits, so as root the home is made read-only by a read-only bind mount
in a private mount namespace (``unshare -m``), the way a read-only filesystem looks; otherwise
by taking the write permission away. Either way the CLI runs in a subprocess."""

from __future__ import annotations

import os
import shlex
import shutil
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli.helpers import json_lines, ok, one_line_error, run

ROOT = os.geteuid() == 0


@pytest.fixture()
def home(tmp_path: Path) -> Iterator[Path]:
    home = tmp_path / "home"
    ok(home, "namespaces", "create", "public/default")
    ok(
        home,
        "topics", "produce", "t", "--synthetic", "300", "--size", "100",
        "--max-entries-per-ledger", "100", "--min-rollover-time", "0",
    )  # fmt: skip
    ok(home, "topics", "offload-prefix", "t", "-s", "0")
    yield home
    for path in [home, *home.rglob("*")]:  # give the permission back for the cleanup
        if path.is_dir():
            path.chmod(path.stat().st_mode | stat.S_IWUSR)


def run_read_only(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    cli = [sys.executable, "-m", "cli.main", "--home", str(home), *args]
    if ROOT:
        assert shutil.which("unshare"), "unshare (util-linux) is needed to test as root"
        script = (
            f"mount --bind -o ro {shlex.quote(str(home))} {shlex.quote(str(home))} && "
            f"exec {shlex.join(cli)}"
        )
        command = ["unshare", "-m", "--propagation", "private", "sh", "-c", script]
    else:
        for path in [home, *home.rglob("*")]:
            if path.is_dir():
                path.chmod(path.stat().st_mode & ~0o222)
        command = cli
    return subprocess.run(
        command, capture_output=True, text=True, timeout=60, cwd=Path(__file__).parents[2]
    )


@pytest.mark.parametrize(
    "args",
    [
        ("topics", "list"),
        ("--json", "topics", "info", "t"),
        ("--json", "topics", "read", "t", "-n", "150"),
        ("topics", "offload-status", "t"),
        ("namespaces", "get-policies", "public/default"),
        ("namespaces", "list"),
        ("objects", "verify", "--verify-checksums"),
    ],
)
def test_read_only_commands_work_on_a_read_only_home(home: Path, args: tuple[str, ...]) -> None:
    result = run_read_only(home, *args)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    if args[:3] == ("--json", "topics", "read"):
        assert len(result.stdout.splitlines()) == 150


@pytest.mark.parametrize(
    "args",
    [
        ("namespaces", "create", "public/other"),
        ("topics", "produce", "t", "--synthetic", "1"),
        ("namespaces", "set-offload-threshold", "public/default", "-s", "1M"),
    ],
)
def test_writing_commands_say_the_home_cannot_be_written(home: Path, args: tuple[str, ...]) -> None:
    result = run_read_only(home, *args)
    assert result.returncode == 1, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "cannot be written (a read-only filesystem, or no write permission)" in lines[0]


def test_a_read_only_command_on_a_mistyped_home_fails(tmp_path: Path) -> None:
    missing = tmp_path / "typo"
    for args in (("topics", "list"), ("objects", "orphans"), ("namespaces", "list")):
        line = one_line_error(run(missing, *args))
        assert "no offloader home at" in line and "typo" in line
    assert not missing.exists()
    # a command that writes makes the home; then the read-only ones work
    ok(missing, "namespaces", "create", "public/default")
    assert json_lines(ok(missing, "--json", "namespaces", "list")) != []
