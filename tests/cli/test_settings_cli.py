"""Settings from options, ``offloader.toml`` and the environment: a refused value names where it
came from, the min rollover time is not above the max, and each settings decorator adds only the
options that matter to a command."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import click
import pytest
from click.testing import CliRunner, Result

from cli.config_file import FileConfig
from cli.context import CliContext, pass_cli
from cli.main import cli
from cli.settings import (
    broker_options,
    offload_options,
    option_overrides,
    read_options,
    resolve_settings,
    rollover_options,
)
from offloader.errors import ConfigError
from tests.cli.helpers import one_line_error

TOPIC = "persistent://tenant/ns/t1"
#: no setting from the environment of the test run
CLEAN_ENV: dict[str, str | None] = {
    "OFFLOADER_HOME": None,
    "OFFLOADER_STORE": None,
    "AWS_ENDPOINT_URL": None,
    "AWS_ENDPOINT_URL_S3": None,
}


def invoke(home: Path, *args: str, env: dict[str, str] | None = None) -> Result:
    """``offloader --home HOME ARGS...`` with a clean environment plus ``env``."""
    return CliRunner().invoke(
        cli, ["--home", str(home), *args], env={**CLEAN_ENV, **(env or {})}, prog_name="offloader"
    )


def usage_error(result: Result) -> str:
    """Exit 2; the ``Error: ...`` line."""
    assert result.exit_code == 2, (result.output, result.exception)
    return result.stderr.strip().splitlines()[-1]


@pytest.fixture()
def home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    return home


def write_config(home: Path, text: str) -> Path:
    path = home / "offloader.toml"
    path.write_text(text)
    return path


# --- the S3 minimum block size: named by its source -----------------------------------------
def test_file_block_size_below_s3_minimum_names_the_file_key(home: Path) -> None:
    path = write_config(home, 'store = "s3://bkt"\n[broker]\nmax_block_size = "1M"\n')
    line = one_line_error(invoke(home, "topics", "list"))
    assert line == (
        f'error: {path}: [broker] max_block_size = "1M" is below S3\'s minimum part size 5M, '
        f"which the s3:// store (from store in {path}) needs"
    )
    assert "--max-block-size" not in line  # the user gave no option


def test_file_block_size_with_the_store_from_the_environment(home: Path) -> None:
    path = write_config(home, '[broker]\nmax_block_size = "1M"\n')
    line = one_line_error(invoke(home, "topics", "list", env={"OFFLOADER_STORE": "s3://bkt"}))
    assert line.startswith(f'error: {path}: [broker] max_block_size = "1M" is below')
    assert "(from environment variable OFFLOADER_STORE)" in line


def test_option_block_size_below_s3_minimum_is_a_usage_error(home: Path) -> None:
    write_config(home, 'store = "s3://bkt"\n')
    args = ("topics", "produce", TOPIC, "--max-block-size", "1M")
    line = usage_error(invoke(home, *args))
    assert line.startswith("Error: Invalid value for '--max-block-size': 1M is below S3's")
    assert f"(from store in {home / 'offloader.toml'})" in line


def test_option_block_size_overrides_a_bad_file_value(home: Path) -> None:
    write_config(home, 'store = "s3://bkt"\n[broker]\nmax_block_size = "1M"\n')
    resolved = resolve_settings(CliContext(home=home), {"max_block_size": 8 * 1024**2})
    assert resolved.broker.offload.max_block_size == 8 * 1024**2


# --- min rollover time <= max rollover time -------------------------------------------------
@pytest.mark.parametrize(
    ("broker", "message"),
    [
        (
            'min_rollover_time = "2h"\nmax_rollover_time = "1h"\n',
            '[broker] min_rollover_time = "2h" is above max_rollover_time = "1h"',
        ),
        (
            'min_rollover_time = "5h"\n',
            '[broker] min_rollover_time = "5h" is above the default max rollover time 4h',
        ),
        (
            "max_rollover_time = 300\n",
            "[broker] max_rollover_time = 300 is below the default min rollover time 10m",
        ),
    ],
)
def test_file_min_rollover_above_max_is_refused(home: Path, broker: str, message: str) -> None:
    path = write_config(home, f"[broker]\n{broker}")
    with pytest.raises(ConfigError) as info:
        resolve_settings(CliContext(home=home))
    assert str(info.value) == (f"{path}: {message}; the min rollover time must not exceed the max")
    line = one_line_error(invoke(home, "namespaces", "create", "tenant/ns"))
    assert line == f"error: {info.value}"


def test_option_min_rollover_above_file_max_is_a_usage_error(home: Path) -> None:
    path = write_config(home, '[broker]\nmax_rollover_time = "1h"\n')
    line = usage_error(invoke(home, "topics", "produce", TOPIC, "--min-rollover-time", "2h"))
    assert line == (
        "Error: Invalid value for '--min-rollover-time': 2h is above the max rollover time 1h "
        f'([broker] max_rollover_time = "1h" in {path}); the min rollover time must not exceed '
        "the max"
    )


def test_option_max_rollover_below_file_min_is_a_usage_error(home: Path) -> None:
    write_config(home, '[broker]\nmin_rollover_time = "2h"\n')
    line = usage_error(invoke(home, "topics", "produce", TOPIC, "--max-rollover-time", "30m"))
    assert line.startswith(
        "Error: Invalid value for '--max-rollover-time': 30m is below the min rollover time 2h"
    )
    assert "offloader.toml" in line


def test_both_rollover_options_min_above_max(home: Path) -> None:
    args = ("--min-rollover-time", "3h", "--max-rollover-time", "2h")
    line = usage_error(invoke(home, "topics", "produce", TOPIC, *args))
    assert "'--min-rollover-time': 3h is above the max rollover time 2h (--max-rollover-time)" in (
        line
    )


def test_equal_rollover_times_are_accepted(home: Path) -> None:
    write_config(home, '[broker]\nmin_rollover_time = "1h"\nmax_rollover_time = "1h"\n')
    broker = resolve_settings(CliContext(home=home)).broker
    assert broker.min_rollover_seconds == broker.max_rollover_seconds == 3600


def test_zero_max_rollover_time_is_refused(home: Path) -> None:
    line = usage_error(invoke(home, "topics", "produce", TOPIC, "--max-rollover-time", "0"))
    assert "'--max-rollover-time'" in line and "minimum of 1s" in line
    path = write_config(home, "[broker]\nmax_rollover_time = 0\n")
    line = one_line_error(invoke(home, "topics", "list"))
    assert line == f"error: {path}: [broker] max_rollover_time = 0: must be at least 1s"


# --- other bad values name the key, the variable or the option ------------------------------
@pytest.mark.parametrize(
    ("broker", "start"),
    [
        ('max_block_size = "huge"', '[broker] max_block_size = "huge": invalid size'),
        ("read_buffer_size = 10", "[broker] read_buffer_size = 10: read buffer size 10 is below"),
        ('orphan_min_age = "1 hour"', '[broker] orphan_min_age = "1 hour": invalid time'),
    ],
)
def test_bad_file_value_names_the_key(home: Path, broker: str, start: str) -> None:
    path = write_config(home, f"[broker]\n{broker}\n")
    line = one_line_error(invoke(home, "topics", "list"))
    assert line.startswith(f"error: {path}: {start}"), line


@pytest.mark.parametrize(
    ("args", "env", "source"),
    [
        ((), {"OFFLOADER_STORE": "ftp://host/x"}, "(from environment variable OFFLOADER_STORE)"),
        (("--store", "s3://Bad_Bucket"), {}, "(from --store)"),
        (("--store", "s3://bkt", "--endpoint-url", "ftp://e"), {}, "(from --endpoint-url)"),
        (
            ("--store", "s3://bkt"),
            {"AWS_ENDPOINT_URL": "ftp://e"},
            "(from environment variable AWS_ENDPOINT_URL)",
        ),
    ],
)
def test_bad_store_or_endpoint_names_its_source(
    home: Path, args: tuple[str, ...], env: dict[str, str], source: str
) -> None:
    line = one_line_error(invoke(home, *args, "namespaces", "create", "tenant/ns", env=env))
    assert line.endswith(source), line


def test_bad_endpoint_in_the_file_names_the_file(home: Path) -> None:
    path = write_config(home, 'store = "s3://bkt"\nendpoint_url = "ftp://e"\n')
    line = one_line_error(invoke(home, "namespaces", "create", "tenant/ns"))
    assert line.startswith("error: invalid S3 endpoint URL 'ftp://e'")
    assert line.endswith(f"(from endpoint_url in {path})")


# --- the settings decorators ----------------------------------------------------------------
ROLLOVER = {
    "--max-entries-per-ledger",
    "--max-ledger-size",
    "--min-rollover-time",
    "--max-rollover-time",
}
OFFLOAD = {"--max-block-size", "--offload-concurrency"}
READ = {"--read-buffer-size"}


def probe(*decorators: object) -> click.Command:
    """A command with ``decorators`` that prints the overrides it was given as JSON."""

    @pass_cli
    def callback(cli: CliContext, topic: str) -> None:
        click.echo(json.dumps({"topic": topic, **option_overrides()}))

    func = callback
    for decorator in reversed(decorators):
        func = decorator(func)  # type: ignore[operator]
    return click.argument("topic")(click.command("probe")(func))


def option_names(command: click.Command) -> set[str]:
    return {o for p in command.params if isinstance(p, click.Option) for o in p.opts} - {"--help"}


@pytest.mark.parametrize(
    ("decorators", "expected"),
    [
        ((rollover_options,), ROLLOVER),
        ((offload_options,), OFFLOAD),
        ((read_options,), READ),
        ((rollover_options, offload_options), ROLLOVER | OFFLOAD),
        ((broker_options,), ROLLOVER | OFFLOAD | READ),
    ],
)
def test_each_decorator_adds_only_its_options(
    decorators: tuple[object, ...], expected: set[str]
) -> None:
    assert option_names(probe(*decorators)) == expected


def test_stacked_decorators_collect_every_override() -> None:
    command = probe(rollover_options, offload_options)
    args = ["t", "--min-rollover-time", "0", "--max-block-size", "8M"]
    result = CliRunner().invoke(command, args)
    assert result.exit_code == 0, result.output
    record = json.loads(result.stdout)
    assert record["topic"] == "t"  # the options are not passed to the command itself
    assert record["min_rollover_time"] == 0 and record["max_block_size"] == 8 * 1024**2
    assert record["max_entries_per_ledger"] is None and "read_buffer_size" not in record
    result = CliRunner().invoke(command, ["t", "--read-buffer-size", "4M"])
    assert result.exit_code == 2 and "No such option '--read-buffer-size'" in result.stderr


def test_settings_option_help_has_one_default_style() -> None:
    command = probe(broker_options)
    for param in command.params:
        if isinstance(param, click.Option) and param.opts[0] != "--help":
            assert param.help is not None and "(default: " in param.help, param.opts
            assert "(Pulsar:" not in param.help and "(default 4)" not in param.help


# --- one read of offloader.toml per command ---------------------------------------------------
def test_service_run_reads_offloader_toml_once(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The settings, the metrics address and the exports of one ``service run`` come from one
    read of the file (it was read three or four times, and could change between the reads)."""
    settings_module = importlib.import_module("cli.settings")
    write_config(home, "[broker]\nmax_entries_per_ledger = 7\n")
    reads: list[Path] = []
    real = settings_module.load_file_config

    def counting(at: Path) -> FileConfig:
        reads.append(at)
        return real(at)

    monkeypatch.setattr(settings_module, "load_file_config", counting)
    invoke(home, "namespaces", "create", "public/default")
    reads.clear()
    result = invoke(home, "service", "run", "--once")
    assert result.exit_code == 0, result.output
    assert reads == [home]
