"""``offloader topics``: produce, list, inspect, offload, read back and delete topics.

Mirrors ``pulsar-admin topics``: ``offload-prefix`` (``pulsar-admin topics offload``) prints
``Offload triggered for <topic> for messages before <ledger>:0:-1`` or ``Nothing to offload``
and then runs the offload in the foreground; ``offload-status`` prints Pulsar's four status
lines. Each command parses, calls :class:`~offloader.api.Offloader` and renders.

JSON objects (``--json``, one per line):

* produce: ``{topic, entries, bytes, first, last, ledgers_closed, ledgers_offloaded}`` (plus
  ``messages`` with ``--format pulsar``)
* list: ``{topic}`` per topic
* info: ``{topic, managed_ledger_name, entries, size_bytes, offloaded_size_bytes,
  local_size_bytes, ledgers: [{ledger_id, entries, size_bytes, state, created_ms, closed_ms,
  offloaded, local_deleted, uuid, offloaded_ms}]}``
* offload-prefix: ``{topic, triggered, message_id, position, ledgers, offloaded, failed}``
* offload-status: ``{topic, status, last_error, updated_ms}``
* read: ``{topic, ledger_id, entry_id, length, sha256, tier, verified[, payload_b64]}`` per
  entry (``verified``: its bytes were checked before it was printed; false for an offloaded
  object without span CRC32Cs, whose blocks are checked only at their end); with ``--decode
  pulsar`` one per message: ``{topic, message_id, ledger_id, entry_id, batch_index, key,
  ordering_key_b64, properties, publish_time, event_time, producer_name, sequence_id, is_null,
  encrypted, value_b64}`` (times in ms since the epoch)
* delete: ``{topic, deleted}``
"""

from __future__ import annotations

import base64
import hashlib
import random
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import click
from click.core import ParameterSource

from cli.context import CliContext, pass_cli
from cli.params import POSITION, SIZE
from cli.render import (
    PAYLOAD_TEXT_LIMIT,
    Progress,
    echo_json,
    echo_table,
    plural,
    progress_enabled,
    safe_bytes,
)
from cli.settings import (
    offload_options,
    open_offloader,
    option_overrides,
    read_options,
    resolve_settings,
    rollover_options,
)
from cli.topics_messages import message_options, read_messages
from offloader.api import (
    EntryRecord,
    OffloadTrigger,
    Position,
    ProduceResult,
    TopicInfo,
)
from offloader.errors import OffloadError
from offloader.metadata.base import LedgerRecord, TopicOffloadStatus
from offloader.units import format_size

#: seconds between polls of ``offload-status --wait-complete`` (Pulsar: 1 s)
STATUS_POLL_SECONDS = 1.0

STATUS_TEXT = {
    "NOT_RUN": "Offload has not been run for {topic} since broker startup",
    "RUNNING": "Offload is currently running",
    "SUCCESS": "Offload was a success",
    "ERROR": "Error in offload",
}


@click.group()
def topics() -> None:
    """Produce to topics, offload their ledgers, read them back.

    Topic names are persistent://tenant/namespace/topic (tenant/ns/topic and a bare
    topic, meaning persistent://public/default/topic, work too).

    \b
    Examples:
      offloader namespaces create public/default
      offloader topics produce my-topic --synthetic 10000 --size 1K
      offloader topics offload-prefix my-topic --size-threshold 1M
      offloader topics info my-topic
    """


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


@topics.command()
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


# --- list / info / delete ------------------------------------------------------------------
@topics.command("list")
@click.argument("namespace", required=False)
@pass_cli
def list_topics(cli: CliContext, namespace: str | None) -> None:
    """List topics, of NAMESPACE (tenant/ns) or all.

    \b
    Examples:
      offloader topics list
      offloader --json topics list public/default
    """
    with open_offloader(cli, read_only=True) as offloader:
        names = offloader.list_topics(namespace)
    for name in names:
        if cli.json:
            echo_json({"topic": name})
        else:
            click.echo(name)


def ledger_record(ledger: LedgerRecord) -> dict[str, Any]:
    """A ledger as ``topics info --json`` shows it."""
    offload = ledger.offload
    return {
        "ledger_id": ledger.ledger_id,
        "entries": ledger.entries,
        "size_bytes": ledger.size_bytes,
        "state": ledger.state,
        "created_ms": ledger.created_ms,
        "closed_ms": ledger.closed_ms,
        "offloaded": ledger.offload_complete,
        "local_deleted": ledger.local_deleted,
        "uuid": offload.uuid if offload is not None else None,
        "offloaded_ms": offload.timestamp_ms if offload is not None else None,
    }


def info_record(info: TopicInfo) -> dict[str, Any]:
    return {
        "topic": info.topic,
        "managed_ledger_name": info.managed_ledger_name,
        "entries": info.entries,
        "size_bytes": info.size_bytes,
        "offloaded_size_bytes": info.offloaded_size_bytes,
        "local_size_bytes": info.local_size_bytes,
        "owner": info.owner,
        "ledgers": [ledger_record(ledger) for ledger in info.ledgers],
    }


@topics.command()
@click.argument("topic")
@pass_cli
def info(cli: CliContext, topic: str) -> None:
    """Show TOPIC's ledgers: entries, size, state, offloaded, local copy deleted, UUID.

    Like pulsar-admin topics stats-internal, reduced to what offloading needs.

    \b
    Examples:
      offloader topics info persistent://public/default/t1
      offloader --json topics info t1 | jq '.ledgers[] | select(.offloaded)'
    """
    with open_offloader(cli, read_only=True) as offloader:
        topic_info = offloader.topic_info(topic)
    if cli.json:
        echo_json(info_record(topic_info))
        return
    click.echo(f"topic:          {topic_info.topic}")
    click.echo(f"managed ledger: {topic_info.managed_ledger_name}")
    click.echo(
        f"entries:        {topic_info.entries}, {format_size(topic_info.size_bytes)} "
        f"(offloaded {format_size(topic_info.offloaded_size_bytes)}, "
        f"local {format_size(topic_info.local_size_bytes)})"
    )
    if topic_info.owner is not None:
        click.echo(f"owner:          broker {topic_info.owner}")
    click.echo("")
    echo_table(
        ("LEDGER", "ENTRIES", "SIZE", "STATE", "OFFLOADED", "LOCAL_DELETED", "UUID"),
        [
            (
                ledger.ledger_id,
                ledger.entries,
                ledger.size_bytes,
                ledger.state,
                ledger.offload_complete,
                ledger.local_deleted,
                ledger.offload.uuid if ledger.offload is not None else None,
            )
            for ledger in topic_info.ledgers
        ],
    )


@topics.command()
@click.argument("topic")
@pass_cli
def delete(cli: CliContext, topic: str) -> None:
    """Delete TOPIC: its metadata, local ledgers and offloaded objects.

    \b
    Example:
      offloader topics delete persistent://public/default/t1
    """
    with open_offloader(cli) as offloader:
        offloader.delete_topic(topic)
    if cli.json:
        echo_json({"topic": topic, "deleted": True})
    else:
        click.echo(f"Deleted topic {topic}")


# --- offload -------------------------------------------------------------------------------
def trigger_record(trigger: OffloadTrigger) -> dict[str, Any]:
    position = trigger.position
    return {
        "topic": trigger.topic,
        "triggered": position is not None,
        "message_id": None if position is None else f"{position}:-1",
        "position": None if position is None else str(position),
        "ledgers": list(trigger.ledgers),
        "offloaded": list(trigger.offloaded),
        "failed": [{"ledger_id": lid, "error": error} for lid, error in trigger.failed],
    }


@topics.command("offload-prefix")
@click.argument("topic")
@click.option(
    "-s",
    "--size-threshold",
    type=SIZE,
    help="Keep at most this much data local (e.g. 10M, 5G); offload older ledgers.",
)
@click.option(
    "-m",
    "--position",
    type=POSITION,
    help="Offload the ledgers before this position, LEDGER:ENTRY (e.g. 12:0).",
)
@offload_options
@pass_cli
def offload_prefix(
    cli: CliContext,
    topic: str,
    size_threshold: int | None,
    position: Position | None,
) -> None:
    """Offload TOPIC's closed ledgers before a position, in the foreground.

    Give exactly one of --size-threshold (pulsar-admin topics offload -s) or --position.
    Prints "Offload triggered for TOPIC for messages before L:0:-1" or "Nothing to
    offload", like pulsar-admin; exits 1 if a ledger's offload failed.

    \b
    Examples:
      offloader topics offload-prefix persistent://public/default/t1 --size-threshold 10M
      offloader topics offload-prefix t1 --position 12:0
    """
    if (size_threshold is None) == (position is None):
        raise click.UsageError("give exactly one of --size-threshold or --position")
    with (
        open_offloader(cli) as offloader,
        Progress("offload", enabled=progress_enabled(cli)) as progress,
    ):
        trigger = offloader.offload_prefix(
            topic, position=position, size_threshold=size_threshold, progress=progress
        )
    if cli.json:
        echo_json(trigger_record(trigger))
    elif trigger.position is None:
        click.echo("Nothing to offload")
    else:
        click.echo(
            f"Offload triggered for {trigger.topic} for messages before {trigger.position}:-1"
        )
        if trigger.offloaded:
            click.echo("Offloaded ledgers: " + ", ".join(map(str, trigger.offloaded)))
        elif not trigger.failed:
            click.echo("Every ledger before that position is already offloaded")
    if trigger.failed:
        ledger_id, error = trigger.failed[0]
        more = f" (and {len(trigger.failed) - 1} more)" if len(trigger.failed) > 1 else ""
        raise OffloadError(f"offload of ledger {ledger_id} failed: {error}{more}")


def status_record(status: TopicOffloadStatus) -> dict[str, Any]:
    return {
        "topic": status.topic,
        "status": status.status,
        "last_error": status.last_error,
        "updated_ms": status.updated_ms,
    }


@topics.command("offload-status")
@click.argument("topic")
@click.option(
    "-w",
    "--wait-complete",
    is_flag=True,
    help="Wait (polling every second) while an offload is running.",
)
@pass_cli
def offload_status(cli: CliContext, topic: str, wait_complete: bool) -> None:
    """Show the status of TOPIC's last offload-prefix (pulsar-admin's wording).

    Exits 1 with the reason when the last offload failed.

    \b
    Examples:
      offloader topics offload-status persistent://public/default/t1
      offloader topics offload-status t1 --wait-complete
    """
    with open_offloader(cli, read_only=True) as offloader:
        status = offloader.offload_status(topic)
        while wait_complete and status.status == "RUNNING":
            time.sleep(STATUS_POLL_SECONDS)
            status = offloader.offload_status(topic)
    if cli.json:
        echo_json(status_record(status))
    else:
        click.echo(STATUS_TEXT[status.status].format(topic=status.topic))
    if status.status == "ERROR":
        raise OffloadError(f"Error offloading: {status.last_error}")


# --- read ----------------------------------------------------------------------------------
def entry_record(entry: EntryRecord, *, payload: bool) -> dict[str, Any]:
    record: dict[str, Any] = {
        "topic": entry.topic,
        "ledger_id": entry.ledger_id,
        "entry_id": entry.entry_id,
        "length": len(entry.payload),
        "sha256": hashlib.sha256(entry.payload).hexdigest(),
        "tier": entry.tier,
        "verified": entry.verified,
    }
    if payload:
        record["payload_b64"] = base64.b64encode(entry.payload).decode("ascii")
    return record


def entry_text(entry: EntryRecord, *, payload: bool) -> str:
    position = f"{entry.ledger_id}:{entry.entry_id}"
    digest = hashlib.sha256(entry.payload).hexdigest()
    line = f"{position:>14}  {len(entry.payload):>9}  {digest}  {entry.tier:<9}"
    if payload:
        line += "  " + safe_bytes(entry.payload)
    return line.rstrip()


@topics.command()
@click.argument("topic")
@click.option(
    "--from",
    "start",
    type=POSITION,
    help="First position to read, LEDGER:ENTRY (default: the topic's first entry); the "
    "ledger must be one of the topic's.",
)
@click.option("-n", "--count", type=click.IntRange(min=0), help="Read at most N entries.")
@click.option(
    "--payload",
    is_flag=True,
    help="Also print payloads: in text, printable ASCII as is and other bytes escaped "
    f"(\\n, \\xNN), at most the first {PAYLOAD_TEXT_LIMIT} bytes of each; with --json, "
    "whole, in base64.",
)
@click.option(
    "--decode",
    type=click.Choice(["pulsar"]),
    help="Decode entries as Pulsar messages: one line (or JSON object) per message with its "
    "id LEDGER:ENTRY:PARTITION:BATCH_INDEX, key, properties, publish and event time and "
    "value (escaped text; value_b64 with --json). --count then counts messages.",
)
@click.option(
    "--decrypt-key",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="With --decode pulsar: a PEM file with the RSA private key of encrypted messages "
    "(without it they are shown flagged, value as stored).",
)
@read_options
@pass_cli
def read(
    cli: CliContext,
    topic: str,
    start: Position | None,
    count: int | None,
    payload: bool,
    decode: str | None,
    decrypt_key: Path | None,
) -> None:
    """Read TOPIC's entries from whichever tier holds them (local disk or S3).

    Text: position, length, SHA-256 and tier per entry. --json: one object per entry
    with ledger_id, entry_id, length, sha256, tier, verified (and payload_b64 with --payload).
    Exits 1 if the topic does not exist or --from names a ledger it does not have.

    \b
    Examples:
      offloader topics read persistent://public/default/t1 --from 12:0 --count 10
      offloader --json topics read t1 --payload | jq -r .payload_b64
      offloader topics read t1 --decode pulsar --count 20
    """
    if decrypt_key is not None and decode is None:
        raise click.UsageError("--decrypt-key only applies to --decode pulsar")
    if decode is not None:
        if payload:
            raise click.UsageError("--payload does not apply to --decode (values are shown)")
        read_messages(cli, topic, start, count, decrypt_key)
        return
    enabled = progress_enabled(cli)
    with (
        open_offloader(cli, read_only=True) as offloader,
        Progress("read", enabled=enabled) as progress,
    ):
        # a missing topic or a --from in a ledger it lacks fails here, before any output
        entries = offloader.read(topic, start=start, count=count)
        if enabled and start is None and count is None:
            progress.total = offloader.topic_info(topic).size_bytes
        if not cli.json:
            click.echo(f"{'POSITION':>14}  {'LENGTH':>9}  {'SHA256':<64}  TIER")
        for entry in entries:
            if cli.json:
                echo_json(entry_record(entry, payload=payload))
            else:
                click.echo(entry_text(entry, payload=payload))
            progress.advance(len(entry.payload))
