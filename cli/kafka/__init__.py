"""``offloader kafka``: the group, and its commands from the modules beside it.

:mod:`cli.kafka.segments` (``upload``, ``status``, ``read``, the retention commands) and
:mod:`cli.kafka.transforms` (a topic's offload transform).
"""

from __future__ import annotations

import click

from cli.kafka import segments, transforms

__all__ = ["kafka"]


@click.group()
def kafka() -> None:
    """Tier Kafka log segments to the object store (KIP-405 style) and read them back.

    \b
    Examples:
      offloader kafka upload --log-dir /var/lib/kafka/data --once
      offloader kafka status orders --log-dir /var/lib/kafka/data
      offloader kafka read orders 0 --from-offset 1200 --count 10 --json
      offloader kafka set-retention orders --time 7d --size -1
      offloader kafka set-offload-transform orders --compression zstd --encryption aes-256-gcm
    """


kafka.add_command(segments.upload)
kafka.add_command(segments.status)
kafka.add_command(segments.read)
kafka.add_command(segments.set_retention)
kafka.add_command(segments.get_retention)
kafka.add_command(segments.apply_retention)
kafka.add_command(transforms.set_offload_transform)
kafka.add_command(transforms.get_offload_transform)
kafka.add_command(transforms.remove_offload_transform)
