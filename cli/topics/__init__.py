"""``offloader topics``: the group, and its commands from the modules beside it.

:mod:`cli.topics.manage` (``list``, ``info``, ``delete``, ``offload-prefix``, ``offload-status``;
the JSON of every topics command), :mod:`cli.topics.produce`, :mod:`cli.topics.read` (with
:mod:`cli.topics.messages` for ``--format``/``--decode pulsar``), :mod:`cli.topics.policies`
(the topic's own offload policies) and :mod:`cli.topics.unload` (shared metadata store).
"""

from __future__ import annotations

import click

from cli.topics import manage, policies, produce, read, unload

__all__ = ["topics"]


@click.group()
def topics() -> None:
    """Produce to topics, offload their ledgers, read them back.

    Topic names are persistent://tenant/namespace/topic (tenant/ns/topic and a bare
    topic, meaning persistent://public/default/topic, work too).

    \b
    Examples:
      offloader namespaces create public/default
      offloader topics produce my-topic --synthetic 10000 --size 1K
      offloader topics offload-prefix my-topic --size-threshold 1M
      offloader topics info my-topic
    """


topics.add_command(manage.list_topics)
topics.add_command(manage.info)
topics.add_command(manage.delete)
topics.add_command(manage.offload_prefix)
topics.add_command(manage.offload_status)
topics.add_command(produce.produce)
topics.add_command(read.read)
topics.add_command(policies.set_offload_policies)
topics.add_command(policies.get_offload_policies)
topics.add_command(policies.remove_offload_policies)
topics.add_command(unload.unload)
