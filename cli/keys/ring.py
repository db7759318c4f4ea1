"""Key-ring commands (spec/transforms.md): ``keys create|list``. The other transform commands
are ``namespaces set-offload-transform|get-offload-transform`` (:mod:`cli.namespaces.transform`)
and ``objects rekey`` (:mod:`cli.objects.rekey`).

JSON (``--json``): ``{key_id, created, active}`` per key (never key bytes).
"""

from __future__ import annotations

from typing import Any

import click

from cli.context import CliContext, pass_cli
from cli.render import echo_json, echo_table
from offloader.api import KeyInfo, create_key, list_keys

__all__ = ["create", "list_command"]


def _key_record(info: KeyInfo) -> dict[str, Any]:
    return {"key_id": info.key_id, "created": info.created.isoformat(), "active": info.active}


@click.command("create")
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


@click.command("list")
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
