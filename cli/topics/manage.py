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
  offloaded, local_deleted, uuid, offloaded_ms}], trimmed_before_offload: [the same, for the
  ledgers retention trimmed before they were offloaded]}``
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

import time
from typing import Any

import click

from cli.cluster import cluster_url, echo_cluster_info, open_cluster
from cli.context import CliContext, pass_cli
from cli.params import POSITION, SIZE
from cli.render import (
    Progress,
    echo_json,
    echo_table,
    plural,
    progress_enabled,
)
from cli.settings import (
    offload_options,
    open_offloader,
)
from offloader.api import (
    OffloadTrigger,
    Position,
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


# --- list / info / delete ------------------------------------------------------------------
@click.command("list")
@click.argument("namespace", required=False)
@pass_cli
def list_topics(cli: CliContext, namespace: str | None) -> None:
    """List topics, of NAMESPACE (tenant/ns) or all.

    With --pulsar-metadata: the Pulsar cluster's topics (each partition of a partitioned
    topic is a topic of its own, NAME-partition-N).

    \b
    Examples:
      offloader topics list
      offloader --json topics list public/default
      offloader --pulsar-metadata zk:zk1:2181/pulsar topics list public/default
    """
    if cluster_url(cli) is not None:
        with open_cluster(cli) as cluster:
            names = cluster.list_topics(namespace)
    else:
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
        "trimmed_before_offload": [ledger_record(r) for r in info.trimmed_before_offload],
    }


@click.command()
@click.argument("topic")
@pass_cli
def info(cli: CliContext, topic: str) -> None:
    """Show TOPIC's ledgers: entries, size, state, offloaded, local copy deleted, UUID.

    Like pulsar-admin topics stats-internal, reduced to what offloading needs. Ledgers that
    retention trimmed before they were offloaded (their entries are in no tier) are listed
    after the table ("trimmed before offload").

    With --pulsar-metadata: the cluster's managed ledger of TOPIC (of each partition, for a
    partitioned topic): each ledger's entries, size, whether its offload is complete (or only
    started), whether BookKeeper deleted it, its UUID and the bucket the broker used.

    \b
    Examples:
      offloader topics info persistent://public/default/t1
      offloader --json topics info t1 | jq '.ledgers[] | select(.offloaded)'
      offloader --pulsar-metadata zk:zk1:2181 topics info persistent://public/default/orders
    """
    if cluster_url(cli) is not None:
        with open_cluster(cli) as cluster:
            echo_cluster_info(cli, cluster.topic_info(topic), cluster.location)
        return
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
    trimmed = topic_info.trimmed_before_offload
    if trimmed:
        ids = ", ".join(str(r.ledger_id) for r in trimmed)
        entries = sum(r.entries for r in trimmed)
        size = format_size(sum(r.size_bytes for r in trimmed))
        click.echo("")
        click.echo(
            f"trimmed before offload: {plural(len(trimmed), 'ledger')} ({ids}), "
            f"{plural(entries, 'entry', 'entries')}, {size}: retention removed them before "
            "they were offloaded; their entries are in no tier"
        )


@click.command()
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


@click.command("offload-prefix")
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


@click.command("offload-status")
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
