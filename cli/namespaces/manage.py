"""``offloader namespaces``: create namespaces and set their offload and retention policies.

Flags and output mirror ``pulsar-admin namespaces``:
``get-offload-threshold`` prints ``offloadThresholdInBytes: X`` and
``offloadThresholdInSeconds: Y``; ``get-offload-deletion-lag`` prints ``<minutes> minute(s)``
(``<seconds> second(s)`` or ``<ms> ms`` when the lag is not a whole number of minutes, where
Pulsar would round down, to ``0 minute(s)`` for ``30s``) or ``Unset for namespace. Defaulting
to broker setting.``; ``get-retention`` (like ``set-retention``) prints
``retentionSizeInBytes: X`` and ``retentionTimeInSeconds: Y``; ``get-policies`` prints JSON. The
read priority is shown with Pulsar's names, ``tiered-storage-first`` or ``bookkeeper-first``.

JSON objects (``--json``, one per line): ``{namespace, created_ms, policies}`` for ``create``
and each namespace of ``list``; ``{namespace, policies}`` for the setters and ``get-policies``;
``{namespace, offload_threshold_bytes, offload_threshold_seconds}`` for
``get-offload-threshold``; ``{namespace, offload_deletion_lag_ms}`` (null when unset) for
``get-offload-deletion-lag``; ``{namespace, retention_size_bytes, retention_time_seconds}`` for
``get-retention``. ``policies`` holds :class:`~offloader.policies.NamespacePolicies`' fields.

``set-offload-threshold`` and ``set-retention`` warn when the retention size (time) is not above
the offload size (time) threshold: retention would trim ledgers before the threshold offloads
them (:func:`~offloader.policies.retention_warnings`). The policy is set all the same; text mode
prints each warning as a ``warning: ...`` line on stderr, and ``--json`` adds ``warnings`` (a
list of sentences, empty when there is none) to the record.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import click

from cli.context import CliContext, pass_cli
from cli.params import DURATION_OR_MINUS_ONE, SIZE_OR_MINUS_ONE
from cli.render import echo_json, echo_table
from cli.settings import open_offloader
from offloader.metadata.base import NamespaceRecord
from offloader.policies import NamespacePolicies, retention_warnings


def policies_record(policies: NamespacePolicies) -> dict[str, Any]:
    return dataclasses.asdict(policies)


def namespace_record(record: NamespaceRecord) -> dict[str, Any]:
    return {
        "namespace": record.name,
        "created_ms": record.created_ms,
        "policies": policies_record(record.policies),
    }


def _echo_policies(
    cli: CliContext,
    namespace: str,
    policies: NamespacePolicies,
    text: str,
    *,
    warn: bool = False,
) -> None:
    """The setters' output; ``warn``: with the retention-vs-threshold warnings (stderr in text
    mode, a ``warnings`` list in the JSON record)."""
    warnings = retention_warnings(policies) if warn else ()
    if cli.json:
        record: dict[str, Any] = {"namespace": namespace, "policies": policies_record(policies)}
        if warn:
            record["warnings"] = list(warnings)
        echo_json(record)
        return
    click.echo(text)
    for warning in warnings:
        click.echo(f"warning: {warning}", err=True)


@click.command()
@click.argument("namespace")
@pass_cli
def create(cli: CliContext, namespace: str) -> None:
    """Create NAMESPACE (tenant/ns) with default policies.

    \b
    Example:
      offloader namespaces create my-tenant/my-ns
    """
    with open_offloader(cli) as offloader:
        record = offloader.create_namespace(namespace)
    if cli.json:
        echo_json(namespace_record(record))
    else:
        click.echo(f"Created namespace {record.name}")


@click.command("list")
@pass_cli
def list_namespaces(cli: CliContext) -> None:
    """List namespaces with their offload thresholds and deletion lag.

    \b
    Examples:
      offloader namespaces list
      offloader --json namespaces list
    """
    with open_offloader(cli, read_only=True) as offloader:
        records = offloader.list_namespaces()
    if cli.json:
        for record in records:
            echo_json(namespace_record(record))
        return
    echo_table(
        ("NAMESPACE", "OFFLOAD_THRESHOLD", "THRESHOLD_SECONDS", "DELETION_LAG_MS"),
        [
            (
                r.name,
                r.policies.offload_threshold_bytes,
                r.policies.offload_threshold_seconds,
                r.policies.offload_deletion_lag_ms,
            )
            for r in records
        ],
    )


@click.command("set-offload-threshold")
@click.argument("namespace")
@click.option(
    "-s",
    "--size",
    type=SIZE_OR_MINUS_ONE,
    required=True,
    help="Bytes to keep local before automatic offload (e.g. 10M, 5G; 0 = offload as soon "
    "as possible; -1 = off).",
)
@click.option(
    "-t",
    "--time",
    "seconds",
    type=DURATION_OR_MINUS_ONE,
    default="-1",
    show_default=True,
    help="Also offload ledgers closed this long ago (e.g. 1h, 2d; -1 = off).",
)
@pass_cli
def set_offload_threshold(cli: CliContext, namespace: str, size: int, seconds: int) -> None:
    """Set NAMESPACE's automatic offload thresholds.

    When a ledger closes (and on every service pass), the newest closed ledgers up to SIZE
    stay local and older ones are offloaded; with --time, ledgers closed longer ago are
    offloaded too. Warns when the namespace's retention is not above a threshold: retention
    runs first and would trim ledgers before they are offloaded.

    \b
    Examples:
      offloader namespaces set-offload-threshold public/default --size 10M
      offloader namespaces set-offload-threshold public/default --size -1 --time 1h
    """
    with open_offloader(cli) as offloader:
        policies = offloader.set_offload_threshold(namespace, size, seconds)
    _echo_policies(
        cli,
        namespace,
        policies,
        f"offloadThresholdInBytes: {policies.offload_threshold_bytes}\n"
        f"offloadThresholdInSeconds: {policies.offload_threshold_seconds}",
        warn=True,
    )


@click.command("get-offload-threshold")
@click.argument("namespace")
@pass_cli
def get_offload_threshold(cli: CliContext, namespace: str) -> None:
    """Show NAMESPACE's automatic offload thresholds (-1 = off).

    \b
    Example:
      offloader namespaces get-offload-threshold public/default
    """
    with open_offloader(cli, read_only=True) as offloader:
        policies = offloader.get_policies(namespace)
    if cli.json:
        echo_json(
            {
                "namespace": namespace,
                "offload_threshold_bytes": policies.offload_threshold_bytes,
                "offload_threshold_seconds": policies.offload_threshold_seconds,
            }
        )
        return
    click.echo(f"offloadThresholdInBytes: {policies.offload_threshold_bytes}")
    click.echo(f"offloadThresholdInSeconds: {policies.offload_threshold_seconds}")


@click.command("set-offload-deletion-lag")
@click.argument("namespace")
@click.option(
    "-l",
    "--lag",
    type=DURATION_OR_MINUS_ONE,
    required=True,
    help="How long after an offload the local copy is deleted (e.g. 10m, 4h, 3d, 2w; "
    "0 = at the next service pass; -1 = never).",
)
@pass_cli
def set_offload_deletion_lag(cli: CliContext, namespace: str, lag: int) -> None:
    """Set how long NAMESPACE keeps local copies of offloaded ledgers.

    The service (offloader service run) deletes them once the lag has passed.

    \b
    Examples:
      offloader namespaces set-offload-deletion-lag public/default --lag 4h
      offloader namespaces set-offload-deletion-lag public/default --lag 0
    """
    lag_ms = lag * 1000 if lag >= 0 else -1
    with open_offloader(cli) as offloader:
        policies = offloader.set_offload_deletion_lag(namespace, lag_ms)
    _echo_policies(cli, namespace, policies, _lag_text(policies.offload_deletion_lag_ms))


def _lag_text(lag_ms: int | None) -> str:
    """Pulsar's ``N minute(s)``, exact: seconds (or ms) when not a whole number of minutes."""
    if lag_ms is None:
        return "Unset for namespace. Defaulting to broker setting."
    if lag_ms < 0:
        return "-1 (local copies are never deleted)"
    if lag_ms % 60_000 == 0:
        return f"{lag_ms // 60_000} minute(s)"
    if lag_ms % 1000 == 0:
        return f"{lag_ms // 1000} second(s)"
    return f"{lag_ms} ms"


@click.command("get-offload-deletion-lag")
@click.argument("namespace")
@pass_cli
def get_offload_deletion_lag(cli: CliContext, namespace: str) -> None:
    """Show NAMESPACE's offload deletion lag, in minutes (seconds if not whole minutes).

    \b
    Example:
      offloader namespaces get-offload-deletion-lag public/default
    """
    with open_offloader(cli, read_only=True) as offloader:
        policies = offloader.get_policies(namespace)
    if cli.json:
        echo_json(
            {"namespace": namespace, "offload_deletion_lag_ms": policies.offload_deletion_lag_ms}
        )
    else:
        click.echo(_lag_text(policies.offload_deletion_lag_ms))


@click.command("clear-offload-deletion-lag")
@click.argument("namespace")
@pass_cli
def clear_offload_deletion_lag(cli: CliContext, namespace: str) -> None:
    """Unset NAMESPACE's deletion lag: the broker default (4h) applies.

    \b
    Example:
      offloader namespaces clear-offload-deletion-lag public/default
    """
    with open_offloader(cli) as offloader:
        policies = offloader.set_offload_deletion_lag(namespace, None)
    _echo_policies(cli, namespace, policies, _lag_text(policies.offload_deletion_lag_ms))


@click.command("set-retention")
@click.argument("namespace")
@click.option(
    "-s",
    "--size",
    type=SIZE_OR_MINUS_ONE,
    help="Keep at most this much per topic, oldest ledgers trimmed first (e.g. 10G; "
    "0 or -1 = no limit). Default: unchanged.",
)
@click.option(
    "-t",
    "--time",
    "seconds",
    type=DURATION_OR_MINUS_ONE,
    help="Trim ledgers closed longer ago than this (e.g. 3d; 0 or -1 = no limit). "
    "Default: unchanged.",
)
@pass_cli
def set_retention(cli: CliContext, namespace: str, size: int | None, seconds: int | None) -> None:
    """Set NAMESPACE's retention: how much and how long topics keep their ledgers.

    Warns when the retention is not above the offload threshold of the same kind (size or
    time): ledgers would be trimmed before the threshold offloads them.

    \b
    Examples:
      offloader namespaces set-retention public/default --size 10G --time 7d
      offloader namespaces set-retention public/default --time -1
    """
    if size is None and seconds is None:
        raise click.UsageError("give --size, --time or both")
    with open_offloader(cli) as offloader:
        current = offloader.get_policies(namespace)
        policies = offloader.set_retention(
            namespace,
            current.retention_size_bytes if size is None else size,
            current.retention_time_seconds if seconds is None else seconds,
        )
    _echo_policies(cli, namespace, policies, _retention_text(policies), warn=True)


def _retention_text(policies: NamespacePolicies) -> str:
    return (
        f"retentionSizeInBytes: {policies.retention_size_bytes}\n"
        f"retentionTimeInSeconds: {policies.retention_time_seconds}"
    )


@click.command("get-retention")
@click.argument("namespace")
@pass_cli
def get_retention(cli: CliContext, namespace: str) -> None:
    """Show NAMESPACE's retention (0 or -1 = no limit).

    \b
    Example:
      offloader namespaces get-retention public/default
    """
    with open_offloader(cli, read_only=True) as offloader:
        policies = offloader.get_policies(namespace)
    if cli.json:
        echo_json(
            {
                "namespace": namespace,
                "retention_size_bytes": policies.retention_size_bytes,
                "retention_time_seconds": policies.retention_time_seconds,
            }
        )
    else:
        click.echo(_retention_text(policies))


@click.command("set-offloaded-read-priority")
@click.argument("namespace")
@click.option(
    "-p",
    "--priority",
    type=click.Choice(["tiered-storage-first", "bookkeeper-first", "local-first"]),
    required=True,
    help="Which copy reads use while both exist: S3 or the local one (local-first is the "
    "old name of bookkeeper-first).",
)
@pass_cli
def set_offloaded_read_priority(cli: CliContext, namespace: str, priority: str) -> None:
    """Set whether reads prefer S3 or the local copy of an offloaded ledger.

    \b
    Example:
      offloader namespaces set-offloaded-read-priority public/default -p bookkeeper-first
    """
    with open_offloader(cli) as offloader:
        policies = offloader.set_read_priority(namespace, priority)
    _echo_policies(cli, namespace, policies, f"offloadedReadPriority: {policies.read_priority}")


@click.command("get-policies")
@click.argument("namespace")
@pass_cli
def get_policies(cli: CliContext, namespace: str) -> None:
    """Print NAMESPACE's policies as JSON (one line with --json, indented otherwise).

    \b
    Example:
      offloader namespaces get-policies public/default
    """
    with open_offloader(cli, read_only=True) as offloader:
        policies = offloader.get_policies(namespace)
    record = {"namespace": namespace, "policies": policies_record(policies)}
    if cli.json:
        echo_json(record)
    else:
        click.echo(json.dumps(record["policies"], indent=2))
