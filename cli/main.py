"""``offloader``: the command-line front end (console script ``offloader = cli.main:main``).

The top-level group parses the global options into a :class:`~cli.context.CliContext`, turns
every :class:`~offloader.errors.OffloaderError` into a one-line ``error: ...`` on stderr with
exit code 1 (a traceback only with ``-v``), and leaves usage errors to click (exit code 2). A
global option given after the command (``offloader topics info t --json``) is still a usage
error, with a hint that shows where it goes (``offloader --json topics info t``).

Each noun is a package (``cli/topics/``, ``cli/objects/``...) whose ``__init__.py`` defines the
noun's click group and adds the commands of the modules beside it; ``service`` is one module.
The groups are added to the top-level group explicitly at the end of this module (``--help``
lists them by name): to add a noun, write its package and add its group there.
"""

from __future__ import annotations

import sys
import traceback
from pathlib import Path
from typing import Any

import click

from cli.brokers import brokers
from cli.context import DEFAULT_HOME, CliContext
from cli.export import export
from cli.kafka import kafka
from cli.keys import keys
from cli.logsink import LogSink
from cli.metadata import metadata
from cli.namespaces import namespaces
from cli.objects import objects
from cli.render import safe_text
from cli.service import service
from cli.topics import topics
from offloader.errors import OffloaderError
from offloader.logs import configure, redact

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2

#: ctx.meta key (shared by every context of an invocation): the arguments as given
_ARGS_KEY = "offloader.args"
#: ctx.meta key: the LogSink of this invocation
_SINK_KEY = "offloader.log_sink"


def _one_line(exc: BaseException) -> str:
    # a hostile key may hold escape sequences: those are escaped; names the message quotes
    # with repr() are escaped already, so their backslashes are not escaped twice
    text = safe_text(" ".join(str(exc).split()), escape_backslash=False)
    return text or type(exc).__name__


class OffloaderGroup(click.Group):
    """A group that maps operational errors to exit code 1 and a one-line message, and hints
    where a misplaced global option goes."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        ctx.meta.setdefault(_ARGS_KEY, tuple(args))  # the top-level group sees them all
        return super().parse_args(ctx, args)

    def invoke(self, ctx: click.Context) -> Any:
        failed = False
        try:
            return self._invoke(ctx)
        except click.exceptions.Exit as exc:
            failed = exc.exit_code == EXIT_ERROR
            raise
        finally:
            sink = ctx.meta.get(_SINK_KEY)
            if isinstance(sink, LogSink):
                if failed and not sink.live:
                    sink.discard()
                else:
                    sink.release()

    def _invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.NoSuchOption as exc:
            hint = self._global_option_hint(ctx, exc.option_name)
            if hint is None:
                raise
            message = f"{exc.message} {hint}"
            raise click.NoSuchOption(exc.option_name, message=message, ctx=exc.ctx) from None
        except BrokenPipeError:  # `offloader ... | head`: stop quietly
            sys.stderr.close()
            ctx.exit(EXIT_ERROR)
        except (OffloaderError, OSError) as exc:
            obj = ctx.find_object(CliContext)
            if obj is not None and obj.verbose:
                click.echo(redact(traceback.format_exc()).rstrip("\n"), err=True)
            click.echo(f"error: {redact(_one_line(exc))}", err=True)
            ctx.exit(EXIT_ERROR)

    def _global_option_hint(self, ctx: click.Context, name: str) -> str | None:
        """``NAME is a global option: ...`` when NAME is one of this group's options."""
        option = self._global_option(name)
        if option is None or ctx.parent is not None:
            return None
        args = list(ctx.meta.get(_ARGS_KEY, ()))
        moved = _take_option(args, name, option)
        if moved is None:
            example = f"{ctx.command_path} {name} COMMAND ..."
        else:
            example = " ".join([ctx.command_path, *moved, *args])
        return f"{name} is a global option: put it before the command, as in `{redact(example)}`."

    def _global_option(self, name: str) -> click.Option | None:
        for param in self.params:
            names = [*param.opts, *param.secondary_opts]
            if isinstance(param, click.Option) and name in names and "--help" not in names:
                return param
        return None


def _take_option(args: list[str], name: str, option: click.Option) -> list[str] | None:
    """Remove the last use of option NAME from ARGS (with its value) and return it."""
    takes_value = not (option.is_flag or option.count)
    limit = args.index("--") if "--" in args else len(args)  # after "--": arguments
    for i in range(limit - 1, -1, -1):
        arg = args[i]
        if arg == name and takes_value and i + 1 == limit:  # its value is missing
            del args[i]
            return [name, option.metavar or "VALUE"]
        if arg == name:
            end = i + 2 if takes_value else i + 1
        elif name.startswith("--") and arg.startswith(name + "="):
            end = i + 1
        elif len(name) == 2 and arg.startswith("-") and set(arg[1:]) == {name[1]}:
            end = i + 1  # -vv
        else:
            continue
        moved = args[i:end]
        del args[i:end]
        return moved
    return None


@click.group(cls=OffloaderGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--home",
    type=click.Path(file_okay=False, path_type=Path),
    default=DEFAULT_HOME,
    envvar="OFFLOADER_HOME",
    metavar="DIR",
    help="State directory: metadata, local ledgers, offloader.toml, the default object store "
    "(default: $OFFLOADER_HOME, else ./.offloader).",
)
@click.option(
    "--store",
    "store_url",
    metavar="URL",
    envvar="OFFLOADER_STORE",
    help="Object store: s3://bucket[/prefix], gs://bucket[/prefix], az://container[/prefix], "
    "file:///abs/path or a directory path (default: $OFFLOADER_STORE, else store in "
    "offloader.toml, else file://<home>/objects).",
)
@click.option(
    "--metadata",
    "metadata_url",
    metavar="URL",
    envvar="OFFLOADER_METADATA",
    help="Metadata store shared by several brokers: postgresql://user@host:port/db (default: "
    "$OFFLOADER_METADATA, else metadata in offloader.toml, else SQLite in <home>/metadata.db).",
)
@click.option(
    "--pulsar-metadata",
    metavar="URL",
    envvar="OFFLOADER_PULSAR_METADATA",
    help="A real Pulsar cluster's metadata store, read only: zk:host:port[,host:port][/chroot] "
    "(default: $OFFLOADER_PULSAR_METADATA, else pulsar_metadata in offloader.toml). topics "
    "list|info|read, export run and objects orphans|gc then work on that cluster's topics.",
)
@click.option(
    "--endpoint-url",
    metavar="URL",
    help="S3 endpoint: MinIO, Ceph RGW, moto (default: endpoint_url in offloader.toml, else "
    "$AWS_ENDPOINT_URL_S3 or $AWS_ENDPOINT_URL).",
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
    metadata_url: str | None,
    pulsar_metadata: str | None,
    endpoint_url: str | None,
    json_output: bool,
    log_format: str,
    verbose: int,
    quiet: int,
) -> None:
    """Offload closed ledgers to S3 in Apache Pulsar's tiered-storage format.

    Global options go before the command. A command's settings options override the
    [broker] table of <home>/offloader.toml, which overrides Pulsar's defaults.

    \b
    Examples:
      offloader namespaces create public/default
      offloader namespaces set-offload-threshold public/default --size 10M
      offloader topics produce persistent://public/default/t1 --file events.txt
      offloader topics offload-prefix persistent://public/default/t1 --size-threshold 1M
      offloader --json topics read persistent://public/default/t1 --count 10
      offloader --store s3://my-bucket/offload objects verify --verify-checksums
    """
    obj = CliContext(
        home=home,
        store_url=store_url,
        metadata_url=metadata_url,
        pulsar_metadata=pulsar_metadata,
        endpoint_url=endpoint_url,
        json=json_output,
        log_format=log_format,
        verbosity=verbose - quiet,
    )
    ctx.obj = obj
    # log lines are held until the command ends (dropped if it fails), except with -v and for
    # the long-running service (not a `service run --once`)
    args = ctx.meta.get(_ARGS_KEY, ())
    service = ctx.invoked_subcommand == "service" and "--once" not in args
    sink = LogSink(live=obj.verbose or service)
    ctx.meta[_SINK_KEY] = sink
    configure(json=log_format == "json", level=obj.log_level, file=sink)


cli.add_command(topics)
cli.add_command(namespaces)
cli.add_command(objects)
cli.add_command(service)
cli.add_command(keys)
cli.add_command(kafka)
cli.add_command(brokers)
cli.add_command(export)
cli.add_command(metadata)


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point."""
    cli.main(args=argv, prog_name="offloader")


if __name__ == "__main__":  # pragma: no cover
    main()
