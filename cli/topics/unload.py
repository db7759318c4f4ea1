"""``offloader topics unload``: give up this broker's ownership of a topic (shared metadata
store), so that another broker may own it; see :mod:`cli.brokers.cluster`.

JSON (``--json``): ``{topic, unloaded: true, broker, offloaded_ledgers}``.
"""

from __future__ import annotations

import click

from cli.context import CliContext, pass_cli
from cli.render import echo_json
from cli.settings import open_offloader


@click.command()
@click.argument("topic")
@pass_cli
def unload(cli: CliContext, topic: str) -> None:
    """Release this broker's ownership of TOPIC (shared metadata store).

    Closes the current ledger and gives the topic up, so that another broker may produce to
    it. Refused while a ledger is only in this broker's home (offload it first), and on a
    broker that does not own the topic. The offloaded ledgers stay readable everywhere.

    \b
    Example:
      offloader --metadata postgresql://db/offloader topics unload persistent://public/default/t1
    """
    with open_offloader(cli) as offloader:
        offloaded = offloader.unload_topic(topic)
        me = offloader.broker_id
    if cli.json:
        echo_json({"topic": topic, "unloaded": True, "broker": me, "offloaded_ledgers": offloaded})
    else:
        click.echo(f"Unloaded {topic} from broker {me} ({len(offloaded)} offloaded ledger(s))")
