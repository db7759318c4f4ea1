"""The top-level ``offloader --help`` (examples, global options and their environment
variables) and the hint for a global option given after the command."""

from __future__ import annotations

import shlex
from pathlib import Path

import click
import pytest
from click.testing import CliRunner, Result

from cli.main import cli

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
#: no setting from the environment of the test run
CLEAN_ENV: dict[str, str | None] = {
    "OFFLOADER_HOME": None,
    "OFFLOADER_STORE": None,
    "AWS_ENDPOINT_URL": None,
    "AWS_ENDPOINT_URL_S3": None,
}


def invoke(*args: str, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(
        cli, list(args), env={**CLEAN_ENV, **(env or {})}, prog_name="offloader"
    )


def top_help() -> str:
    result = invoke("--help")
    assert result.exit_code == 0, result.output
    return result.stdout


def examples() -> list[str]:
    text = top_help()
    block = text.split("Examples:", 1)[1].split("Options:", 1)[0]
    return [line.strip() for line in block.splitlines() if line.strip()]


def option_help(name: str) -> str:
    """The help text of a top-level option, on one line."""
    param = next(p for p in cli.params if name in p.opts)
    assert isinstance(param, click.Option) and param.help is not None
    return " ".join(param.help.split())


# --- offloader --help -----------------------------------------------------------------------
def test_examples_cover_the_main_jobs() -> None:
    lines = examples()
    assert 4 <= len(lines) <= 8
    text = "\n".join(lines)
    for command in (
        "topics produce",
        "topics offload-prefix",
        "topics read",
        "namespaces set-offload-threshold",
        "objects verify",
    ):
        assert f" {command} " in text, command


@pytest.mark.parametrize("line", examples())
def test_every_example_parses(line: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each example names real commands and options (parsed, not run)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "events.txt").write_text("one\n")  # input files must exist
    argv = shlex.split(line)
    assert argv[0] == "offloader"
    ctx = cli.make_context("offloader", argv[1:])
    command: click.Command = cli
    while isinstance(command, click.Group):
        args = [*ctx._protected_args, *ctx.args]
        name, sub, rest = command.resolve_command(ctx, args)
        assert sub is not None, line
        ctx = sub.make_context(name or "", rest, parent=ctx)
        command = sub


def test_global_options_name_their_environment_variables() -> None:
    assert "$OFFLOADER_HOME" in option_help("--home")
    assert "offloader.toml" in option_help("--home")
    store = option_help("--store")
    assert "$OFFLOADER_STORE" in store and "store in offloader.toml" in store
    assert "a directory path" in store  # a bare path is accepted (a local store)
    endpoint = option_help("--endpoint-url")
    assert "$AWS_ENDPOINT_URL" in endpoint and "endpoint_url in offloader.toml" in endpoint
    # the order the help gives is the order the code applies
    assert store.index("$OFFLOADER_STORE") < store.index("offloader.toml")
    assert endpoint.index("offloader.toml") < endpoint.index("$AWS_ENDPOINT_URL")


def test_offloader_home_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = invoke("namespaces", "create", "tenant/ns", env={"OFFLOADER_HOME": "state"})
    assert result.exit_code == 0, result.output
    assert (tmp_path / "state").is_dir() and not (tmp_path / ".offloader").exists()


def test_a_bare_path_is_a_local_store(tmp_path: Path) -> None:
    home, store = tmp_path / "home", tmp_path / "objects-here"
    base = ("--home", str(home), "--store", str(store))
    small = ("--max-entries-per-ledger", "10", "--min-rollover-time", "0")
    for args in (
        ("namespaces", "create", "tenant/ns"),
        ("topics", "produce", "tenant/ns/t", "--synthetic", "30", "--size", "100", *small),
        (
            "topics",
            "offload-prefix",
            "tenant/ns/t",
            "--size-threshold",
            "0",
            "--max-block-size",
            "4K",
        ),
    ):
        result = invoke(*base, *args)
        assert result.exit_code == 0, (args, result.output)
    assert any(path.name.endswith("-index") for path in store.iterdir())


def test_store_from_the_environment_wins_over_the_file(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "offloader.toml").write_text('store = "s3://bkt"\n[broker]\nmax_block_size = "1M"\n')
    env = {"OFFLOADER_STORE": str(tmp_path / "objects")}  # local: no 5M minimum
    result = invoke("--home", str(home), "namespaces", "create", "tenant/ns", env=env)
    assert result.exit_code == 0, result.output


# --- a global option after the command ------------------------------------------------------
@pytest.mark.parametrize(
    ("args", "name", "example"),
    [
        (("topics", "info", "t", "--json"), "--json", "offloader --json topics info t"),
        (("topics", "--json", "info", "t"), "--json", "offloader --json topics info t"),
        (
            ("topics", "list", "--store", "s3://b"),
            "--store",
            "offloader --store s3://b topics list",
        ),
        (("topics", "list", "--store=s3://b"), "--store", "offloader --store=s3://b topics list"),
        (
            ("--json", "topics", "list", "--home", "h"),
            "--home",
            "offloader --home h --json topics list",
        ),
        (("topics", "list", "--home"), "--home", "offloader --home DIR topics list"),
        (("topics", "list", "-vv"), "-v", "offloader -vv topics list"),
        (("topics", "list", "--quiet"), "--quiet", "offloader --quiet topics list"),
        (
            ("service", "run", "--once", "--log-format", "json"),
            "--log-format",
            "offloader --log-format json service run --once",
        ),
        (
            ("topics", "list", "--endpoint-url", "http://h:9"),
            "--endpoint-url",
            "offloader --endpoint-url http://h:9 topics list",
        ),
    ],
)
def test_misplaced_global_option_gets_a_hint(
    args: tuple[str, ...], name: str, example: str
) -> None:
    result = invoke(*args)
    assert result.exit_code == 2, result.output
    last = result.stderr.strip().splitlines()[-1]
    assert last == (
        f"Error: No such option '{name}'. {name} is a global option: put it before the "
        f"command, as in `{example}`."
    )
    assert "Usage: offloader " in result.stderr  # click's usage lines are kept


def test_unknown_option_keeps_the_plain_error() -> None:
    result = invoke("topics", "info", "t", "--jsn")
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines()[-1] == "Error: No such option '--jsn'."


def test_a_command_option_named_like_a_global_one_still_works() -> None:
    data, index = GOLDEN / "multi-block.data", GOLDEN / "multi-block.index"
    result = invoke("objects", "inspect", "--data", str(data), "--index", str(index), "--json")
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("{")
