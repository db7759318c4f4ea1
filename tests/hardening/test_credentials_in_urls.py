"""Issue 21 items 14 and 15 (the endpoint part): credentials and signed query strings in
``--store`` / ``--endpoint-url`` are refused and never printed (not in the ``error:`` line, not in
a ``-v`` traceback, not in log lines); an out-of-range endpoint port is a clear error."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest

from offloader.errors import ConfigError
from offloader.logs import configure, get_logger, redact
from offloader.store.endpoint import check_endpoint_url
from tests.cli.test_settings_cli import invoke

SECRET = "hunter2"


@pytest.mark.parametrize(
    "args",
    [
        ("--store", "s3://bkt1/p", "--endpoint-url", f"http://AKIAFAKE:{SECRET}@127.0.0.1:1"),
        ("--store", "s3://bkt1/p", "--endpoint-url", f"http://AKIAFAKE:{SECRET}@127.0.0.1"),
        (
            "--store",
            "s3://bkt1/p",
            "--endpoint-url",
            f"http://127.0.0.1:1/?X-Amz-Credential=AKIAFAKE&X-Amz-Signature={SECRET}",
        ),
        ("--store", f"s3://bkt1/p?X-Amz-Credential=AKIAFAKE&X-Amz-Signature={SECRET}"),
        ("--store", f"s3://AKIAFAKE:{SECRET}@bkt1/p"),
        ("--store", f"file:///tmp/x?X-Amz-Signature={SECRET}"),
    ],
)
@pytest.mark.parametrize("verbose", [False, True])
def test_credentials_are_refused_and_never_printed(
    tmp_path: Path, args: tuple[str, ...], verbose: bool
) -> None:
    env = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}
    flags = ("-v",) if verbose else ()
    result = invoke(tmp_path, *flags, *args, "objects", "orphans", env=env)
    assert result.exit_code == 1, (result.output, result.exception)
    assert SECRET not in result.output
    assert SECRET not in result.stderr
    assert "AKIAFAKE" not in result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("error: "), result.stderr
    assert "credentials" in last or "query" in last, last


@pytest.mark.parametrize("port", ["0", "65536", "99999"])
def test_an_out_of_range_endpoint_port_is_named(tmp_path: Path, port: str) -> None:
    result = invoke(
        tmp_path, "--store", "s3://bkt1/p", "--endpoint-url", f"http://127.0.0.1:{port}",
        "objects", "orphans",
    )  # fmt: skip
    assert result.exit_code == 1, (result.output, result.exception)
    line = result.stderr.strip().splitlines()[-1]
    assert f"the port '{port}' is not in 1..65535" in line, line
    assert "(from --endpoint-url)" in line


def test_check_endpoint_url_accepts_plain_endpoints() -> None:
    for ok in ("http://127.0.0.1:9000", "https://s3.example.com", "http://h:1/path"):
        check_endpoint_url(ok)
    with pytest.raises(ConfigError):
        check_endpoint_url("ftp://h")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("s3://k:s@bkt/p", "s3://***@bkt/p"),
        ("see 'https://h/k?X-Amz-Signature=abc&x=1' here", "see 'https://h/k?***' here"),
        ("X-Amz-Signature=abc&X-Amz-Credential=AK", "X-Amz-Signature=***&X-Amz-Credential=***"),
        ("s3://bkt/plain/key", "s3://bkt/plain/key"),
    ],
)
def test_redact(text: str, expected: str) -> None:
    assert redact(text) == expected


def test_log_lines_are_redacted(monkeypatch: pytest.MonkeyPatch) -> None:
    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    configure()
    try:
        get_logger("test").warning("oops", url=f"http://u:{SECRET}@h/k?X-Amz-Signature={SECRET}")
    finally:
        import structlog

        structlog.reset_defaults()
    assert "oops" in err.getvalue()
    assert SECRET not in err.getvalue()
