"""``offloader kafka``: upload, status, read (offset, time, modes), retention, over moto (S3)
and a local store; exit codes and one-line errors."""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from cli.render import time_text
from devservers.endpoint import S3Endpoint
from tests.cli.helpers import json_lines, ok, one_line_error, run
from tests.kafka.logdir import PartitionLayout, record_value, write_partition


def _upload(home: Path, store: list[str], root: Path) -> list[dict[str, object]]:
    result = ok(
        home,
        *store,
        "--json",
        "kafka",
        "upload",
        "--log-dir",
        str(root),
        "--once",
        "--part-size",
        "5M",
    )
    return json_lines(result)


@pytest.mark.s3
def test_cli_upload_status_read_on_s3(
    tmp_path: Path, moto_endpoint: S3Endpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in moto_endpoint.env().items():
        monkeypatch.setenv(name, value)
    bucket = moto_endpoint.new_bucket()
    store = ["--store", f"s3://{bucket}/t", "--endpoint-url", moto_endpoint.url]
    root = tmp_path / "logs"
    layout: PartitionLayout = write_partition(root, "orders", 0, records=400)
    home = tmp_path / "home"
    lines = _upload(home, store, root)
    summary = lines[-1]
    assert summary["uploaded"] == len(layout.segments) - 1 and summary["corrupt"] == 0
    keys = [o["Key"] for o in moto_endpoint.client().list_objects_v2(Bucket=bucket)["Contents"]]
    assert any(
        k.startswith(f"t/kafka/orders-{layout.topic_id}/0/") and k.endswith(".log") for k in keys
    )

    status = json_lines(
        ok(home, *store, "--json", "kafka", "status", "orders", "--log-dir", str(root))
    )
    assert status[0]["watermark"] == layout.segments[-2][1]
    assert status[0]["upload_lag"] == 0 and status[0]["gaps"] == []
    text = ok(home, *store, "kafka", "status").stdout
    assert "orders-0" in text and "WATERMARK" in text

    rows = json_lines(
        ok(
            home,
            *store,
            "kafka",
            "read",
            "orders",
            "0",
            "--from-offset",
            "123",
            "--count",
            "3",
            "--json",
        )
    )
    assert [r["offset"] for r in rows] == [123, 124, 125]
    assert rows[0]["value"] == record_value("orders", 0, 123).decode()
    assert rows[0]["tier"] == "remote"
    raw = json_lines(
        ok(
            home,
            *store,
            "--json",
            "kafka",
            "read",
            "orders",
            "0",
            "--from-offset",
            "123",
            "--count",
            "1",
            "--payload",
        )
    )
    assert base64.b64decode(raw[0]["value"]) == record_value("orders", 0, 123)
    by_time = json_lines(
        ok(
            home,
            *store,
            "--json",
            "kafka",
            "read",
            "orders",
            "0",
            "--from-timestamp",
            str(rows[1]["timestamp"]),
            "--count",
            "1",
        )
    )
    assert by_time[0]["offset"] == 124
    # across the tiers with the log directory: the active segment comes from it
    last = layout.next_offset - 1
    both = json_lines(
        ok(
            home,
            *store,
            "--json",
            "kafka",
            "read",
            "orders",
            "0",
            "--from-offset",
            str(layout.segments[-1][0] - 2),
            "--log-dir",
            str(root),
            "--mode",
            "remote-preferred",
        )
    )
    assert [r["offset"] for r in both] == list(range(layout.segments[-1][0] - 2, last + 1))
    assert both[0]["tier"] == "remote" and both[-1]["tier"] == "local"
    # the same rows as text: a header, then offset, time, tier, key, value
    text = ok(
        home,
        *store,
        "kafka",
        "read",
        "orders",
        "0",
        "--from-offset",
        str(layout.segments[-1][0] - 2),
        "--log-dir",
        str(root),
        "--mode",
        "remote-preferred",
    ).stdout.splitlines()
    assert text[0].split() == ["OFFSET", "TIMESTAMP", "TIER", "KEY", "VALUE"]
    assert len(text) == len(both) + 1
    for line, row in zip(text[1:], both, strict=True):
        assert line.split()[:4] == [
            str(row["offset"]),
            time_text(row["timestamp"]),
            row["tier"],
            row["key"] or "-",
        ]


def test_cli_retention_and_errors(tmp_path: Path) -> None:
    root = tmp_path / "logs"
    layout = write_partition(root, "orders", 0, records=500)
    home = tmp_path / "home"
    _upload(home, [], root)
    assert json_lines(ok(home, "--json", "kafka", "get-retention", "orders"))[0] == {
        "topic": "orders",
        "retention_ms": -1,
        "retention_bytes": -1,
    }
    ok(home, "kafka", "set-retention", "orders", "--time", "-1", "--size", "1")
    deleted = json_lines(ok(home, "--json", "kafka", "apply-retention"))[0]["deleted"]
    # the size rule keeps the newest remote segment
    assert len(deleted) == len(layout.segments) - 2
    status = json_lines(ok(home, "--json", "kafka", "status", "orders"))[0]
    assert status["remote_start"] == layout.segments[-2][0]
    usage = run(home, "kafka", "read", "orders", "0")
    assert usage.exit_code == 2
    missing = one_line_error(run(home, "kafka", "read", "nope", "0", "--from-offset", "0"))
    assert "nope-0" in missing
    bad = one_line_error(run(home, "kafka", "upload", "--log-dir", str(tmp_path / "x"), "--once"))
    assert "does not exist" in bad
    # a corrupt segment: reported, exit code 1 after the report
    root2 = tmp_path / "logs2"
    layout2 = write_partition(root2, "other", 0, records=300)
    victim = layout2.path / f"{layout2.segments[0][0]:020d}.log"
    data = bytearray(victim.read_bytes())
    data[-1] ^= 1
    victim.write_bytes(bytes(data))
    result = run(home, "--json", "kafka", "upload", "--log-dir", str(root2), "--once")
    assert result.exit_code == 1
    assert json_lines(result)[0]["outcome"] == "corrupt"
    assert "could not be uploaded" in result.stderr


def test_service_run_uploads_kafka_log_dirs(tmp_path: Path) -> None:
    root = tmp_path / "logs"
    layout = write_partition(root, "orders", 0, records=300)
    home = tmp_path / "home"
    home.mkdir()
    (home / "offloader.toml").write_text(f'[kafka]\nlog_dirs = ["{root}"]\ntopics = "ord.*"\n')
    tick = json_lines(ok(home, "--json", "service", "run", "--once"))[0]
    assert tick["kafka_uploaded"] == [f"orders-0@{b}" for b, _ in layout.segments[:-1]]
    assert tick["errors"] == []
    # the option names other directories (and wins over the file)
    other = tmp_path / "other"
    write_partition(other, "clicks", 0, records=300)
    tick = json_lines(
        ok(
            home,
            "--json",
            "service",
            "run",
            "--once",
            "--kafka-log-dir",
            str(other),
            "--kafka-topics",
            ".*",
        )
    )[0]
    assert tick["kafka_uploaded"] and all(s.startswith("clicks-0@") for s in tick["kafka_uploaded"])
    text = ok(home, "service", "run", "--once").stdout
    assert "kafka" not in text or "uploaded: none" in text
    (home / "offloader.toml").write_text("[kafka]\nlog_dirs = 3\n")
    assert "log_dirs" in one_line_error(run(home, "service", "run", "--once"))


def _summaries(proc: subprocess.Popen[str], wanted: int) -> list[dict[str, Any]]:
    """Read the upload's JSON lines until ``wanted`` pass summaries have been printed."""
    assert proc.stdout is not None
    lines: list[dict[str, Any]] = []
    while sum(1 for line in lines if "partitions" in line) < wanted:
        text = proc.stdout.readline()
        assert text, "kafka upload stopped early"
        lines.append(json.loads(text))
    return lines


def test_upload_without_once_keeps_passing_until_sigterm(tmp_path: Path) -> None:
    """The sidecar mode: a pass every --interval picks up the segments Kafka rolled since,
    and SIGTERM ends it cleanly (exit 0) between passes."""
    root = tmp_path / "logs"
    layout = write_partition(root, "orders", 0, records=300)
    script = Path(sys.executable).parent / "offloader"
    command = [str(script)] if script.exists() else [sys.executable, "-m", "cli.main"]
    args = ["--home", str(tmp_path / "home"), "--json", "kafka", "upload", "--log-dir", str(root)]
    proc = subprocess.Popen(
        [*command, *args, "--interval", "1s"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        first = _summaries(proc, 1)
        assert [r["base_offset"] for r in first if r.get("outcome") == "uploaded"] == [
            b for b, _ in layout.segments[:-1]
        ]
        # Kafka rolls the active segment: the next pass uploads it, unasked
        later = write_partition(
            tmp_path / "more", "orders", 0, records=200, start_offset=layout.next_offset
        )
        for f in later.path.iterdir():
            if f.name.endswith((".log", ".index", ".timeindex", ".snapshot")):
                os.replace(f, layout.path / f.name)
        uploaded: list[int] = []
        while layout.segments[-1][0] not in uploaded:
            lines = _summaries(proc, 1)
            uploaded += [r["base_offset"] for r in lines if r.get("outcome") == "uploaded"]
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    assert "Traceback" not in err
