"""``offloader topics produce``: entries (or Pulsar-format messages) from a file, standard input
or a synthetic generator, appended to a topic's open ledger (rollover and automatic offload as
the broker settings say). JSON: see :mod:`cli.topics.manage`.
"""

from __future__ import annotations

import random
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import click
from click.core import ParameterSource

from cli.context import CliContext, pass_cli
from cli.params import SIZE
from cli.render import (
    Progress,
    echo_json,
    plural,
    progress_enabled,
)
from cli.settings import (
    offload_options,
    open_offloader,
    option_overrides,
    resolve_settings,
    rollover_options,
)
from cli.topics.messages import message_options
from offloader.api import (
    ProduceResult,
)
from offloader.units import format_size

# --- produce -------------------------------------------------------------------------------
#: random filler is drawn this many bytes at a time
_FILLER_CHUNK = 16 * 1024 * 1024


def synthetic_payloads(count: int, size: int, seed: int = 0) -> Iterator[bytes]:
    """``count`` deterministic payloads of ``size`` bytes: ``entry-<n> `` then random bytes."""
    rng = random.Random(seed)
    need = size + 4096
    if need <= _FILLER_CHUNK:
        filler = rng.randbytes(need)
    else:  # randbytes(n) overflows a C int above 256 MiB: draw it in chunks
        filler = b"".join(
            rng.randbytes(min(_FILLER_CHUNK, need - at)) for at in range(0, need, _FILLER_CHUNK)
        )
    for n in range(count):
        header = f"entry-{n:010d} ".encode()[:size]
        offset = (n * 131) % 4096
        yield header + filler[offset : offset + size - len(header)]


def line_payloads(stream: IO[bytes]) -> Iterator[bytes]:
    """One payload per line, without its ``\\n``."""
    for line in stream:
        yield line[:-1] if line.endswith(b"\n") else line


def _counted(payloads: Iterator[bytes], progress: Progress) -> Iterator[bytes]:
    for payload in payloads:
        yield payload
        progress.advance(len(payload))


def _produce_record(result: ProduceResult) -> dict[str, Any]:
    return {
        "topic": result.topic,
        "entries": result.entries,
        "bytes": result.bytes,
        "first": None if result.first is None else str(result.first),
        "last": None if result.last is None else str(result.last),
        "ledgers_closed": list(result.ledgers_closed),
        "ledgers_offloaded": list(result.ledgers_offloaded),
    }


@click.command()
@click.argument("topic")
@click.option(
    "--file",
    "file_path",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Read entries from this file, one per line (without its newline).",
)
@click.option(
    "--synthetic",
    type=click.IntRange(min=1),
    metavar="COUNT",
    help="Produce COUNT generated entries of --size bytes instead of reading input.",
)
@click.option(
    "--size",
    type=SIZE,
    default="1K",
    show_default=True,
    help="Entry size for --synthetic (e.g. 512, 4K); only with --synthetic.",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["raw", "pulsar"]),
    default="raw",
    show_default=True,
    help="raw: each input is one entry as is. pulsar: each input is one message value, "
    "written in Pulsar's entry format (metadata, checksum, batches, compression), as a "
    "Pulsar producer would.",
)
@click.option(
    "--batch-size",
    type=click.IntRange(min=1, max=100_000),
    help="With --format pulsar: messages per entry (a batch; 1 = non-batched entries). Default 1.",
)
@click.option(
    "--compression",
    type=click.Choice(["none", "lz4", "zlib", "zstd", "snappy"]),
    help="With --format pulsar: compress each entry's payload with this codec. Default none.",
)
@click.option("--key", help="With --format pulsar: the key of every message.")
@click.option(
    "--property",
    "properties",
    multiple=True,
    metavar="K=V",
    help="With --format pulsar: a property of every message (repeatable).",
)
@rollover_options
@offload_options
@pass_cli
def produce(
    cli: CliContext,
    topic: str,
    file_path: Path | None,
    synthetic: int | None,
    size: int,
    fmt: str,
    batch_size: int | None,
    compression: str | None,
    key: str | None,
    properties: tuple[str, ...],
) -> None:
    """Append entries to TOPIC, rolling ledgers over and auto-offloading as configured.

    Entries come from standard input (one per line, without its newline), from --file, or
    are generated with --synthetic. The topic is created if its namespace exists.

    \b
    Examples:
      printf 'hello\\nworld\\n' | offloader topics produce persistent://public/default/t1
      offloader topics produce t1 --file events.txt
      offloader topics produce t1 --synthetic 100000 --size 4K --max-entries-per-ledger 20000
      offloader topics produce t1 --synthetic 10000 --size 200 --format pulsar \\
          --batch-size 100 --compression lz4 --key sensor-1 --property site=lab
    """
    options = message_options(fmt, batch_size, compression, key, properties)
    if file_path is not None and synthetic is not None:
        raise click.UsageError("use either --file or --synthetic, not both")
    size_source = click.get_current_context().get_parameter_source("size")
    if synthetic is None and size_source not in (None, ParameterSource.DEFAULT):
        raise click.UsageError(
            "--size only applies to --synthetic: entries from standard input or --file keep "
            "their own length"
        )
    if synthetic is not None:
        offload = resolve_settings(cli, option_overrides()).broker.offload
        if size > offload.max_entry_size:
            raise click.BadParameter(
                f"{size} bytes is above the largest entry a {offload.max_block_size}-byte block "
                f"holds ({offload.max_entry_size} bytes): such an entry could never be "
                "offloaded; use a larger --max-block-size or a smaller --size",
                param_hint="'--size'",
            )
    enabled = progress_enabled(cli)
    messages: int | None = None
    with open_offloader(cli) as offloader, Progress("produce", enabled=enabled) as progress:

        def write(payloads: Iterator[bytes]) -> ProduceResult:
            nonlocal messages
            if options is None:
                return offloader.produce(topic, payloads)
            result, messages = offloader.produce_messages(topic, payloads, options)
            return result

        if synthetic is not None:
            progress.total = synthetic * size
            result = write(_counted(synthetic_payloads(synthetic, size), progress))
        elif file_path is not None:
            progress.total = file_path.stat().st_size
            with file_path.open("rb") as stream:
                result = write(_counted(line_payloads(stream), progress))
        else:
            result = write(_counted(line_payloads(sys.stdin.buffer), progress))
    if cli.json:
        record = _produce_record(result)
        if messages is not None:
            record["messages"] = messages
        echo_json(record)
        return
    span = "" if result.first is None else f": {result.first} .. {result.last}"
    what = plural(result.entries, "entry", "entries")
    if messages is not None:
        what = f"{plural(messages, 'message', 'messages')} in {what}"
    click.echo(f"Produced {what} ({format_size(result.bytes)}) to {result.topic}{span}")
    if result.ledgers_closed:
        click.echo("Ledgers closed: " + ", ".join(map(str, result.ledgers_closed)))
    if result.ledgers_offloaded:
        click.echo("Offloaded automatically: " + ", ".join(map(str, result.ledgers_offloaded)))
