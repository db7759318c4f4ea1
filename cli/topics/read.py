"""``offloader topics read``: a topic's entries from whichever tier holds each ledger, or with
``--decode pulsar`` its messages (:mod:`cli.topics.messages`). JSON: see
:mod:`cli.topics.manage`.
"""

from __future__ import annotations

import base64
import hashlib
from pathlib import Path
from typing import Any

import click

from cli.cluster import cluster_url, open_cluster
from cli.context import CliContext, pass_cli
from cli.params import POSITION
from cli.render import (
    PAYLOAD_TEXT_LIMIT,
    Progress,
    echo_json,
    progress_enabled,
    safe_bytes,
)
from cli.settings import (
    open_offloader,
    read_options,
)
from cli.topics.messages import read_cluster_messages, read_messages
from offloader.api import (
    EntryRecord,
    Position,
)


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


@click.command()
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

    With --pulsar-metadata: the cluster topic's offloaded ledgers (decoded with --decode
    pulsar), in the managed ledger's order, from the bucket each ledger's offload context
    names (--store reads them all from one store instead); ledgers not offloaded (still only
    in BookKeeper) are skipped with a warning.

    \b
    Examples:
      offloader topics read persistent://public/default/t1 --from 12:0 --count 10
      offloader --json topics read t1 --payload | jq -r .payload_b64
      offloader topics read t1 --decode pulsar --count 20
      offloader --pulsar-metadata zk:zk1:2181 topics read orders-partition-0 --from 12:0 -n 5
    """
    if decrypt_key is not None and decode is None:
        raise click.UsageError("--decrypt-key only applies to --decode pulsar")
    if cluster_url(cli) is not None:
        if decode is not None:
            if payload:
                raise click.UsageError("--payload does not apply to --decode (values are shown)")
            read_cluster_messages(cli, topic, start, count, decrypt_key)
            return
        with open_cluster(cli) as cluster:
            at = None if start is None else (start.ledger_id, start.entry_id)
            entries = cluster.read(topic, start=at, count=count)
            if not cli.json:
                click.echo(f"{'POSITION':>14}  {'LENGTH':>9}  {'SHA256':<64}  TIER")
            for entry in entries:
                if cli.json:
                    echo_json(entry_record(entry, payload=payload))
                else:
                    click.echo(entry_text(entry, payload=payload))
        return
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
