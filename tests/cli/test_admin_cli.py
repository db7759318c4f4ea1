"""The CLI's shared parts and admin commands: settings, parsing, rendering, help, exit codes,
``objects verify | orphans | gc`` and ``service run`` (file store, through CliRunner)."""

from __future__ import annotations

import io
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from cli.config_file import load_file_config
from cli.context import CliContext
from cli.main import cli
from cli.render import Progress, progress_enabled, table
from cli.service import StopFlag, stop_on_signals
from cli.settings import resolve_settings
from offloader.errors import ConfigError
from tests.cli.helpers import json_lines, ok, run

NS = "tenant/ns"
TOPIC = "persistent://tenant/ns/t1"
#: small ledgers and blocks so that a few hundred entries make several multi-block ledgers
SMALL = ("--max-entries-per-ledger", "50", "--min-rollover-time", "0", "--max-block-size", "4K")
BLOCKS = ("--max-block-size", "4K")  # the offload options of the commands that only offload


def one_line_error(result: Result, code: int = 1) -> str:
    assert result.exit_code == code, (result.output, result.exception)
    lines = result.stderr.strip().splitlines()
    assert "Traceback" not in result.stderr
    return lines[-1]


@pytest.fixture()
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


@pytest.fixture()
def offloaded(home: Path) -> Path:
    """A home with TOPIC: 6 ledgers of 50 entries, the first ones offloaded."""
    ok(home, "namespaces", "create", NS)
    ok(home, "topics", "produce", TOPIC, "--synthetic", "300", "--size", "100", *SMALL)
    ok(home, "topics", "offload-prefix", TOPIC, "--size-threshold", "10K", *BLOCKS)
    return home


# --- usage errors (exit 2): nothing reaches the engine -------------------------------------
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("topics", "offload-prefix", TOPIC, "--size-threshold", "10X"), "invalid size"),
        (("topics", "offload-prefix", TOPIC, "--size-threshold", "ten"), "invalid size"),
        (("topics", "offload-prefix", TOPIC), "exactly one of"),
        (("topics", "offload-prefix", TOPIC, "-s", "1M", "-m", "1:0"), "exactly one of"),
        (("topics", "read", TOPIC, "--from", "7"), "invalid position"),
        (("topics", "produce", TOPIC, "--synthetic", "3", "--size", "1Q"), "invalid size"),
        (("namespaces", "set-offload-threshold", NS, "--size", "lots"), "invalid size"),
        (("namespaces", "set-offload-threshold", NS, "-s", "1M", "-t", "1month"), "invalid time"),
        (("namespaces", "set-offload-deletion-lag", NS, "--lag", "4 hours"), "invalid time"),
        (("namespaces", "set-offload-deletion-lag", NS), "Missing option"),
        (("namespaces", "set-retention", NS), "give --size, --time or both"),
        (("service", "run", "--interval", "5x"), "invalid time"),
        (("objects", "gc", "--min-age", "1 hour"), "invalid time"),
        (("topics", "produce", TOPIC, "--max-block-size", "big"), "invalid size"),
        (("service", "run", "--interval", "0"), "below the minimum of 1s"),
        (("topics", "produce", TOPIC, "--size", "4K"), "--size only applies to --synthetic"),
        (("namespaces", "set-retention", NS, "-t", "99999999999999999999w"), "too large"),
        (
            ("namespaces", "set-offload-threshold", NS, "-s", "99999999999999999999999T"),
            "too large",
        ),
    ],
)
def test_usage_errors_exit_2(home: Path, args: tuple[str, ...], message: str) -> None:
    result = run(home, *args)
    assert result.exit_code == 2, result.output
    assert message in result.stderr
    assert not home.exists() or not any(home.iterdir())  # nothing was created


def test_produce_file_and_synthetic_together_is_a_usage_error(home: Path, tmp_path: Path) -> None:
    data = tmp_path / "lines.txt"
    data.write_text("a\n")
    result = run(home, "topics", "produce", TOPIC, "--file", str(data), "--synthetic", "2")
    assert result.exit_code == 2 and "not both" in result.stderr


def test_s3_block_size_below_5m_is_a_usage_error(home: Path) -> None:
    result = run(
        home, "--store", "s3://bkt", "topics", "produce", TOPIC, "--synthetic", "1",
        "--max-block-size", "1M",
    )  # fmt: skip
    assert result.exit_code == 2
    assert "5M" in result.stderr and "--max-block-size" in result.stderr


@pytest.mark.parametrize(
    "path",
    [
        ("topics",),
        ("topics", "produce"),
        ("topics", "list"),
        ("topics", "info"),
        ("topics", "offload-prefix"),
        ("topics", "offload-status"),
        ("topics", "read"),
        ("topics", "delete"),
        ("namespaces",),
        ("namespaces", "create"),
        ("namespaces", "list"),
        ("namespaces", "set-offload-threshold"),
        ("namespaces", "get-offload-threshold"),
        ("namespaces", "set-offload-deletion-lag"),
        ("namespaces", "get-offload-deletion-lag"),
        ("namespaces", "clear-offload-deletion-lag"),
        ("namespaces", "set-retention"),
        ("namespaces", "get-retention"),
        ("namespaces", "set-offloaded-read-priority"),
        ("namespaces", "get-policies"),
        ("objects", "verify"),
        ("objects", "orphans"),
        ("objects", "gc"),
        ("service",),
        ("service", "run"),
    ],
)
def test_every_help_has_an_example(path: tuple[str, ...]) -> None:
    result = CliRunner().invoke(cli, [*path, "--help"])
    assert result.exit_code == 0
    assert "Example" in result.output
    assert "  offloader " in result.output  # the example block kept its line breaks


# --- settings: offloader.toml and options --------------------------------------------------
def test_file_config_defaults_when_absent(tmp_path: Path) -> None:
    config = load_file_config(tmp_path)
    assert config.store is None and config.broker.max_entries_per_ledger == 50_000
    assert config.broker.offload.max_block_size == 64 * 1024 * 1024
    assert config.broker.max_ledger_size == 2 * 1024**3


def test_file_config_values_and_option_precedence(tmp_path: Path) -> None:
    (tmp_path / "offloader.toml").write_text(
        'store = "s3://bucket/prefix"\n'
        'endpoint_url = "http://127.0.0.1:9000"\n'
        "[broker]\n"
        "max_entries_per_ledger = 1000\n"
        'max_ledger_size = "1G"\n'
        'max_block_size = "8M"\n'
        'read_buffer_size = "2M"\n'
        "offload_concurrency = 2\n"
        'min_rollover_time = "1m"\n'
        'offload_deletion_lag = "1h"\n'
        'orphan_min_age = "30m"\n'
    )
    resolved = resolve_settings(CliContext(home=tmp_path))
    assert resolved.store_url == "s3://bucket/prefix"
    assert resolved.endpoint_url == "http://127.0.0.1:9000"
    broker = resolved.broker
    assert broker.max_entries_per_ledger == 1000 and broker.max_ledger_size == 1024**3
    assert broker.offload.max_block_size == 8 * 1024**2
    assert broker.offload.read_buffer_size == 2 * 1024**2
    assert broker.offload.offload_concurrency == 2
    assert broker.min_rollover_seconds == 60 and broker.default_deletion_lag_ms == 3_600_000
    assert broker.orphan_min_age_seconds == 1800
    assert broker.offload.enforce_min_block_size  # an s3:// store
    # options (and --store / --endpoint-url) win over the file
    resolved = resolve_settings(
        CliContext(home=tmp_path, store_url="s3://other", endpoint_url="http://e"),
        {"max_entries_per_ledger": 7, "max_block_size": 6 * 1024**2, "read_buffer_size": None},
    )
    assert resolved.store_url == "s3://other" and resolved.endpoint_url == "http://e"
    assert resolved.broker.max_entries_per_ledger == 7
    assert resolved.broker.offload.max_block_size == 6 * 1024**2
    assert resolved.broker.offload.read_buffer_size == 2 * 1024**2


def test_file_store_allows_small_blocks(tmp_path: Path) -> None:
    resolved = resolve_settings(CliContext(home=tmp_path), {"max_block_size": 4096})
    assert resolved.store_url.startswith("file://")
    assert resolved.broker.offload.max_block_size == 4096
    assert not resolved.broker.offload.enforce_min_block_size


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("colour = 'blue'\n", "unknown key(s) colour"),
        (
            "[broker]\nmax_blocksize = '5M'\n",
            "unknown [broker] key(s) max_blocksize (did you mean 'max_block_size'?)",
        ),
        ("endpoint = 'http://x'\n", "unknown key(s) endpoint (did you mean 'endpoint_url'?)"),
        ("[kafka]\nlogdirs = []\n", "unknown [kafka] key(s) logdirs (did you mean 'log_dirs'?)"),
        ("[broker]\nmax_block_size = 'huge'\n", "invalid size"),
        ("[broker]\nmax_entries_per_ledger = 0\n", "positive integer"),
        ("[broker]\nfsync = 'sometimes'\n", "fsync must be one of"),
        ("store = 3\n", "store must be a string"),
        ("store = \n", "not valid TOML"),
        ('store = "s3://b"\n[broker]\nmax_block_size = "1M"\n', "5M"),
    ],
)
def test_bad_file_config(tmp_path: Path, text: str, message: str) -> None:
    (tmp_path / "offloader.toml").write_text(text)
    with pytest.raises(ConfigError) as info:
        resolve_settings(CliContext(home=tmp_path))
    assert message in str(info.value)


def test_bad_file_config_is_an_operational_error(home: Path) -> None:
    home.mkdir()
    (home / "offloader.toml").write_text("[broker]\nmax_block_size = 'huge'\n")
    line = one_line_error(run(home, "topics", "list"))
    assert line.startswith("error: ") and "offloader.toml" in line


# --- rendering -----------------------------------------------------------------------------
def test_sizes_and_times_must_fit_in_64_bits() -> None:
    from offloader.units import (
        MAX_DURATION_SECONDS,
        MAX_SIZE_BYTES,
        parse_duration_seconds,
        parse_size,
    )

    assert parse_size(str(2**63 - 1)) == MAX_SIZE_BYTES == 2**63 - 1
    assert parse_size("8388607T") == 8388607 * 1024**4
    assert parse_duration_seconds(str(MAX_DURATION_SECONDS)) == (2**63 - 1) // 1000
    for text in (str(2**63), "8388608T", "99999999999999999999999T", "9" * 5000):
        with pytest.raises(ConfigError, match="too large"):
            parse_size(text)
    with pytest.raises(ConfigError, match="too large"):
        parse_size(2**63)
    with pytest.raises(ConfigError, match="must not be negative"):
        parse_size("-" + "9" * 5000)
    for text in ("99999999999999999999w", str(MAX_DURATION_SECONDS + 1), "9" * 5000 + "y"):
        with pytest.raises(ConfigError, match="too large"):
            parse_duration_seconds(text, allow_negative=True)


def test_plural_and_safe_bytes() -> None:
    from cli.render import plural, safe_bytes

    assert [plural(n, "entry", "entries") for n in (0, 1, 2)] == [
        "0 entries",
        "1 entry",
        "2 entries",
    ]
    assert plural(1, "block") == "1 block" and plural(3, "block") == "3 blocks"
    assert safe_bytes(b"hello world") == "hello world"
    assert safe_bytes(b"a\nb\r\t\\\x1b\x7f\xff") == "a\\nb\\r\\t\\\\\\x1b\\x7f\\xff"
    assert safe_bytes(b"abcdef", 4) == "abcd... [+2 bytes]"
    assert safe_bytes(b"abcde", 4) == "abcd... [+1 byte]"
    assert safe_bytes(b"abcd", 4) == "abcd"


def test_table_aligns_columns() -> None:
    lines = table(("NAME", "SIZE", "OK"), [("a", 5, True), ("long-name", 12345, None)])
    assert lines == [
        "NAME        SIZE  OK",
        "a              5  yes",
        "long-name  12345  -",
    ]


def test_progress_renders_bytes_rate_and_eta() -> None:
    stream = io.StringIO()
    progress = Progress("offload", enabled=True, delay=0.0, stream=stream)
    progress.started -= 2.0  # two seconds in
    progress(1024 * 1024, 4 * 1024 * 1024)
    line = progress.render()
    assert line.startswith("offload [######")
    assert "1.0 MiB/4.0 MiB" in line and "/s" in line and "ETA 0:0" in line
    progress.finish()
    assert stream.getvalue().startswith("\roffload [") and stream.getvalue().endswith("\n")


def test_progress_is_silent_when_disabled_or_early() -> None:
    stream = io.StringIO()
    with Progress("read", enabled=False, stream=stream) as progress:
        progress(10, 100)
    with Progress("read", enabled=True, delay=60.0, stream=stream) as progress:
        progress(10, 100)
    assert stream.getvalue() == ""


def test_progress_only_for_terminals_without_json() -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    assert progress_enabled(CliContext(), Tty())
    assert not progress_enabled(CliContext(json=True), Tty())
    assert not progress_enabled(CliContext(), io.StringIO())


# --- service signal handling ---------------------------------------------------------------
def test_stop_on_signals_sets_the_flag_and_restores_handlers() -> None:
    before = signal.getsignal(signal.SIGTERM)
    with stop_on_signals(StopFlag()) as flag:
        assert not flag()
        os.kill(os.getpid(), signal.SIGTERM)
        deadline = time.monotonic() + 5
        while not flag() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert flag() and flag.signal_name == "SIGTERM"
    assert signal.getsignal(signal.SIGTERM) == before


def test_stop_flag_outside_the_main_thread_installs_nothing() -> None:
    seen: list[bool] = []

    def body() -> None:
        with stop_on_signals(StopFlag()) as flag:
            seen.append(flag())

    thread = threading.Thread(target=body)
    thread.start()
    thread.join()
    assert seen == [False]


# --- objects verify / orphans / gc (real engine, file store) --------------------------------
def _store(home: Path) -> Any:
    from offloader.store import open_store

    return open_store(f"file://{(home / 'objects').resolve()}")


def _offloaded_ids(home: Path) -> list[int]:
    record = json_lines(ok(home, "--json", "topics", "info", TOPIC))[0]
    return [ledger["ledger_id"] for ledger in record["ledgers"] if ledger["offloaded"]]


def test_verify_text_and_json(offloaded: Path) -> None:
    ids = _offloaded_ids(offloaded)
    assert ids
    lines = ok(offloaded, "objects", "verify").stdout.splitlines()
    assert lines[0].split() == ["TOPIC", "LEDGER", "UUID", "DATA", "INDEX", "CHECKSUMS", "RESULT"]
    assert len(lines) == 1 + len(ids) + 1
    assert all(line.split()[-1] == "ok" for line in lines[1:-1])
    assert lines[-1] == f"{len(ids)} offloaded ledger(s) verified, all ok"
    records = json_lines(ok(offloaded, "--json", "objects", "verify", TOPIC, "--verify-checksums"))
    assert [r["ledger_id"] for r in records] == ids
    assert all(r["ok"] and r["checked_checksums"] and r["problem"] is None for r in records)
    assert set(records[0]) == {
        "topic", "ledger_id", "uuid", "ok", "data_size", "index_size", "checked_checksums",
        "problem",
    }  # fmt: skip
    one = json_lines(ok(offloaded, "--json", "objects", "verify", "--ledger", str(ids[0])))
    assert [r["ledger_id"] for r in one] == [ids[0]]


@pytest.mark.parametrize("json_flag", [(), ("--json",)])
def test_verify_a_ledger_that_does_not_exist(offloaded: Path, json_flag: tuple[str, ...]) -> None:
    result = run(offloaded, *json_flag, "objects", "verify", "--ledger", "99")
    assert one_line_error(result) == "error: ledger 99 not found in any topic"
    assert result.stdout == ""
    result = run(offloaded, *json_flag, "objects", "verify", TOPIC, "--ledger", "99")
    assert one_line_error(result) == f"error: ledger 99 not found in {TOPIC}"
    assert result.stdout == ""


@pytest.mark.parametrize("json_flag", [(), ("--json",)])
def test_verify_a_ledger_that_is_not_offloaded(offloaded: Path, json_flag: tuple[str, ...]) -> None:
    record = json_lines(ok(offloaded, "--json", "topics", "info", TOPIC))[0]
    last = record["ledgers"][-1]
    assert not last["offloaded"]
    for topic in ((), (TOPIC,)):
        result = run(
            offloaded, *json_flag, "objects", "verify", *topic, "--ledger", str(last["ledger_id"])
        )
        assert one_line_error(result) == (
            f"error: ledger {last['ledger_id']} of {TOPIC} is not offloaded "
            f"(state {last['state']}): nothing to verify"
        )
        assert result.stdout == ""


def test_verify_detects_a_corrupt_block(offloaded: Path) -> None:
    ledger_id = _offloaded_ids(offloaded)[0]
    store = _store(offloaded)
    key = next(o.key for o in store.list() if o.key.endswith(f"-ledger-{ledger_id}"))
    head = store.head(key)
    data = bytearray(store.get(key).data)
    data[200] ^= 0xFF  # inside the first block's entries
    store.put(key, bytes(data), head.metadata)
    store.close()
    result = run(offloaded, "objects", "verify", "--verify-checksums")
    line = one_line_error(result)
    assert f"ledger {ledger_id}" in line and "failed verification" in line
    assert result.stdout.count(" ok") < result.stdout.count("\n")


def test_verify_progress_on_a_terminal(offloaded: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("cli.objects.admin.progress_enabled", lambda cli: True)
    monkeypatch.setattr(Progress, "DELAY", 0.0)
    result = ok(offloaded, "objects", "verify", "--verify-checksums")
    assert result.stdout.splitlines()[-1].endswith("all ok")


def test_orphans_clean_and_gc(offloaded: Path) -> None:
    clean = "No orphaned objects, unfinished uploads or missing objects\n"
    assert ok(offloaded, "objects", "orphans", "--min-age", "0").stdout == clean
    report = json_lines(ok(offloaded, "--json", "objects", "orphans", "--min-age", "0"))[0]
    assert report == {
        "clean": True, "removed": False, "dry_run": False, "objects": [], "uploads": [],
        "missing": [],
    }  # fmt: skip
    store = _store(offloaded)
    store.put("stray-object", b"x" * 10, {})
    upload_key = "00000000-0000-0000-0000-000000000000-ledger-999"
    store.create_multipart_upload(upload_key, {})
    store.close()
    text = ok(offloaded, "objects", "orphans", "--min-age", "0").stdout
    assert "stray-object" in text and upload_key in text
    assert "1 orphaned object(s) (10 B), 1 unfinished upload(s), 0 missing object(s)" in text
    # younger than the default minimum age (1h): not reported yet
    assert ok(offloaded, "objects", "orphans").stdout == clean
    dry = json_lines(ok(offloaded, "--json", "objects", "gc", "--dry-run", "--min-age", "0"))[0]
    assert dry["dry_run"] is True and dry["removed"] is False
    assert [o["key"] for o in dry["objects"]] == ["stray-object"]
    assert dry["objects"][0]["size"] == 10 and dry["objects"][0]["reason"]
    assert [u["key"] for u in dry["uploads"]] == [upload_key]
    # neither was written by this installation (issue 21, item 7): reported, left alone
    assert dry["objects"][0]["reason"] == "not-an-offload-key"
    assert dry["uploads"][0]["reason"] == "foreign-upload"
    assert not dry["objects"][0]["deletable"] and not dry["uploads"][0]["deletable"]
    text = ok(offloaded, "objects", "gc", "--dry-run", "--min-age", "0").stdout
    assert "Would remove 0 object(s) (0 B) and abort 0 upload(s); left 2 " in text
    text = ok(offloaded, "objects", "gc", "--min-age", "0").stdout
    assert "Removed 0 object(s) (0 B) and aborted 0 upload(s); left 2 " in text
    assert "stray-object" in ok(offloaded, "objects", "orphans", "--min-age", "0").stdout
    ok(offloaded, "objects", "verify", "--verify-checksums")  # the claimed objects stayed


def test_orphans_reports_missing_objects(offloaded: Path) -> None:
    ledger_id = _offloaded_ids(offloaded)[0]
    store = _store(offloaded)
    key = next(o.key for o in store.list() if o.key.endswith(f"-ledger-{ledger_id}-index"))
    store.delete(key)
    store.close()
    # missing claimed objects are data loss: reported, and exit 1 (like objects verify)
    result = run(offloaded, "--json", "objects", "orphans", "--min-age", "0")
    assert "1 claimed object missing from the store" in one_line_error(result)
    report = json_lines(result)[0]
    assert report["clean"] is False
    assert [(m["ledger_id"], m["key"]) for m in report["missing"]] == [(ledger_id, key)]
    result = run(offloaded, "objects", "orphans", "--min-age", "0")
    assert key in one_line_error(result) and "MISSING OBJECT" in result.stdout
    result = run(offloaded, "objects", "gc", "--min-age", "0")
    assert "offloaded data is lost" in one_line_error(result)
    assert "1 claimed object(s) are missing" in result.stdout
    result = run(offloaded, "--json", "objects", "gc", "--dry-run", "--min-age", "0")
    assert one_line_error(result) and json_lines(result)[0]["missing"]


# --- service run ---------------------------------------------------------------------------
def test_service_once_deletes_local_copies_after_lag(offloaded: Path) -> None:
    ok(offloaded, "namespaces", "set-offload-deletion-lag", NS, "--lag", "0")
    time.sleep(0.01)
    result = ok(offloaded, "service", "run", "--once")
    assert result.stdout.startswith("rolled over: ")
    assert "local copies deleted: " in result.stdout
    record = json_lines(ok(offloaded, "--json", "topics", "info", TOPIC))[0]
    offloaded_ledgers = [ledger for ledger in record["ledgers"] if ledger["offloaded"]]
    assert offloaded_ledgers and all(ledger["local_deleted"] for ledger in offloaded_ledgers)
    entries = json_lines(ok(offloaded, "--json", "topics", "read", TOPIC))
    assert len(entries) == 300  # still readable, from S3
    tick = json_lines(ok(offloaded, "--json", "service", "run", "--once"))[0]
    assert set(tick) == {
        "rolled_over", "offloaded", "offload_failures", "local_deleted", "trimmed",
        "orphans_removed", "verification_failures", "errors", "kafka_uploaded",
        "kafka_deleted",
    }  # fmt: skip
    assert tick["local_deleted"] == []


def test_service_auto_offload_by_threshold(home: Path) -> None:
    ok(home, "namespaces", "create", NS)
    ok(home, "topics", "produce", TOPIC, "--synthetic", "300", "--size", "100", *SMALL)
    ok(home, "namespaces", "set-offload-threshold", NS, "--size", "5K")
    tick = json_lines(ok(home, "--json", "service", "run", "--once", *SMALL))[0]
    assert tick["offloaded"], tick
    assert _offloaded_ids(home) == tick["offloaded"]


def test_service_stops_on_sigterm(home: Path) -> None:
    ok(home, "namespaces", "create", NS)
    timer = threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGTERM))
    started = time.monotonic()
    timer.start()
    try:
        result = run(home, "service", "run", "--interval", "1s")
    finally:
        timer.cancel()
    assert result.exit_code == 0, result.output
    assert time.monotonic() - started < 10


def test_unreachable_store_fails_fast_with_one_line(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "x")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "y")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    ok(home, "namespaces", "create", "public/default")  # a home (a missing one is refused)
    started = time.monotonic()
    result = run(
        home, "--store", "s3://bkt", "--endpoint-url", "http://127.0.0.1:1",
        "objects", "orphans", "--min-age", "0",
    )  # fmt: skip
    line = one_line_error(result)
    assert "127.0.0.1:1" in line or "unavailable" in line.lower() or "connect" in line.lower()
    assert time.monotonic() - started < 20


def test_invalid_endpoint_url_is_one_line(home: Path) -> None:
    for endpoint in ("not-a-url", "ftp://host", "http://"):
        result = run(
            home, "--store", "s3://mybucket", "--endpoint-url", endpoint, "objects", "orphans"
        )
        line = one_line_error(result)
        assert line.startswith(f"error: invalid S3 endpoint URL {endpoint!r}")


def test_service_text_reports_problems() -> None:
    from cli.service import tick_text
    from offloader.api import TickReport

    text = tick_text(
        TickReport(
            offloaded=(3,), offload_failures=((4, "timeout"),),
            verification_failures=((5, "crc mismatch"),), errors=("t1: boom",),
        )
    )  # fmt: skip
    assert text.splitlines() == [
        "rolled over: none; offloaded: 3; local copies deleted: none; trimmed: none; "
        "orphans removed: 0",
        "  offload of ledger 4 failed: timeout",
        "  ledger 5 kept locally, its objects failed verification: crc mismatch",
        "  error: t1: boom",
    ]
