"""``offloader metadata``: the group, and ``rebuild`` from :mod:`cli.metadata.rebuild`."""

from __future__ import annotations

import click

from cli.metadata import rebuild

__all__ = ["metadata"]


@click.group()
def metadata() -> None:
    """Rebuild the metadata store from the object store (disaster recovery).

    \b
    Examples:
      offloader --home new-home --store s3://bucket/prefix metadata rebuild --dry-run
      offloader --home new-home --store s3://bucket/prefix metadata rebuild
    """


metadata.add_command(rebuild.rebuild)
