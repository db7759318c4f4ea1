"""Logging defaults: the library used from a program that never configures logging prints
nothing below WARNING and nothing on stdout; an application's structlog configuration (our
CLI's ``--log-level``/``-v``/``--log-format``, or the program's own) is followed as it is.

Each case runs in a fresh interpreter: structlog's configuration is process-wide, and this test
process may have configured it already (every in-process CLI test does)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: offloads a small ledger to a file:// store and reads it back, logging left unconfigured
PROGRAM = """
import hashlib, sys
from offloader.config import OffloadSettings
from offloader.ledgers.base import InMemoryLedger
from offloader.logs import get_logger
from offloader.read.handle import ReadHandle
from offloader.store import open_store
from offloader.offload.writer import offload_ledger

{configure}
uuid = "0b5e6a52-52a4-4b5f-a9a4-1d8b2d7e0c11"
payloads = [bytes([i]) * (100 + i) for i in range(50)]
store = open_store(sys.argv[1])
settings = OffloadSettings(enforce_min_block_size=False, max_block_size=2048)
offload_ledger(InMemoryLedger(7, payloads), store, uuid, settings)
with ReadHandle.open(store, 7, uuid, settings=settings) as handle:
    read = [payload for _, payload in handle.iter_entries(0, handle.last_add_confirmed)]
assert read == payloads
get_logger("user.program").warning("probe warning", answer=42)
print("read", len(read), hashlib.sha256(b"".join(read)).hexdigest()[:16])
"""


def _env() -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for name in ("OFFLOADER_HOME", "OFFLOADER_STORE", "AWS_ENDPOINT_URL"):
        env.pop(name, None)
    return env


def _run_program(tmp_path: Path, configure: str = "") -> subprocess.CompletedProcess[str]:
    script = tmp_path / "program.py"
    script.write_text(PROGRAM.format(configure=textwrap.dedent(configure)))
    store = f"file://{tmp_path / 'objects'}"
    return subprocess.run(
        [sys.executable, str(script), store],
        cwd=tmp_path,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_unconfigured_library_logs_warnings_only_and_only_on_stderr(tmp_path: Path) -> None:
    result = _run_program(tmp_path)
    assert result.returncode == 0, result.stderr
    # stdout is the program's own output, nothing else
    assert result.stdout.splitlines() == [f"read 50 {_digest()}"]
    # no debug or info line anywhere (the read handle logs "read handle opened" at debug, the
    # writer "offload start" at info); the warning is on stderr, as a key=value line
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert "level=warning" in lines[0] and 'event="probe warning"' in lines[0]
    assert "logger_name=user.program" in lines[0] and "answer=42" in lines[0]
    assert "debug" not in result.stderr and "read handle opened" not in result.stderr


def test_an_application_configuration_is_followed_not_replaced(tmp_path: Path) -> None:
    configure = """
    import logging, structlog
    structlog.configure(
        processors=[structlog.processors.add_log_level, structlog.processors.JSONRenderer()],
        wrapper_class=structlog.make_filtering_bound_logger(logging.DEBUG),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
    )
    """
    result = _run_program(tmp_path, configure)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [f"read 50 {_digest()}"]
    records = [json.loads(line) for line in result.stderr.splitlines()]
    events = {(r["level"], r["event"], r.get("logger_name")) for r in records}
    assert ("debug", "read handle opened", "offloader.read.handle") in events
    assert ("warning", "probe warning", "user.program") in events


def _offloader(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [sys.executable, "-m", "cli.main", "--home", str(home), *args],
        cwd=home.parent,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, (args, result.stdout, result.stderr)
    return result


def test_cli_debug_logging_goes_to_stderr(tmp_path: Path) -> None:
    home = tmp_path / "home"
    _offloader(home, "namespaces", "create", "public/default")
    small = ("--max-entries-per-ledger", "100", "--min-rollover-time", "0")
    _offloader(home, "topics", "produce", "t", "--synthetic", "300", "--size", "100", *small)
    _offloader(home, "topics", "offload-prefix", "t", "--position", "2:0")

    quiet = _offloader(home, "topics", "read", "t", "--count", "1")
    assert quiet.stderr == ""

    text = _offloader(home, "-vv", "topics", "read", "t", "--count", "1")
    assert [line.split()[0] for line in text.stdout.splitlines()] == ["POSITION", "0:0"]
    opened = [line for line in text.stderr.splitlines() if "read handle opened" in line]
    assert opened and "level=debug" in opened[0], text.stderr
    assert "logger_name=offloader.read.handle" in opened[0]

    as_json = _offloader(home, "-vv", "--log-format", "json", "topics", "read", "t", "-n", "1")
    records = [json.loads(line) for line in as_json.stderr.splitlines()]
    assert {"level": "debug", "event": "read handle opened"}.items() <= records[0].items()
    assert "read handle opened" not in as_json.stdout


def _digest() -> str:
    import hashlib

    payloads = [bytes([i]) * (100 + i) for i in range(50)]
    return hashlib.sha256(b"".join(payloads)).hexdigest()[:16]
