"""``offloader brokers``: the group, and ``list`` from :mod:`cli.brokers.cluster`."""

from __future__ import annotations

import click

from cli.brokers import cluster

__all__ = ["brokers"]


@click.group()
def brokers() -> None:
    """The brokers sharing the metadata store (--metadata postgresql://...)."""


brokers.add_command(cluster.list_brokers)
