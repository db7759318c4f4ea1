"""``offloader service run --metrics-addr 127.0.0.1:0`` in a subprocess against moto's S3
server: it prints the address it bound, the endpoint is scraped over HTTP while the service
offloads, and the counters and histograms move with the right labels. Bad addresses are usage
errors (exit 2) naming the option; a bad ``metrics_addr`` in offloader.toml names the file."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from devservers.endpoint import S3Endpoint
from tests.cli.helpers import ok, run
from tests.cli.test_console_script import offloader_command
from tests.metrics.scrape import Samples, scrape, value

NS = "public/default"
LABELS = {"namespace": NS, "topic": "persistent://public/default/t"}
P = "brk_ledgeroffloader_"


class Stderr:
    """The service's stderr, read on a thread (so the pipe never fills)."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.lines: list[str] = []
        assert proc.stderr is not None
        stream = proc.stderr
        self._thread = threading.Thread(target=lambda: self.lines.extend(stream), daemon=True)
        self._thread.start()

    def wait_for(self, pattern: str, timeout: float = 30) -> re.Match[str]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in list(self.lines):
                match = re.search(pattern, line)
                if match:
                    return match
            time.sleep(0.05)
        raise AssertionError(f"no {pattern!r} on stderr: {''.join(self.lines)}")


def scrape_until(url: str, name: str, at_least: float, timeout: float = 60) -> list[Samples]:
    """Every scrape until the sample ``name`` (for LABELS) reaches ``at_least``."""
    deadline = time.monotonic() + timeout
    scrapes = [scrape(url)]
    while value(scrapes[-1], name, **LABELS) < at_least:
        assert time.monotonic() < deadline, f"{name} stayed below {at_least}"
        time.sleep(0.05)
        scrapes.append(scrape(url))
    return scrapes


@pytest.mark.s3
def test_service_serves_metrics_while_it_offloads(
    tmp_path: Path, moto_endpoint: S3Endpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    bucket = moto_endpoint.new_bucket()
    env = {**moto_endpoint.env(), "OFFLOADER_STORE": f"s3://{bucket}/tiered"}
    for name, env_value in env.items():
        monkeypatch.setenv(name, env_value)
    home = tmp_path / "home"
    ok(home, "namespaces", "create", NS)
    ok(
        home,
        "topics", "produce", "t", "--synthetic", "100", "--size", "1K",
        "--max-entries-per-ledger", "50", "--min-rollover-time", "0",
    )  # fmt: skip
    ok(home, "namespaces", "set-offload-threshold", NS, "-s", "0")
    proc = subprocess.Popen(
        [
            *offloader_command(),
            *("--home", str(home), "service", "run"),
            *("--metrics-addr", "127.0.0.1:0", "--interval", "1s"),
        ],
        env={**os.environ, **env},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        stderr = Stderr(proc)
        url = stderr.wait_for(r"metrics: (http://127\.0\.0\.1:(\d+)/metrics)").group(1)
        assert not url.endswith(":0/metrics")
        # the first pass offloads ledgers 0 and 1 (50 entries of 1K each), one after the other
        scrapes = scrape_until(url, P + "offload_bytes_total", 2 * 50 * 1024)
        seen = [value(one, P + "offload_bytes_total", **LABELS) for one in scrapes]
        assert seen == sorted(seen) and set(seen) <= {0, 50 * 1024, 2 * 50 * 1024}
        s = scrapes[-1]
        assert value(s, P + "offload_bytes_total", **LABELS) == 2 * 50 * 1024
        assert value(s, P + "offload_error_total", **LABELS) == 0
        assert value(s, P + "read_ledger_latency_count", **LABELS) >= 2
        s3 = {"backend": "s3", "outcome": "success"}
        assert value(s, "offloader_store_requests_total", operation="upload_part", **s3) >= 2
        assert value(s, "offloader_store_requests_total", operation="put", **s3) >= 2
        seconds = "offloader_store_request_duration_seconds"
        parts = value(s, seconds + "_count", operation="upload_part", **s3)
        assert parts >= 2 and value(s, seconds + "_sum", operation="upload_part", **s3) > 0
        assert value(s, seconds + "_bucket", operation="upload_part", le="+Inf", **s3) == parts
        # the pass that offloaded ended (its lag and tick are recorded at its end)
        deadline = time.monotonic() + 30
        while value(s, "offloader_service_ticks_total", outcome="ok") < 1:
            assert time.monotonic() < deadline, "no pass recorded"
            time.sleep(0.2)
            s = scrape(url)
        assert value(s, "offloader_service_tick_duration_seconds_count") >= 1
        assert value(s, "offloader_service_last_tick_timestamp_seconds") > 0
        assert value(s, "offloader_offload_lag_ledgers", **LABELS) == 0
        assert ("offloader_offload_lag_bytes", frozenset(LABELS.items())) in s
        before = value(s, "offloader_service_ticks_total", outcome="ok")
        time.sleep(2.5)  # --interval 1s: more passes, counted
        assert value(scrape(url), "offloader_service_ticks_total", outcome="ok") > before
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=30)
    assert code == 0


def test_a_bad_metrics_addr_is_a_usage_error(tmp_path: Path) -> None:
    result = run(tmp_path, "service", "run", "--once", "--metrics-addr", "localhost")
    assert result.exit_code == 2, result.output
    assert "Invalid value for '--metrics-addr'" in result.stderr
    assert "has no port" in result.stderr and "Traceback" not in result.stderr
    result = run(tmp_path, "service", "run", "--once", "--metrics-addr", "127.0.0.1:99999")
    assert result.exit_code == 2 and "above 65535" in result.stderr


def test_a_port_in_use_is_a_usage_error_and_nothing_runs(tmp_path: Path) -> None:
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = run(tmp_path, "service", "run", "--once", "--metrics-addr", f"127.0.0.1:{port}")
    assert result.exit_code == 2, result.output
    assert f"cannot serve metrics on 127.0.0.1:{port}" in result.stderr
    assert not (tmp_path / "offloader.db").exists()  # refused before the home was opened


def test_metrics_addr_in_offloader_toml(tmp_path: Path) -> None:
    (tmp_path / "offloader.toml").write_text('metrics_addr = "127.0.0.1:port"\n')
    result = run(tmp_path, "service", "run", "--once")
    assert result.exit_code == 1, result.output
    assert str(tmp_path / "offloader.toml") in result.stderr
    assert "metrics_addr" in result.stderr and "not a number" in result.stderr
    (tmp_path / "offloader.toml").write_text('metrics_addr = "127.0.0.1:0"\n')
    result = run(tmp_path, "service", "run", "--once")
    assert result.exit_code == 0, result.output
    assert re.search(r"metrics: http://127\.0\.0\.1:[1-9]\d*/metrics", result.stderr)
