"""The whole ``offloader`` command tree, held against a snapshot (``tests/cli/cli_tree.json``).

Every command path (``offloader``, ``offloader topics``, ``offloader topics read``...) with its
help text, its rendered ``--help`` page and each parameter's names, type, default, flags and
help. A refactor of ``cli/`` (moving commands between modules or packages) must leave the tree
exactly as it was; this test fails on any difference, naming the command paths that differ.

When the CLI changes on purpose (a new command, option or help text), regenerate the snapshot
deliberately from the worktree root and review its diff with the change::

    .venv/bin/python -m tests.cli.test_cli_tree --regenerate
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from cli.main import cli

SNAPSHOT = Path(__file__).resolve().parent / "cli_tree.json"
#: a fixed page width, so that the rendered help does not depend on the terminal
WIDTH = 100


def _value(value: Any) -> Any:
    """A JSON-able, environment-independent form of a parameter's default."""
    if callable(value):
        return f"<callable {getattr(value, '__name__', type(value).__name__)}>"
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, list | tuple):
        return [_value(v) for v in value]
    return f"{type(value).__name__}({value})"


def _type(param_type: click.ParamType[Any]) -> dict[str, Any]:
    info: dict[str, Any] = {**param_type.to_info_dict(), "class": type(param_type).__name__}
    return {k: _value(v) for k, v in sorted(info.items())}


def _param(param: click.Parameter) -> dict[str, Any]:
    record: dict[str, Any] = {
        "name": param.name,
        "kind": type(param).__name__,
        "opts": list(param.opts),
        "secondary_opts": list(param.secondary_opts),
        "type": _type(param.type),
        "required": param.required,
        "nargs": param.nargs,
        "multiple": param.multiple,
        "default": _value(param.default),
        "envvar": _value(param.envvar),
        "metavar": param.metavar,
        "expose_value": param.expose_value,
        "is_eager": param.is_eager,
    }
    if isinstance(param, click.Option):
        record.update(
            help=param.help,
            is_flag=param.is_flag,
            count=param.count,
            hidden=param.hidden,
            show_default=_value(param.show_default),
            show_envvar=param.show_envvar,
        )
    return record


def _walk(ctx: click.Context, out: dict[str, Any]) -> None:
    command = ctx.command
    out[ctx.command_path] = {
        "class": type(command).__name__,
        "callback": getattr(command.callback, "__name__", None),
        "help": command.help,
        "short_help": command.get_short_help_str(limit=WIDTH),
        "hidden": command.hidden,
        "deprecated": command.deprecated,
        "params": [_param(p) for p in command.params],
        "rendered_help": command.get_help(ctx),
    }
    if isinstance(command, click.Group):
        names = command.list_commands(ctx)
        out[ctx.command_path]["commands"] = names
        for name in names:
            sub = command.get_command(ctx, name)
            assert sub is not None, name
            _walk(click.Context(sub, info_name=name, parent=ctx, **sub.context_settings), out)


def cli_tree() -> dict[str, Any]:
    """Every command path of ``offloader`` -> its description (see the module docstring)."""
    settings = {"terminal_width": WIDTH, "max_content_width": WIDTH, **cli.context_settings}
    root = click.Context(cli, info_name="offloader", **settings)
    out: dict[str, Any] = {}
    _walk(root, out)
    return out


def _dump(tree: dict[str, Any]) -> str:
    return json.dumps(tree, indent=1, sort_keys=True) + "\n"


def test_cli_tree_equals_the_snapshot() -> None:
    """The command tree is exactly the committed snapshot (regenerate it only on purpose)."""
    expected = json.loads(SNAPSHOT.read_text(encoding="utf-8"))
    actual = json.loads(_dump(cli_tree()))
    missing = sorted(set(expected) - set(actual))
    added = sorted(set(actual) - set(expected))
    changed = sorted(p for p in set(expected) & set(actual) if expected[p] != actual[p])
    assert (missing, added, changed) == ([], [], [])
    assert actual == expected


def test_cli_tree_covers_every_noun() -> None:
    """The snapshot is not trivially small: every noun and some deep commands are in it."""
    tree = cli_tree()
    for path in (
        "offloader topics read",
        "offloader topics unload",
        "offloader topics set-offload-policies",
        "offloader namespaces set-offload-transform",
        "offloader objects rekey",
        "offloader objects encode",
        "offloader keys create",
        "offloader brokers list",
        "offloader kafka set-offload-transform",
        "offloader export clean-orphans",
        "offloader service run",
    ):
        assert path in tree, path
    assert "-h, --help" in tree["offloader topics read"]["rendered_help"]


if __name__ == "__main__":  # pragma: no cover
    if sys.argv[1:] != ["--regenerate"]:
        sys.exit("usage: python -m tests.cli.test_cli_tree --regenerate")
    SNAPSHOT.write_text(_dump(cli_tree()), encoding="utf-8")
    print(f"wrote {SNAPSHOT}")
