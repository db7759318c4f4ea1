"""``offloader topics set-offload-policies | get-offload-policies | remove-offload-policies``.

A topic's own offload policies, over its namespace's (which are over the broker's): the size
and time thresholds of the automatic offload, the deletion lag of local copies and the read
priority. Shaped like ``pulsar-admin topics set-offload-policies`` (one command that sets the
topic's policies as a whole, Pulsar's ``-t``, ``-ts``, ``-dl``, ``-orp`` flags, with long names
of our own); an option not given is not set on the topic, and the namespace's value applies.
``get-offload-policies`` shows the topic's own (``(not set)`` / null where it sets none);
``--applied`` shows the values in force and where each comes from (topic, namespace, broker).

Text output uses Pulsar's field names (``offloadThresholdInBytes: X``). JSON (``--json``):
``{topic, offload_threshold_bytes, offload_threshold_seconds, offload_deletion_lag_ms,
read_priority}``, plus ``applied: true`` and ``sources: {field: topic|namespace|broker}`` with
``--applied``; ``remove-offload-policies`` prints ``{topic, removed: true}``.

``set-offload-policies`` warns when the namespace's retention size (time) is not above the
threshold of the same kind that now applies to the topic: retention would trim its ledgers
before they are offloaded (:func:`~offloader.policies.retention_warnings`). The policies are set
all the same; text mode prints ``warning: ...`` lines on stderr, ``--json`` adds ``warnings``.
"""

from __future__ import annotations

from typing import Any

import click

from cli.context import CliContext, pass_cli
from cli.params import DURATION_OR_MINUS_ONE, SIZE_OR_MINUS_ONE
from cli.render import echo_json
from cli.settings import open_offloader
from offloader.api import AppliedOffloadPolicies, TopicPolicies
from offloader.policies import retention_warnings

#: our field -> Pulsar's name in its OffloadPolicies
PULSAR_NAMES = {
    "offload_threshold_bytes": "offloadThresholdInBytes",
    "offload_threshold_seconds": "offloadThresholdInSeconds",
    "offload_deletion_lag_ms": "offloadDeletionLagInMillis",
    "read_priority": "offloadedReadPriority",
}

_PRIORITIES = click.Choice(["tiered-storage-first", "bookkeeper-first", "local-first"])


def _record(topic: str, policies: TopicPolicies | AppliedOffloadPolicies) -> dict[str, Any]:
    record: dict[str, Any] = {"topic": topic}
    record.update({field: getattr(policies, field) for field in PULSAR_NAMES})
    if isinstance(policies, AppliedOffloadPolicies):
        record["applied"] = True
        record["sources"] = dict(policies.sources)
    return record


def _text(policies: TopicPolicies | AppliedOffloadPolicies) -> str:
    lines = []
    for field, pulsar_name in PULSAR_NAMES.items():
        value = getattr(policies, field)
        if isinstance(policies, AppliedOffloadPolicies):
            shown = "never" if value is None else str(value)
            lines.append(f"{pulsar_name}: {shown} (from {policies.sources[field]})")
        else:
            lines.append(f"{pulsar_name}: {'(not set)' if value is None else value}")
    return "\n".join(lines)


@click.command("set-offload-policies")
@click.argument("topic")
@click.option(
    "-t",
    "--offload-after-threshold",
    "size",
    type=SIZE_OR_MINUS_ONE,
    help="Offload automatically once the topic's closed ledgers hold more than this (10M; "
    "0: every closed ledger; -1: off).",
)
@click.option(
    "-ts",
    "--offload-after-threshold-in-seconds",
    "seconds",
    type=DURATION_OR_MINUS_ONE,
    help="Offload ledgers closed longer ago than this (1h; -1: off).",
)
@click.option(
    "-dl",
    "--offload-deletion-lag",
    "lag",
    type=DURATION_OR_MINUS_ONE,
    help="Delete local copies this long after their offload (4h; 0: at once; -1: never).",
)
@click.option(
    "-orp",
    "--offloaded-read-priority",
    "priority",
    type=_PRIORITIES,
    help="Which copy reads use while both exist.",
)
@pass_cli
def set_offload_policies(
    cli: CliContext,
    topic: str,
    size: int | None,
    seconds: int | None,
    lag: int | None,
    priority: str | None,
) -> None:
    """Set TOPIC's own offload policies, over its namespace's.

    Replaces what the topic set before: an option not given is not set on the topic, so the
    namespace's value applies to it. Warns when the namespace's retention is not above a
    threshold that applies: its ledgers would be trimmed before they are offloaded.

    \b
    Examples:
      offloader topics set-offload-policies my-topic -t 10M -dl 1h
      offloader topics set-offload-policies my-topic --offloaded-read-priority bookkeeper-first
    """
    if size is None and seconds is None and lag is None and priority is None:
        raise click.UsageError(
            "give at least one policy (-t, -ts, -dl, -orp); remove-offload-policies drops "
            "the topic's policies"
        )
    policies = TopicPolicies(
        offload_threshold_bytes=size,
        offload_threshold_seconds=seconds,
        offload_deletion_lag_ms=None if lag is None else (lag * 1000 if lag >= 0 else -1),
        read_priority=priority,
    )
    with open_offloader(cli) as offloader:
        saved = offloader.set_topic_policies(topic, policies)
        topic_name = offloader.topic_name(topic)
        applied = saved.over(offloader.get_policies(topic_name.namespace))
    warnings = retention_warnings(applied)
    if cli.json:
        echo_json({**_record(str(topic_name), saved), "warnings": list(warnings)})
        return
    click.echo(_text(saved))
    for warning in warnings:
        click.echo(f"warning: {warning}", err=True)


@click.command("get-offload-policies")
@click.argument("topic")
@click.option(
    "-ap",
    "--applied",
    is_flag=True,
    help="The policies in force (topic, else namespace, else broker) and where each is from.",
)
@pass_cli
def get_offload_policies(cli: CliContext, topic: str, applied: bool) -> None:
    """Show TOPIC's own offload policies (or, with --applied, the ones in force).

    \b
    Examples:
      offloader topics get-offload-policies my-topic
      offloader --json topics get-offload-policies my-topic --applied
    """
    with open_offloader(cli, read_only=True) as offloader:
        policies: TopicPolicies | AppliedOffloadPolicies
        if applied:
            policies = offloader.applied_topic_policies(topic)
        else:
            policies = offloader.get_topic_policies(topic)
        name = str(offloader.topic_name(topic))
    if cli.json:
        echo_json(_record(name, policies))
    else:
        click.echo(_text(policies))


@click.command("remove-offload-policies")
@click.argument("topic")
@pass_cli
def remove_offload_policies(cli: CliContext, topic: str) -> None:
    """Drop TOPIC's own offload policies: its namespace's apply again.

    \b
    Example:
      offloader topics remove-offload-policies my-topic
    """
    with open_offloader(cli) as offloader:
        offloader.remove_topic_policies(topic)
        name = str(offloader.topic_name(topic))
    if cli.json:
        echo_json({"topic": name, "removed": True})
    else:
        click.echo(f"Removed the offload policies of {name}")
