"""``offloader objects rekey`` (spec/transforms.md): re-wrap the data keys of encrypted
offloaded objects with another key of the key ring.

JSON (``--json``): ``{topic, ledger_id, uuid, from_key, to_key, action}`` per offloaded ledger.
"""

from __future__ import annotations

from typing import Any

import click

from cli.context import CliContext, pass_cli
from cli.render import echo_json, echo_table
from cli.settings import open_offloader
from offloader.api import RekeyOutcome


def _rekey_record(o: RekeyOutcome) -> dict[str, Any]:
    return {
        "topic": o.topic,
        "ledger_id": o.ledger_id,
        "uuid": o.uuid,
        "from_key": o.from_key,
        "to_key": o.to_key,
        "action": o.action,
    }


@click.command("rekey")
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
