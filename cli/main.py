"""``offloader``: the command-line front end (console script ``offloader = cli.main:main``).

The top-level group parses the global options into a :class:`~cli.context.CliContext`, turns
every :class:`~offloader.errors.OffloaderError` into a one-line ``error: ...`` on stderr with
exit code 1 (a traceback only with ``-v``), and leaves usage errors to click (exit code 2).

Command groups live in their own modules and are registered in one place, :data:`COMMANDS`
(``"module:attribute"``): to add ``topics``, write ``cli/topics.py`` with a click group named
``topics`` and add ``"cli.topics:topics"`` below.
"""

from __future__ import annotations

import importlib
import sys
import traceback
from pathlib import Path
from typing import Any

import click

from cli.context import DEFAULT_HOME, CliContext
from offloader.errors import OffloaderError
from offloader.logs import configure

#: every command group, in ``--help`` order: "module:attribute"
COMMANDS: tuple[str, ...] = (
    "cli.topics:topics",
    "cli.namespaces:namespaces",
    "cli.objects:objects",
    "cli.objects_admin:objects",  # the same group, with verify/orphans/gc added
    "cli.service:service",
)

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text or type(exc).__name__


class OffloaderGroup(click.Group):
    """A group that maps operational errors to exit code 1 and a one-line message."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except BrokenPipeError:  # `offloader ... | head`: stop quietly
            sys.stderr.close()
            ctx.exit(EXIT_ERROR)
        except (OffloaderError, OSError) as exc:
            obj = ctx.find_object(CliContext)
            if obj is not None and obj.verbose:
                traceback.print_exc(file=sys.stderr)
            click.echo(f"error: {_one_line(exc)}", err=True)
            ctx.exit(EXIT_ERROR)


@click.group(cls=OffloaderGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--home",
    type=click.Path(file_okay=False, path_type=Path),
    default=DEFAULT_HOME,
    show_default=True,
    envvar="OFFLOADER_HOME",
    help="State directory (metadata database, local ledgers, default object store).",
)
@click.option(
    "--store",
    "store_url",
    metavar="URL",
    envvar="OFFLOADER_STORE",
    help="Object store: s3://bucket[/prefix] or file:///path. Default: file://<home>/objects.",
)
@click.option(
    "--endpoint-url",
    metavar="URL",
    help="S3 endpoint (MinIO, Ceph RGW, moto); AWS_ENDPOINT_URL is honoured too.",
)
@click.option("--json", "json_output", is_flag=True, help="Print results as JSON lines.")
@click.option(
    "--log-format",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="Logs on stderr as key=value text or JSON lines.",
)
@click.option(
    "-v", "--verbose", count=True, help="More logging (repeatable); tracebacks on errors."
)
@click.option("-q", "--quiet", count=True, help="Less logging (repeatable).")
@click.version_option(package_name="ledger-offloader", prog_name="offloader")
@click.pass_context
def cli(
    ctx: click.Context,
    home: Path,
    store_url: str | None,
    endpoint_url: str | None,
    json_output: bool,
    log_format: str,
    verbose: int,
    quiet: int,
) -> None:
    """Offload closed ledgers to S3 in Apache Pulsar's tiered-storage format.

    \b
    Examples:
      offloader objects inspect --data L.data --index L.index --entries
      offloader objects encode --entries entries.jsonl --ledger-id 7 \\
          --data L.data --index L.index
      offloader --json objects inspect --data L.data --index L.index
    """
    obj = CliContext(
        home=home,
        store_url=store_url,
        endpoint_url=endpoint_url,
        json=json_output,
        log_format=log_format,
        verbosity=verbose - quiet,
    )
    ctx.obj = obj
    configure(json=log_format == "json", level=obj.log_level)


def _register(group: click.Group, specs: tuple[str, ...]) -> None:
    for spec in specs:
        module_name, _, attribute = spec.partition(":")
        command = getattr(importlib.import_module(module_name), attribute)
        group.add_command(command)


_register(cli, COMMANDS)


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point."""
    cli.main(args=argv, prog_name="offloader")


if __name__ == "__main__":  # pragma: no cover
    main()
