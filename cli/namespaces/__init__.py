"""``offloader namespaces``: the group, and its commands from the modules beside it.

:mod:`cli.namespaces.manage` (``create``, ``list``, the offload and retention policies) and
:mod:`cli.namespaces.transform` (``set-offload-transform``, ``get-offload-transform``).
"""

from __future__ import annotations

import click

from cli.namespaces import manage, transform

__all__ = ["namespaces"]


@click.group()
def namespaces() -> None:
    """Create namespaces and set their offload and retention policies.

    \b
    Examples:
      offloader namespaces create public/default
      offloader namespaces set-offload-threshold public/default --size 10M
      offloader namespaces set-offload-deletion-lag public/default --lag 4h
      offloader namespaces get-policies public/default
      offloader namespaces get-retention public/default
    """


namespaces.add_command(manage.create)
namespaces.add_command(manage.list_namespaces)
namespaces.add_command(manage.set_offload_threshold)
namespaces.add_command(manage.get_offload_threshold)
namespaces.add_command(manage.set_offload_deletion_lag)
namespaces.add_command(manage.get_offload_deletion_lag)
namespaces.add_command(manage.clear_offload_deletion_lag)
namespaces.add_command(manage.set_retention)
namespaces.add_command(manage.get_retention)
namespaces.add_command(manage.set_offloaded_read_priority)
namespaces.add_command(manage.get_policies)
namespaces.add_command(transform.set_offload_transform)
namespaces.add_command(transform.get_offload_transform)
