"""Transform commands (spec/transforms.md): ``keys create|list`` and, added to the existing
groups, ``namespaces set-offload-transform|get-offload-transform`` and ``objects rekey``.

JSON (``--json``): ``{key_id, created, active}`` per key (never key bytes);
``{namespace, transform: {compression, level, encryption, key_id}}`` for the namespace commands.
"""

from __future__ import annotations

from typing import Any

import click

from cli.context import CliContext, pass_cli
from cli.namespaces import namespaces
from cli.objects import objects
from cli.params import transform_options, transform_record
from cli.render import echo_json, echo_table
from cli.settings import open_offloader
from offloader.api import KeyInfo, RekeyOutcome, TransformPolicy, create_key, list_keys

__all__ = ["keys", "namespaces", "objects"]


@click.group()
def keys() -> None:
    """Manage the key ring of key-encryption keys ($OFFLOADER_KEY_RING, else <home>/keys).

    Each encrypted object gets a fresh data key, wrapped with the active key (or the
    namespace's --key-id). Key bytes are never printed.

    \b
    Examples:
      offloader keys create k1 --activate
      offloader keys list
    """


def _key_record(info: KeyInfo) -> dict[str, Any]:
    return {"key_id": info.key_id, "created": info.created.isoformat(), "active": info.active}


@keys.command("create")
@click.argument("key_id", metavar="ID")
@click.option("--activate", is_flag=True, help="Make it the active key for new objects.")
@pass_cli
def create(cli: CliContext, key_id: str, activate: bool) -> None:
    """Add a fresh random 256-bit key ID to the key ring (created, mode 0600, if needed).

    The first key of a ring is active even without --activate. A new active key applies to
    objects written from now on; `objects rekey --to-key ID` moves existing ones.
    """
    info = create_key(cli.home, key_id, activate=activate)
    if cli.json:
        echo_json(_key_record(info))
    else:
        click.echo(f"Created key {info.key_id}" + (" (active)" if info.active else ""))


@keys.command("list")
@pass_cli
def list_command(cli: CliContext) -> None:
    """List the key ring's key ids, creation times and the active key (never key bytes)."""
    infos = list_keys(cli.home)
    if cli.json:
        for info in infos:
            echo_json(_key_record(info))
        return
    echo_table(
        ("ID", "CREATED", "ACTIVE"),
        [(i.key_id, i.created.isoformat(), "yes" if i.active else "no") for i in infos],
    )


def _echo_transform(cli: CliContext, namespace: str, policy: TransformPolicy) -> None:
    if cli.json:
        echo_json({"namespace": namespace, "transform": transform_record(policy)})
    else:
        click.echo(f"offloadTransform: {policy.describe()}")


@namespaces.command("set-offload-transform")
@click.argument("namespace")
@transform_options("namespace", "object", "entries that are already compressed")
@pass_cli
def set_offload_transform(
    cli: CliContext,
    namespace: str,
    compression: str,
    level: int | None,
    encryption: str,
    key_id: str | None,
) -> None:
    """Set how NAMESPACE's new data objects are stored: chunked, compressed and/or encrypted.

    Objects written before keep their format; `none`/`none` writes Pulsar's format, byte for
    byte. Transformed objects are refused by Pulsar's reader ("Invalid object version").

    \b
    Examples:
      offloader namespaces set-offload-transform public/default --compression zstd \\
          --encryption aes-256-gcm --key-id k1
      offloader namespaces set-offload-transform public/default --compression none
    """
    policy = TransformPolicy(compression, level, encryption, key_id)
    with open_offloader(cli) as offloader:
        policies = offloader.set_offload_transform(namespace, policy)
    _echo_transform(cli, namespace, policies.transform)


@namespaces.command("get-offload-transform")
@click.argument("namespace")
@pass_cli
def get_offload_transform(cli: CliContext, namespace: str) -> None:
    """Show NAMESPACE's offload transform (`none` when objects are plain)."""
    with open_offloader(cli, read_only=True) as offloader:
        policies = offloader.get_policies(namespace)
    _echo_transform(cli, namespace, policies.transform)


def _rekey_record(o: RekeyOutcome) -> dict[str, Any]:
    return {
        "topic": o.topic,
        "ledger_id": o.ledger_id,
        "uuid": o.uuid,
        "from_key": o.from_key,
        "to_key": o.to_key,
        "action": o.action,
    }


@objects.command("rekey")
@click.option("--to-key", "to_key", required=True, metavar="ID", help="The key to wrap with.")
@click.option("--dry-run", is_flag=True, help="Report what would change; write nothing.")
@pass_cli
def rekey(cli: CliContext, to_key: str, dry_run: bool) -> None:
    """Re-wrap the data keys of encrypted offloaded objects with key ID.

    Only the small index objects are rewritten (never the data); safe to interrupt and re-run.
    Make ID the active key too (`keys create ID --activate`) so that new objects use it.

    \b
    Example:
      offloader objects rekey --to-key k2
    """
    with open_offloader(cli) as offloader:
        outcomes = offloader.rekey(to_key, dry_run=dry_run)
    if cli.json:
        for o in outcomes:
            echo_json(_rekey_record(o))
        return
    echo_table(
        ("TOPIC", "LEDGER", "UUID", "FROM_KEY", "ACTION"),
        [(o.topic, o.ledger_id, o.uuid, o.from_key or "-", o.action) for o in outcomes],
    )
    changed = sum(o.action == "rekeyed" for o in outcomes)
    verb = "would be rekeyed" if dry_run else "rekeyed"
    click.echo(f"{changed} of {len(outcomes)} offloaded ledger(s) {verb} to key {to_key}")
