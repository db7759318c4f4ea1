"""``offloader keys``: the group, and ``create``/``list`` from :mod:`cli.keys.ring`."""

from __future__ import annotations

import click

from cli.keys import ring

__all__ = ["keys"]


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


keys.add_command(ring.create)
keys.add_command(ring.list_command)
