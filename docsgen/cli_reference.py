"""The command-line reference, generated from the ``offloader`` click tree (:data:`cli.main.cli`).

Every group and command, in ``--help`` order, with its usage line, its help text and a table
of its options and arguments (names, type, default, environment variable, help).
``tests/docs/test_docsgen.py`` checks that every command of the tree has its section.
"""

from __future__ import annotations

from collections.abc import Iterator

import click


def walk(command: click.Command, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """The path of every command and group under ``command`` (itself first), depth first."""
    yield path
    if isinstance(command, click.Group):
        for name in command.list_commands(click.Context(command)):
            sub = command.get_command(click.Context(command), name)
            if sub is not None and not sub.hidden:
                yield from walk(sub, (*path, name))


def _lookup(root: click.Command, path: tuple[str, ...]) -> click.Command:
    command = root
    for name in path:
        assert isinstance(command, click.Group)
        found = command.get_command(click.Context(command), name)
        assert found is not None
        command = found
    return command


def escape(text: str) -> str:
    """Help text as Markdown text: no HTML tags, emphasis or table cells made by accident."""
    text = text.replace("\\", "\\\\")  # a backslash shown as one, never an escape
    return text.replace("<", "&lt;").replace(">", "&gt;").replace("*", "\\*")


def _cell(text: str) -> str:
    return escape(" ".join(text.split())).replace("|", "\\|")


def _type_name(param: click.Parameter) -> str:
    if isinstance(param, click.Option) and (param.is_flag or param.count):
        return "count" if param.count else "flag"
    kind = param.type
    if isinstance(kind, click.Choice):
        return " \\| ".join(f"`{choice}`" for choice in kind.choices)
    name = getattr(param, "metavar", None) or kind.name.upper()
    return f"`{name}`"


def _default(param: click.Parameter) -> str:
    if isinstance(param, click.Option) and (param.is_flag or param.count):
        return ""
    default = param.default
    if "UNSET" in repr(default):  # click 8.2's "no default" sentinel
        return ""
    if default is None or callable(default) or default == () or default == "":
        return ""
    return f"`{default}`"


def _params_table(command: click.Command) -> list[str]:
    rows = []
    for param in command.params:
        if isinstance(param, click.Option) and param.hidden:
            continue
        if isinstance(param, click.Argument):
            names = f"`{param.human_readable_name}`"
            help_text = "argument" + (" (repeatable)" if param.nargs == -1 else "")
            if not param.required:
                help_text += ", optional"
        else:
            assert isinstance(param, click.Option)
            names = ", ".join(f"`{opt}`" for opt in [*param.opts, *param.secondary_opts])
            help_text = param.help or ""
            if param.required:
                help_text = "**required**. " + help_text
            envvar = param.envvar
            if envvar:
                envvars = [envvar] if isinstance(envvar, str) else list(envvar)
                help_text += " Environment: " + ", ".join(f"`${e}`" for e in envvars) + "."
        rows.append(f"| {names} | {_type_name(param)} | {_default(param)} | {_cell(help_text)} |")
    if not rows:
        return []
    return ["| option | value | default | description |", "| --- | --- | --- | --- |", *rows]


def anchor(path: tuple[str, ...]) -> str:
    """The section id of a command: ``offloader-topics-read``."""
    return "-".join(("offloader", *path))


def _help_option_names(root: click.Command) -> list[str] | None:
    """The help option names every command inherits from the root group's context."""
    names = root.context_settings.get("help_option_names")
    return None if names is None else list(names)


def render(root: click.Command, prog: str = "offloader") -> str:
    """The whole reference as Markdown."""
    lines = [
        "# Command-line reference",
        "",
        "Generated from the code by `docsgen/cli_reference.py` when the site is built: every "
        f"`{prog}` command, its options and its help text, exactly as `--help` prints them. "
        "Global options (the first table) go before the command: "
        f"`{prog} --json topics info t`.",
        "",
        *_selection_section(prog),
    ]
    for path in walk(root):
        command = _lookup(root, path)
        title = " ".join((prog, *path))
        depth = 2 if len(path) <= 1 else len(path) + 1
        lines.append(f"{'#' * depth} `{title}` {{#{anchor(path)}}}")
        lines.append("")
        # the root's help option names (``-h, --help``): click caches a command's help option
        # the first time a context asks for it, so a context without them would change what
        # ``offloader ... --help`` accepts for the rest of the process
        ctx = click.Context(
            command,
            info_name=title,
            help_option_names=_help_option_names(root),
        )
        pieces = command.collect_usage_pieces(ctx)
        lines += ["```text", f"Usage: {title} {' '.join(pieces)}".rstrip(), "```", ""]
        if command.help:
            lines += _help_text(command.help)
        if command.epilog:
            lines += _help_text(command.epilog)
        if isinstance(command, click.Group):
            subs = [p[-1] for p in walk(command, ()) if len(p) == 1]
            lines.append(
                "Commands: "
                + ", ".join(f"[`{name}`](#{anchor((*path, name))})" for name in subs)
                + "."
            )
            lines.append("")
        lines += _params_table(command)
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def _help_text(text: str) -> list[str]:
    """click's help text: paragraphs as text, ``\\b`` paragraphs (examples) verbatim."""
    out: list[str] = []
    for paragraph in click.unstyle(text).split("\n\n"):
        body = paragraph.strip("\n")
        if body.lstrip().startswith("\b"):
            verbatim = body.lstrip()[1:].strip("\n")
            code = [line.rstrip() for line in _dedent(verbatim)]
            while code and not code[-1]:
                code.pop()
            out += ["```text", *code, "```", ""]
        elif body.strip():
            out += [escape(" ".join(body.split())), ""]
    return out


def _dedent(text: str) -> list[str]:
    lines = text.splitlines()
    indents = [len(line) - len(line.lstrip()) for line in lines if line.strip()]
    cut = min(indents, default=0)
    return [line[cut:] for line in lines]


def _selection_section(prog: str) -> list[str]:
    """*Selecting topics*: the one form every option that selects topics takes, from
    :mod:`offloader.selection` (its help sentence, as ``--help`` shows it)."""
    from offloader.selection import TOPICS_HELP, TOPICS_METAVAR

    return [
        "## Selecting topics {#selecting-topics}",
        "",
        f"Every option that selects topics takes one form and shows it as `{TOPICS_METAVAR}`: "
        "`kafka upload --topics`, `service run --kafka-topics` (and `[kafka] topics`), "
        "`metadata rebuild --topics`, `export run TOPICS...` (and `[[export]] topics`), and "
        "the Spark sources' `topics` option, with or without `--pulsar-metadata`:",
        "",
        f"> {escape(TOPICS_HELP)}",
        "",
        "```text",
        f"{prog} kafka upload --log-dir /data --topics orders,clicks      # two names",
        f"{prog} kafka upload --log-dir /data --topics 'orders-.*'        # a regex",
        f"{prog} metadata rebuild --topics tenant/ns                      # a namespace",
        f"{prog} metadata rebuild --topics tenant/ns/t1,persistent://tenant/ns/t2",
        f"{prog} export run 'public/default/(orders|clicks)' --to /lake   # a regex",
        "```",
        "",
        "A name is an exact match: `.`, `_` and `-` are name characters (`orders.v1` is one "
        "Kafka topic, never `ordersXv1`), and a bare Pulsar name `x` means "
        "`persistent://public/default/x`. A regex is Python's, matched in full against the "
        "topic name (a Pulsar topic's `persistent://t/ns/x` and `t/ns/x` forms both); a comma "
        "inside it is part of the regex, so write alternatives with `|`; a Pulsar topic whose "
        "name holds an operator is selected by a regex that escapes it "
        "(`persistent://t/ns/a\\+b`). A bad regex, an empty "
        "selection or a malformed Pulsar name is one `error:` line (exit code 1); a namespace "
        "where Kafka topics are selected is refused the same way.",
        "",
    ]
