"""The documentation's generators (docsgen/): the CLI reference covers every command of the
click tree, the configuration reference every key the code accepts, the performance page every
result file; and the site builds with ``mkdocs build --strict``."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import click
import pytest

from cli.main import cli
from docsgen import cli_reference, config_reference, hooks, performance

ROOT = Path(__file__).resolve().parents[2]


def _commands(group: click.Command, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every command path, walked independently of the generator."""
    found = [path]
    if isinstance(group, click.Group):
        for name, sub in group.commands.items():
            found += _commands(sub, (*path, name))
    return found


def test_cli_reference_covers_every_command_and_option() -> None:
    text = cli_reference.render(cli)
    paths = _commands(cli)
    assert len(paths) > 50
    for path in paths:
        title = " ".join(("offloader", *path))
        assert f"`{title}` {{#{cli_reference.anchor(path)}}}" in text, title
        command: click.Command = cli
        for name in path:
            assert isinstance(command, click.Group)
            command = command.commands[name]
        for param in command.params:
            if isinstance(param, click.Option) and not param.hidden:
                assert f"`{param.opts[0]}`" in text, (title, param.opts[0])


def test_cli_reference_walk_matches_the_tree() -> None:
    assert sorted(cli_reference.walk(cli)) == sorted(_commands(cli))


def test_config_reference_describes_every_accepted_key() -> None:
    described = set(config_reference.DESCRIPTIONS) | {
        ("broker", key) for key in config_reference.option_help()
    }
    accepted = config_reference.accepted_keys()
    assert accepted - described == set(), "keys the code accepts with no description"
    assert described - accepted == set(), "descriptions of keys the code does not accept"
    assert set(config_reference.BROKER_DEFAULTS) == config_reference.broker_keys()


def test_config_reference_shows_the_code_defaults() -> None:
    text = config_reference.render(cli)
    assert '| `max_block_size` | size | `"64M"` |' in text
    assert "| `max_entries_per_ledger` | integer | `50000` |" in text
    assert '| `offload_deletion_lag` | time | `"4h"` |' in text
    for env in ("OFFLOADER_HOME", "OFFLOADER_STORE", "OFFLOADER_METADATA", "OFFLOADER_KEY_RING"):
        assert f"`{env}`" in text


def test_performance_page_has_every_result_file() -> None:
    directory = ROOT / "bench" / "results"
    files = sorted(directory.glob("*.json"))
    assert files
    text = performance.render(directory)
    for path in files:
        data = json.loads(path.read_text())
        assert f"`bench/results/{path.name}`" in text
        assert f"## {data['date']}: {data['benchmark']}" in text


def test_a_malformed_result_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "2026-01-01-x.json").write_text(json.dumps({"date": "2026-01-01"}))
    with pytest.raises(performance.ResultFileError, match="missing"):
        performance.load(tmp_path)
    row = {"case": "c", "speed": 1}
    good = {
        "date": "2026-01-02",
        "benchmark": "b",
        "command": "c",
        "machine": {"description": "d"},
        "method": "m",
        "rows": [row],
    }
    (tmp_path / "2026-01-01-x.json").write_text(json.dumps(good))
    with pytest.raises(performance.ResultFileError, match="must start with its date"):
        performance.load(tmp_path)
    (tmp_path / "2026-01-01-x.json").unlink()
    (tmp_path / "2026-01-02-x.json").write_text(json.dumps(good))
    with pytest.raises(performance.ResultFileError, match="a row needs"):
        performance.load(tmp_path)


def test_included_files_links_point_at_their_pages() -> None:
    pages = hooks.included()
    text = "[a](block-format.md#2-x) [b](../formats/block.py) [c](https://x.org/y.md) [d](#e)"
    out = hooks.rewrite_links(text, "spec/index-format.md", pages)
    assert "[a](../spec/block-format.md#2-x)" in out
    assert "b (`formats/block.py`)" in out
    assert "[c](https://x.org/y.md)" in out and "[d](#e)" in out
    arch = hooks.rewrite_links("[s](spec/export.md)", "ARCHITECTURE.md", pages)
    assert arch == "[s](spec/export.md)"


def test_fence_titles_are_quoted_for_the_site() -> None:
    text = '```hex title=header\nAB\n```\n```console title="q"\n$ x\n```\n'
    assert hooks.quote_fence_titles(text).splitlines()[0] == '```hex title="header"'
    assert '```console title="q"' in hooks.quote_fence_titles(text)


def test_the_site_builds_strict(tmp_path: Path) -> None:
    """`make docs`: every link and anchor resolves, the generated pages included."""
    mkdocs = shutil.which("mkdocs", path=str(Path(sys.executable).parent))
    assert mkdocs, "mkdocs is installed by the dev extra"
    site = tmp_path / "site"
    result = subprocess.run(
        [mkdocs, "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**__import__("os").environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert result.returncode == 0, result.stderr[-4000:]
    for page in (
        "reference/cli.html",
        "reference/configuration.html",
        "performance.html",
        "spec/block-format.html",
        "architecture.html",
        "changelog.html",
    ):
        assert (site / page).is_file(), page
    assert "fonts.googleapis.com" not in (site / "index.html").read_text()


def test_the_configuration_example_is_accepted(tmp_path: Path) -> None:
    """The reference's example (from the modules' docstrings) is a file the code accepts."""
    from cli import config_file, config_transform, settings

    example = "\n\n".join(
        config_reference.docstring_example(module) for module in (settings, config_transform)
    )
    (tmp_path / "offloader.toml").write_text(example)
    loaded = config_file.load_file_config(tmp_path)
    assert loaded.broker.offload.max_block_size == 64 * 1024 * 1024
    assert loaded.broker.namespace_transforms


def test_rendering_the_reference_leaves_the_commands_as_they_were() -> None:
    """click caches each command's help option the first time a context asks for it: the
    reference must ask with the root's ``-h, --help``, or ``-h`` stops working afterwards."""
    from click.testing import CliRunner

    cli_reference.render(cli)
    result = CliRunner().invoke(cli, ["topics", "read", "-h"])
    assert result.exit_code == 0 and "-h, --help" in result.output
